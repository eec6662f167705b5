"""Design-based answers (multiverse.estimators, multiverse.inference): each estimator on constructed
multiverses whose truth is known, against ppi-python where both cover the case, and the
randomised design's probabilities."""
import numpy as np
import pandas as pd
import pytest

from multiverse import estimators as DB
from multiverse import inference
from multiverse.claims import comparison, correlation, expected_best, trend
from multiverse.claims.context import Context
from multiverse.claims.verdict import decide
from multiverse.design import sampling_record
from multiverse.design_gp import randomised_draws, sampling_probabilities
from multiverse.space import SearchSpace

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})


def surface(us):
    """A metric over the multiverse: adam better at small lr, a cliff at large lr, a
    gentle rise with batch size."""
    lr = SPACE["lr"].to_unit([u["lr"] for u in us])
    b = SPACE["batch_size"].to_unit([u["batch_size"] for u in us])
    adam = np.array([u["optimizer"] == "adam" for u in us], dtype=float)
    return 0.6 + 0.2 * adam * (lr < 0.6) - 0.3 * (lr > 0.8) + 0.05 * b


def surface2(us):
    """A second metric that falls as the first rises (plus its own wiggle)."""
    lr = SPACE["lr"].to_unit([u["lr"] for u in us])
    return 0.9 - 0.8 * surface(us) + 0.05 * np.sin(6 * lr)


def truth(statistic, n=20000, seed=99):
    """A statistic of the multiverse on a large uniform sample."""
    return statistic(SPACE.random(n, seed))


def study(seed, n0=16, rounds=(8, 8, 8, 8), noise=0.02, sampling="uniform"):
    """A study table: round 0 Sobol, then uniform random rounds (``sampling='uniform'``)
    or greedy rounds (weights unknown), with the two metrics plus noise."""
    rng = np.random.default_rng(seed)
    us = SPACE.sobol(n0, seed)
    rnd = [0] * n0
    for r, n in enumerate(rounds, 1):
        us += SPACE.random(n, seed * 100 + r)
        rnd += [r] * n
    y = surface(us) + noise * rng.standard_normal(len(us))
    z = surface2(us) + noise * rng.standard_normal(len(us))
    df = pd.DataFrame([{"universe": f"u{i}", "round": r, **u, "val_acc": a, "test_acc": b, "status": "ok"}
                       for i, (u, r, a, b) in enumerate(zip(us, rnd, y, z))])
    if sampling == "uniform":
        df["design_weight"], df["design_draws"] = 1.0, 1.0
    else:  # a greedy design: only round 0 was drawn at random
        df["strategy"] = "gp-ivr"
    return df, us


def context(df, us, seed=0):
    from multiverse.surrogate import universe_means

    values = lambda m: universe_means(df, SPACE, m)  # noqa: E731
    ctx = Context(space=SPACE, df=df, surrogates={}, divergence=None, samples=256, reference=64, bootstrap=500,
                  seed=seed, universes=us)
    ctx.values = values
    return ctx


