"""Claim verdicts on made-up multiverses whose answer is known."""
import numpy as np
import pandas as pd
import pytest

from multiverse.claims.common import result
from multiverse.claims.context import reference_universes
from multiverse.claims.regions import describe_regions
from multiverse.claims.verdict import judge, reading
from multiverse.claims.comparison import gp_answer, observed_answer
from multiverse.gp import fit_gp
from multiverse.report_analysis import claims_table
from multiverse.space import SearchSpace
from multiverse.surrogate import REPORT_KERNEL, Surrogate

SPACE = {
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
}
CLAIM = {"name": "c", "metric": "m", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"], "relation": ">="}


def _multiverse(effect, noise=0.02, n=40, seed=0):
    space = SearchSpace.from_config(SPACE)
    us = space.sobol(n, seed)
    rng = np.random.default_rng(seed)
    lr = np.log10([u["lr"] for u in us])
    y = np.array([0.6 + 0.05 * l + (effect(l) if u["optimizer"] == "adam" else 0.0) for u, l in zip(us, lr)])
    return space, us, y + noise * rng.standard_normal(n)


def _verdicts(effect, noise=0.02, seed=0):
    space, us, y = _multiverse(effect, noise, seed=seed)
    model = fit_gp(space, us, y, seed=0, kernel=REPORT_KERNEL)  # the report's surrogate
    base = reference_universes(space, 64, 1, fix="optimizer")
    gp = gp_answer(Surrogate.of(model, space), space, CLAIM, base, 256, seed=0)
    obs = observed_answer(y, [u["optimizer"] for u in us], CLAIM, 1000, seed=0)
    return gp, obs


def test_claim_that_holds_everywhere():
    gp, obs = _verdicts(lambda l: 0.1)
    assert gp["verdict"] == obs["verdict"] == "holds"
    assert gp["effect_lo"] < 0.1 < gp["effect_hi"]
    assert gp["fraction_holds_lo"] > 0.9


def test_claim_that_holds_nowhere():
    gp, obs = _verdicts(lambda l: -0.1)
    assert gp["verdict"] == obs["verdict"] == "fails"
    assert gp["effect_lo"] < -0.1 < gp["effect_hi"]
    assert gp["fraction_holds_hi"] < 0.1


def test_claim_that_flips_on_a_boundary():
    # adam better for lr > 1e-2 (log10 lr > -2), worse below: holds on half the space
    gp, _ = _verdicts(lambda l: 0.1 * np.sign(l + 2), noise=0.01)
    assert gp["fraction_holds_lo"] < 0.5 < gp["fraction_holds_hi"]
    assert 0.3 < gp["fraction_holds"] < 0.7
    # the flip is described in the space's own terms, at the right place
    (fail,) = [leaf for leaf in gp["regions"]["leaves"] if leaf["label"] == "fails"]
    threshold = float(fail["rule"].split("<")[1])
    assert fail["rule"].startswith("lr <") and 10**-2.4 < threshold < 10**-1.6
    assert gp["regions"]["accuracy"] > 0.9 and "fails for lr <" in gp["regions"]["text"]


def test_finding_4_regions_are_labelled_by_the_verdict_thresholds():
    """A region called 'holds' is one where the local P(holds) reaches 0.95, not where
    the posterior mean has the claimed sign: a small effect near the noise gets an
    'uncertain' region, and each leaf says how pure it is."""
    from multiverse.claims.regions import local_summary
    from multiverse.claims.comparison import comparison_universes, local_effects

    # adam better everywhere, by 0.1 at lr = 1 down to a hair (under the noise) at lr = 1e-4
    space, us, y = _multiverse(lambda l: 0.1 * (l + 4.2) / 4.2, noise=0.02)
    sur = Surrogate.of(fit_gp(space, us, y, seed=0), space)
    base = reference_universes(space, 64, 1, fix="optimizer")
    gp = gp_answer(sur, space, CLAIM, base, 256, seed=0)
    local = local_effects(sur.sample(comparison_universes(CLAIM, base), 256, 0), CLAIM, len(base))
    p = local_summary(local, CLAIM)["p_holds"]
    shares = gp["regions"]["shares"]
    assert shares["holds"] == pytest.approx(np.mean(p >= 0.95)) and shares.get("uncertain", 0) > 0.2
    (held,) = [leaf for leaf in gp["regions"]["leaves"] if leaf["label"] == "holds"]
    assert held["rule"].startswith("lr >=") and held["purity"] > 0.9
    # the sign of the mean would call nearly all of it 'holds'
    assert np.mean(local.mean(0) > 0) > shares["holds"] + 0.05


def test_pure_noise_is_rarely_a_confident_verdict():
    # Under no effect P(holds) is roughly uniform: a confident verdict ~10% of the time
    # and a 95% interval that misses zero ~5% of the time.
    gps = [_verdicts(lambda l: 0.0, noise=0.05, seed=s)[0] for s in range(6)]
    assert sum(g["verdict"] == "uncertain" for g in gps) >= 4
    assert sum(g["effect_lo"] < 0 < g["effect_hi"] for g in gps) >= 5


def test_observed_bootstrap_interval_covers_the_truth():
    rng = np.random.default_rng(0)
    covered = 0
    for i in range(100):
        a, b = rng.normal(0.3, 1, 30), rng.normal(0.0, 1, 30)
        v = observed_answer(np.r_[a, b], ["adam"] * 30 + ["sgd"] * 30, CLAIM, 500, seed=i)
        covered += v["effect_lo"] < 0.3 < v["effect_hi"]
    assert 88 <= covered <= 99  # nominal 95%


def test_finding_7_disagree_only_when_credibly_opposite():
    """'They disagree' only when one holds and the other fails, or the intervals exclude
    each other; a confident answer beside an uncertain one whose interval contains it is
    a difference in power: the other side cannot tell."""
    holds = {"verdict": "holds", "effect": 0.16, "effect_lo": 0.10, "effect_hi": 0.22}
    wide = {"verdict": "uncertain", "effect": 0.13, "effect_lo": -0.14, "effect_hi": 0.41}
    fails = {"verdict": "fails", "effect": -0.2, "effect_lo": -0.3, "effect_hi": -0.1}
    assert judge(holds, dict(holds))["agree"] is True
    j = judge(holds, wide, ">=")
    assert j["agree"] is None and "disagree" not in j["summary"] and "cannot tell" in j["summary"]
    j = judge(wide, holds, ">=")
    assert j["agree"] is None and "the GP cannot tell" in j["summary"]
    assert judge(holds, fails)["agree"] is False and "disagree" in judge(holds, fails)["summary"]
    apart = {"verdict": "uncertain", "effect": 0.5, "effect_lo": 0.3, "effect_hi": 0.9}
    assert judge(holds, apart)["agree"] is False  # intervals exclude each other
    equivalent = {"verdict": "equivalent", "effect": 0.0, "effect_lo": -0.01, "effect_hi": 0.01}
    assert judge(holds, equivalent, ">")["agree"] is False  # superiority vs equivalence
    j = judge(holds, {**equivalent, "effect_hi": 0.12}, ">=")  # non-inferior both ways
    assert j["agree"] is True and "compatible" in j["summary"]
    near = {"verdict": "fails", "effect": -0.005, "effect_lo": -0.012, "effect_hi": -0.001}
    assert judge(near, equivalent, ">")["agree"] is True  # not greater, and within the margin
    assert judge(holds, {"verdict": "too few universes"})["agree"] is None


def test_claims_table_gives_every_estimate_an_interval():
    gp, obs = _verdicts(lambda l: 0.1)
    t = claims_table([result(CLAIM, "comparison", "adam >= sgd", [reading(gp, obs, None, ">=")])])
    assert "[" in t.loc[0, "GP estimate [95% CrI]"] and "[" in t.loc[0, "observed estimate [95% CI]"]
    assert "[" in t.loc[0, "GP share of multiverse where it holds [surely, possibly]"]
    assert isinstance(t, pd.DataFrame) and len(t) == 1


def test_scattered_exceptions_are_not_called_a_region():
    space = SearchSpace.from_config(SPACE)
    us = space.sobol(100, 0)
    labels = np.array(["holds"] * 100, dtype=object)
    labels[::20] = "fails"  # 5% scattered failures: no region of 10% or more
    regions = describe_regions(space, us, labels, exclude={"optimizer"})
    assert regions["shares"] == {"holds": 0.95, "fails": 0.05}
    assert regions["text"] == "holds on 95%, fails on 5% of the multiverse"
    assert all(leaf["label"] == "holds" for leaf in regions["leaves"])


def test_report_on_a_space_with_one_numeric_dimension(tmp_path):
    """A posterior map needs two numeric dimensions: with one, the report still builds,
    and the map's figure says why it is missing."""
    import yaml

    from multiverse.spec import report_metrics, with_defaults
    from multiverse.report import build_report

    with open("tests/config/tiny.yaml") as f:
        config = yaml.safe_load(f)
    config["space"] = {"optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
                       "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True}}
    config["claims"] = [{**CLAIM, "metric": "test_acc"}]
    config["design"]["outcomes"] = ["test_acc"]
    config = with_defaults(config)
    us = SearchSpace.from_config(config["space"]).sobol(16, 0)
    rng = np.random.default_rng(0)
    df = pd.DataFrame([{**u, "universe": f"u{i}", "seed": 0, "status": "ok",
                        "test_acc": 0.9 + 0.03 * (u["optimizer"] == "adam") + 0.01 * rng.standard_normal()}
                       for i, u in enumerate(us)])
    df.to_parquet(tmp_path / "table.parquet")
    per_metric = {k: {m: str(tmp_path / f"{k}_{m}.png") for m in report_metrics(config)}
                  for k in ("maps", "curves", "sobol", "loo")}
    out = {"claims_json": str(tmp_path / "claims.json"), "claims_csv": str(tmp_path / "claims.csv"),
           "claims_figure": str(tmp_path / "claims.png"), "outcomes": str(tmp_path / "outcomes.png"),
           "html": str(tmp_path / "report.html"), **per_metric,
           "claim_figures": {"c": str(tmp_path / "c.png")}, "where_figures": {"c": str(tmp_path / "c_where.png")}}
    result = build_report(str(tmp_path / "table.parquet"), config, out)
    assert result["claims"][0].gp["verdict"] in ("holds", "uncertain")
    assert (tmp_path / "maps_test_acc.png").stat().st_size > 0 and (tmp_path / "report.html").exists()


def test_the_pages_claims_table_shows_the_verdict_word_and_no_column_that_is_na_for_every_claim():
    import numpy as np
    import pandas as pd

    from multiverse.html import claims_table_html

    table = pd.DataFrame({"claim": ["a", "b"], "margin": [np.nan, np.nan], "verdict": [
        "holds (design-based: +0.1 [+0.0, +0.2])", "too few universes to say"], "GP P(equivalent)": ["n/a", "n/a"],
        "GP P(holds)": [0.97, np.nan], "where it holds, fails or is uncertain (GP)": ["holds for lr < 0.03", ""]})
    import re

    page = claims_table_html(table)
    assert re.findall(r"<th>(.*?)</th>", page) == ["claim", "verdict", "GP P(holds)"]
    assert re.findall(r"<td>(holds|too few universes|[^<]*)</td>", page)[1::3] == ["holds", "too few universes"]


def test_a_metric_spanning_decades_gets_a_log_axis_and_others_keep_a_linear_one():
    from multiverse import plots as P

    fig, axes = P.plt.subplots(1, 3)
    P.value_axis(axes[0], [0.01, 0.02, 10.0, float("nan")])  # one collapsed run's train loss
    P.value_axis(axes[1], [0.5, 0.9, 0.7])                    # accuracies
    P.value_axis(axes[2], [-0.01, 0.2, 30.0])                  # a gap can be negative: never log
    assert [ax.get_yscale() for ax in axes] == ["log", "linear", "linear"]
    P.plt.close(fig)