COMPARISON = {"name": "c", "metric": "val_acc", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"], "relation": ">="}
TREND = {"name": "t", "type": "trend", "metric": "val_acc", "dimension": "batch_size", "direction": "increasing"}
CORRELATION = {"name": "r", "type": "correlation", "x": "val_acc", "y": "test_acc", "relation": "negative"}


def comparison_truth(us):
    y = surface(us)
    g = np.array([u["optimizer"] for u in us])
    return y[g == "adam"].mean() - y[g == "sgd"].mean()


def trend_truth(us):
    y = surface(us)
    t = SPACE["batch_size"].to_unit([u["batch_size"] for u in us])
    return np.polyfit(t, y, 1)[0]


def tau_truth(us, n=3000, noise=0.02):
    """Kendall's tau between the metrics as a training run reports them (its seed noise
    included: a tau over universes reads each universe's one outcome)."""
    from scipy.stats import kendalltau

    rng = np.random.default_rng(5)
    us = us[:n]
    return kendalltau(surface(us) + noise * rng.standard_normal(n), surface2(us) + noise * rng.standard_normal(n)).statistic


BEST = {**COMPARISON, "type": "expected_best", "min_budget": 2}
KS = [2, 4, 8]


def best_truth(us, noise=0.02):
    """The expected best of adam minus sgd at the least favourable budget, over the
    metric as a training run reports it (seed noise included), large samples of each group."""
    from multiverse import stats

    y = surface(us) + noise * np.random.default_rng(7).standard_normal(len(us))
    g = np.array([u["optimizer"] for u in us])
    return float(np.min(stats.mean_max(y[g == "adam"], KS) - stats.mean_max(y[g == "sgd"], KS)))


# --- against ppi-python ----------------------------------------------------------------
def one_round(n=40, N=4000, seed=0):
    """One uniform round with a fixed (deliberately biased) predictor."""
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    xu = rng.random(N)
    f = lambda v: 0.8 * v + 0.1  # noqa: E731
    y = v_true = x + 0.1 * rng.standard_normal(n)  # noqa: F841
    sample = DB.Sample([{"x": v} for v in x], np.ones(n), np.ones(n), np.zeros(n, dtype=int), np.ones(n, dtype=int),
                       np.full(n, -1))
    return x, xu, y, f, sample


def test_mean_matches_ppi_python():
    ppi = pytest.importorskip("ppi_py")
    x, xu, y, f, sample = one_round()
    h = lambda us, v: v["y"][:, None]  # noqa: E731
    m = DB.means(h, sample, {"y": y}, {"y": f(x)}, [{"x": v} for v in xu], {"y": f(xu)[None]})
    point, se = DB.estimate(lambda m: m[..., 0], m)
    assert point == pytest.approx(float(ppi.ppi_mean_pointestimate(y, f(x), f(xu), lam=1)[0]), abs=1e-12)
    lo, hi = ppi.ppi_mean_ci(y, f(x), f(xu), alpha=0.05, lam=1)
    ours = DB.summarise(point, se, len(y) - 1, ">")
    # ppi-python's normal interval; ours is Student's t with a jackknife over both sets
    assert ours["effect_lo"] == pytest.approx(float(lo[0]), abs=0.02 * (hi[0] - lo[0]) + 1e-3)
    assert ours["effect_hi"] == pytest.approx(float(hi[0]), abs=0.02 * (hi[0] - lo[0]) + 1e-3)


def test_slope_matches_ppi_python_ols():
    ppi = pytest.importorskip("ppi_py")
    x, xu, y, f, sample = one_round(seed=1)
    X, Xu = np.c_[np.ones_like(x), x], np.c_[np.ones_like(xu), xu]
    h = lambda us, v: DB.ols_components(np.c_[np.ones(len(us)), [u["x"] for u in us]], v["y"], np.ones(len(us), bool))  # noqa: E731
    m = DB.means(h, sample, {"y": y}, {"y": f(x)}, [{"x": v} for v in xu], {"y": f(xu)[None]})
    point, se = DB.estimate(DB.ols_slope(2), m)
    # ppi-python rectifies with the drawn universes' own Gram matrix, ours with the
    # multiverse's (known: the regressors are the choices): the two agree to well
    # within a standard error, and so do their intervals' widths
    ref = ppi.ppi_ols_pointestimate(X, y, f(x), Xu, f(xu), lam=1)
    assert abs(point - float(ref[1])) < 0.25 * se
    lo, hi = ppi.ppi_ols_ci(X, y, f(x), Xu, f(xu), alpha=0.05, lam=1)
    assert se * 2 * 1.96 == pytest.approx(float(hi[1] - lo[1]), rel=0.2)


# --- constructed multiverses ----------------------------------------------------------
def test_each_claim_type_reads_a_constructed_multiverse():
    df, us = study(0)
    ctx = context(df, us)
    c = comparison.design_answer(COMPARISON, ctx)
    assert c["effect_lo"] <= truth(comparison_truth) <= c["effect_hi"] and c["verdict"] == "holds"
    t = trend.design_answer(SPACE, TREND, ctx)
    assert abs(t["effect"] - truth(trend_truth)) < 3 * t["se"]  # one draw; coverage is tested below
    r = correlation.design_answer(CORRELATION, ctx)
    assert r["effect_lo"] <= truth(tau_truth) <= r["effect_hi"] and r["verdict"] == "holds"
    e = expected_best.design_answer(BEST, ctx, KS, (0, 1))
    assert e["verdict"] in ("holds", "uncertain") and e["effect"] > 0
    for a in (c, t, r, e):
        assert a["n"] == 48 and a["effect_lo"] < a["effect"] < a["effect_hi"]


def test_a_greedy_design_reads_the_uniform_universes_only():
    df, us = study(1, sampling="greedy")
    ctx = context(df, us)
    drawn = ctx.drawn()
    assert len(drawn.sample) == 16 and set(drawn.sample.round) == {0}
    assert "32 chosen by a greedy design left out" in drawn.sample.note
    assert comparison.design_answer(COMPARISON, ctx)["n"] == 16


def test_below_24_drawn_universes_there_is_no_design_based_answer():
    """The small-n rule (estimators.MIN_DRAWN): the t interval over the jackknife
    undercovered below about 24 uniform universes, so 23 give no design-based answer and
    the verdict is the model's; 24 give one."""
    assert DB.MIN_DRAWN == 24
    for n0, answered in ((23, False), (24, True)):
        df, us = study(5, n0=n0, rounds=(8, 8), sampling="greedy")
        a = comparison.design_answer(COMPARISON, context(df, us))
        assert a["n"] == n0 and (a["verdict"] != "too few universes") == answered, (n0, a)
        assert np.isfinite(a["effect_lo"]) == answered


def test_predictors_never_see_the_universe_they_correct():
    df, us = study(2)
    drawn = context(df, us).drawn()
    s = drawn.sample
    for k in range(len(drawn.slot_rounds)):
        train = set(drawn.training_set(k).tolist())
        mine = set(s.index[s.slot == k].tolist())
        assert train and mine and not (train & mine)
        t, _ = drawn.slot_rounds[k]
        if t > 0:  # fitted on earlier rounds only
            assert max(drawn.all_rounds[list(train)]) < t


def test_weights_change_the_estimate_as_inverse_probabilities_should():
    """Doubling a universe's weight counts it twice: the same as drawing it twice."""
    x, xu, y, f, sample = one_round(n=10, seed=3)
    h = lambda us, v: v["y"][:, None]  # noqa: E731
    ref = [{"x": v} for v in xu]
    twice = DB.Sample(sample.universes + sample.universes[:1], np.ones(11), np.ones(11), np.zeros(11, dtype=int),
                      np.ones(11, dtype=int), np.full(11, -1))
    a = DB.means(h, twice, {"y": np.r_[y, y[:1]]}, {"y": np.r_[f(x), f(x[:1])]}, ref, {"y": f(xu)[None]}).value
    w = np.ones(10)
    w[0] = 2
    weighted = DB.Sample(sample.universes, w, w.copy(), sample.slot, sample.round, sample.fold)
    b = DB.means(h, weighted, {"y": y}, {"y": f(x)}, ref, {"y": f(xu)[None]}).value
    assert a == pytest.approx(b)


@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["uniform", "greedy"])
def test_coverage_over_repeated_draws(sampling, monkeypatch):
    """The 95% intervals of each claim type hold the truth in at least 22 of 24 draws,
    reading every universe (uniform rounds) or the 24 of round 0 (a greedy design).
    Measured (2026-12-06): 24, 24, 24, 24 of 24 (uniform) and 24, 24, 24, 23 (greedy), with
    the report's reference sets and with the smaller ones below alike."""
    # a smaller reference set than the report's (8,192 and 1,024 points): its error is in the
    # jackknife, so the intervals stay valid, and the test takes less time (CI: 335 s for the
    # uniform variant with the full sets)
    monkeypatch.setattr(inference, "REFERENCE_MEANS", 2048)
    monkeypatch.setattr(inference, "REFERENCE_PAIRS", 256)
    truths = {"comparison": truth(comparison_truth), "trend": truth(trend_truth), "correlation": truth(tau_truth),
              "expected_best": truth(best_truth)}
    hits = {k: 0 for k in truths}
    for seed in range(24):
        # a greedy design's round 0 holds 24 universes here, the fewest a design-based answer reads
        df, us = study(100 + seed, sampling=sampling) if sampling == "uniform" else \
            study(100 + seed, n0=24, rounds=(8, 8, 8), sampling=sampling)
        ctx = context(df, us, seed)
        answers = {"comparison": comparison.design_answer(COMPARISON, ctx),
                   "trend": trend.design_answer(SPACE, TREND, ctx),
                   "correlation": correlation.design_answer(CORRELATION, ctx),
                   "expected_best": expected_best.design_answer(BEST, ctx, KS, (0, 1))}
        for k, a in answers.items():
            hits[k] += int(a["effect_lo"] <= truths[k] <= a["effect_hi"])
    print(f"{sampling}: the 95% intervals held the truth in {hits} of 24 draws")
    assert all(h >= 22 for h in hits.values()), hits


# --- the randomised design ------------------------------------------------------------
def test_randomised_probabilities_sum_to_one_and_are_mixed_with_uniform():
    score = np.r_[np.zeros(50), np.ones(50) * 10]
    p = sampling_probabilities(score, 0.5)
    assert p.sum() == pytest.approx(1.0) and p.min() == pytest.approx(0.5 / 100)
    us, info, diag = randomised_draws(SPACE, lambda c: np.linspace(0, 1, len(c)), 8, 0, 32, 0.5)
    M = len(SPACE.level_combinations()) * 32
    assert diag["probability_sum"] == pytest.approx(1.0) and diag["candidates"] == M
    for d in info:
        assert d["weight"] == pytest.approx(1 / (M * d["probability"])) and d["weight"] <= 1 / 0.5 + 1e-12
    # inverse-probability weights make any function's weighted mean unbiased for the candidates' mean
    g = np.random.default_rng(0).random(M)
    pw = sampling_probabilities(np.linspace(0, 1, M), 0.5)
    assert np.sum(pw * g / (M * pw)) == pytest.approx(g.mean())


def test_design_file_records_each_universes_probability():
    from multiverse.design import design_state

    space_cfg = {"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
                 "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]}}
    design = {"strategy": "gp-ivr", "outcomes": ["val_acc"], "candidates": 32, "reference": 32, "replicates": 1,
              "categorical": "onehot", "sampling": "randomised", "uniform_share": 0.5}
    r0 = design_state(0, [6, 4], 2, space_cfg, design, 0, [], {})
    assert all(u["sampling"] == "uniform" and u["weight"] == 1.0 for u in r0["universes"])
    prev = [{"id": u["id"], "params": u["params"], "status": "ok",
             "metrics": {"val_acc": 0.5 + 0.3 * (u["params"]["optimizer"] == "adam") - 0.1 * u["params"]["lr"]}}
            for u in r0["universes"]]
    r1 = design_state(1, [6, 4], 2, space_cfg, design, 0, prev, {})
    assert r1["diagnostics"]["probability_sum"] == pytest.approx(1.0)
    for u in r1["universes"]:
        assert u["sampling"] == "randomised" and u["weight"] == pytest.approx(1 / (u["candidates"] * u["probability"]))
    greedy = sampling_record(1, "gp-ivr", {}, 3)
    assert all(g["weight"] is None for g in greedy)


# --- one verdict ------------------------------------------------------------------------
def test_the_verdict_rests_on_the_design_based_answer_and_says_when_they_disagree():
    design = {"verdict": "uncertain", "effect": 0.01, "effect_lo": -0.02, "effect_hi": 0.04, "p_holds": 0.8}
    gp = {"verdict": "holds", "effect": 0.1, "effect_lo": 0.08, "effect_hi": 0.12, "p_holds": 1.0}
    d = decide(design, gp, ">")
    assert d["verdict"] == "uncertain" and d["rests_on"] == "design" and "they disagree" in d["summary"]
    # no design-based answer: a poor surrogate never gives a confident verdict alone
    few = {"verdict": "too few universes"}
    assert decide(few, gp, ">", surrogate_ok=False)["verdict"] == "uncertain"
    assert decide(few, gp, ">", surrogate_ok=True)["verdict"] == "holds"


@pytest.mark.slow
def test_badge_table_and_section_agree_on_every_claim_of_the_default_study(tmp_path):
    """The default study's config and claims, on a table of 48 universes (16 Sobol, then
    32 drawn uniformly) whose metrics follow the digits MLP's shape: every claim's badge,
    its table row's verdict and its section's verdict say the same thing, the one
    verdict of the design-based answer."""
    import html as html_
    import json
    from pathlib import Path

    from multiverse.spec import load_config, report_metrics, with_defaults
    from multiverse.report import build_report

    config = with_defaults(load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml"))
    space = SearchSpace.from_config(config["space"])
    us = space.sobol(16, 0) + space.random(32, 1)
    rng = np.random.default_rng(0)
    rows = []
    for i, u in enumerate(us):
        lr = space["lr"].to_unit([u["lr"]])[0]
        adaptive = u["optimizer"] in ("adam", "rmsprop")
        cliff = lr > (0.55 if adaptive else 0.85)
        test = 0.1 if cliff else 0.93 + 0.03 * (not adaptive) * lr - 0.05 * (1 - lr) + 0.01 * rng.standard_normal()
        train_loss = 2.3 if cliff else 0.02 + 0.2 * (1 - lr) ** 2 * np.exp(0.1 * rng.standard_normal())
        gap = 0.0 if cliff else 0.05 - 0.03 * lr + 0.004 * adaptive + 0.005 * rng.standard_normal()
        rows.append({**u, "universe": f"u{i}", "round": int(i >= 16) + (i - 16) // 8 * (i >= 16), "seed": 0,
                     "status": "ok", "test_acc": test, "val_acc": test + 0.005 * rng.standard_normal(),
                     "train_acc": min(1.0, test + gap), "gap": gap, "train_loss": train_loss,
                     "val_loss": train_loss + 0.1, "test_loss": train_loss + 0.1, "design_weight": 1.0,
                     "design_draws": 1.0})
    pd.DataFrame(rows).to_parquet(tmp_path / "table.parquet")
    names = [c["name"] for c in config["claims"]]
    per_metric = {k: {m: str(tmp_path / f"{k}_{m}.png") for m in report_metrics(config)}
                  for k in ("maps", "curves", "sobol", "loo")}
    out = {"claims_json": str(tmp_path / "claims.json"), "claims_csv": str(tmp_path / "claims.csv"),
           "claims_figure": str(tmp_path / "claims.png"), "outcomes": str(tmp_path / "outcomes.png"),
           "html": str(tmp_path / "report.html"), **per_metric,
           "claim_figures": {n: str(tmp_path / f"{n}.png") for n in names},
           "where_figures": {n: str(tmp_path / f"{n}_where.png") for n in names}}
    build_report(str(tmp_path / "table.parquet"), config, out)
    claims = json.loads((tmp_path / "claims.json").read_text())["claims"]
    table = pd.read_csv(tmp_path / "claims.csv")
    page = html_.unescape((tmp_path / "report.html").read_text())
    assert len(claims) == len(names)
    for c in claims:
        badge = c["headline"]["badge"]
        assert badge == c["verdict"] and c["summary"].startswith(badge)
        assert c["rests_on"] == "design" and c["design"]["n"] == 48
        assert c["summary"].startswith(c["design"]["verdict"])
        row = table[table["claim"] == c["statement"]]
        assert len(row) == 1 and row["verdict"].iloc[0] == c["summary"]
        assert f"<b>Verdict:</b> {c['summary']}" in page
        assert f"{badge}</a>{c['headline']['text']}" in page
