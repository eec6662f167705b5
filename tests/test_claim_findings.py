"""The claims review's findings (issue 'Claims that are right'), one test each, on
constructed multiverses whose answer is known. Findings 3 and 8 (correlation), 6 (Sobol
indices) and 10 (expected best) have their tests beside their claim type's; 4 and 7 are
in tests/test_claims.py."""
import numpy as np
import pandas as pd
import pytest

from multiverse import stats
from multiverse.claims import common, comparison, expected_best, trend, verdict
from multiverse.claims.context import Context, reference_universes
from multiverse.gp import IDENTITY
from multiverse.report_analysis import claims_table
from multiverse.space import SearchSpace
from multiverse.surrogate import fit_divergence, fit_surrogate, fit_values, per_universe, warp_for

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})
CLAIM = {"name": "c", "metric": "test_acc", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"], "relation": ">="}


def pos(us, name):
    return SPACE[name].to_unit([u[name] for u in us])


def adam(us):
    return np.array([u["optimizer"] == "adam" for u in us])


# --- finding 1: bounded metrics on a warped scale ------------------------------------
def test_finding_1_bounded_metric_samples_bands_and_maxima_stay_in_range():
    """Accuracies near 1 (and at chance where adam's lr is large): every posterior sample,
    band and expected maximum of the warped surrogate lies in [0, 1], where the same GP
    on the raw scale puts samples above 1."""
    us = SPACE.sobol(48, 0)
    acc = np.where(adam(us) & (pos(us, "lr") > 0.75), 0.1, 0.975 + 0.02 * pos(us, "batch_size"))
    acc = np.clip(acc + 0.01 * np.random.default_rng(0).standard_normal(len(us)), 0, 1)
    warped = fit_values(SPACE, us, acc[:, None], 0, warp_for("test_acc"))
    raw = fit_values(SPACE, us, acc[:, None], 0, IDENTITY)
    ref = SPACE.sobol(256, 1)
    f, g = warped.sample(ref, 256, 0), raw.sample(ref, 256, 0)
    assert 0 < f.min() and f.max() < 1
    assert (g > 1).mean() > 0.01  # the unbounded model leaves the range
    base = reference_universes(SPACE, 32, 1, fix="optimizer")
    bands = comparison.figure_data(warped, SPACE, CLAIM, base, None, 0, n_samples=64)["partial_dependence"]
    assert all(max(b[s]["hi"]) < 1 and min(b[s]["lo"]) > 0 for b in bands.values() for s in "ab")
    # the expected best of 11 universes does not saturate at 1: it stays near the best observed
    best = expected_best.gp_answer(warped, SPACE, {**CLAIM, "type": "expected_best"}, base, 128, 0, [11])
    top = acc.max()
    assert best["curve_a"]["hi"][0] < 1 and best["curve_b"]["mean"][0] < top + 0.01


# --- finding 2: diverged universes ---------------------------------------------------
def diverging_study(n=48, seed=0):
    """A results table where adam diverges for lr > 0.1 (chance accuracy, NaN loss, gap 0)."""
    us = SPACE.sobol(n, seed)
    rng = np.random.default_rng(seed)
    diverged = adam(us) & (np.log10([u["lr"] for u in us]) > -1)
    gap = np.where(diverged, 0.0, 0.02 + 0.05 * pos(us, "batch_size") + 0.005 * rng.standard_normal(n))
    df = pd.DataFrame([{**u, "universe": f"u{i}", "status": "diverged" if d else "ok", "gap": g,
                        "test_acc": 0.1 if d else 0.9, "train_loss": np.nan if d else 0.1}
                       for i, (u, d, g) in enumerate(zip(us, diverged, gap))])
    return us, df, diverged


def test_finding_2_diverged_universes_are_their_own_outcome():
    """A diverged universe's gap of 0 is not a perfect generaliser: the gap surrogate is
    fitted on converged universes only, divergence has its own model, and a gap claim is
    read where universes converge, saying so."""
    us, df, diverged = diverging_study()
    gap = fit_surrogate(df, SPACE, "gap", 0)
    assert gap.model.train_inputs[0].shape[0] == (~diverged).sum()
    acc = fit_surrogate(df, SPACE, "test_acc", 0)  # accuracy keeps them: chance is a real outcome
    assert acc.model.train_inputs[0].shape[0] == len(us)
    div = fit_divergence(df, SPACE, 0)
    p = div.median([{"optimizer": "adam", "lr": 0.5, "batch_size": 64}, {"optimizer": "adam", "lr": 1e-3, "batch_size": 64},
                    {"optimizer": "sgd", "lr": 0.5, "batch_size": 64}])
    assert p[0] > 0.5 > p[1] and p[2] < 0.5
    ctx = Context(space=SPACE, df=df, surrogates={"gap": gap}, divergence=div, samples=128, reference=64,
                  bootstrap=200, seed=0, universes=per_universe(df, SPACE, "gap")[0])
    assert np.isnan(ctx.values("gap")[diverged]).all() and np.isfinite(ctx.values("test_acc")).all()
    claim = {"name": "g", "metric": "gap", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"], "relation": ">"}
    res = comparison.analyse(claim, ctx, 0, None)
    assert 0.5 < res.converged_share < 0.95 and "read where universes converge" in res.read_where
    assert res.observed["n_a"] == (adam(us) & ~diverged).sum()


# --- finding 5: ties satisfy >= --------------------------------------------------------
def test_finding_5_ties_count_as_holding_a_greater_or_equal_claim():
    v = np.full(20, 0.5)
    groups = ["adam"] * 10 + ["sgd"] * 10
    assert comparison.observed_answer(v, groups, CLAIM, 200, 0)["verdict"] == "holds"
    assert comparison.observed_answer(v, groups, {**CLAIM, "relation": ">"}, 200, 0)["verdict"] == "fails"
    assert stats.holds_mask(np.zeros(3), ">=").all() and not stats.holds_mask(np.zeros(3), ">").any()
    assert stats.holds_mask(np.zeros(3), "<=").all()


# --- finding 9: the design does not read test data by default ------------------------
def test_finding_9_design_outcomes_default_to_validation_accuracy(default_config):
    from multiverse.spec import with_defaults

    bare = {k: v for k, v in default_config.items()}
    bare["design"] = {k: v for k, v in default_config["design"].items() if k != "outcomes"}
    assert with_defaults(bare)["design"]["outcomes"] == ["val_acc"]
    assert not any(m.startswith("test") or m == "gap" for m in with_defaults(default_config)["design"]["outcomes"])


# --- finding 11: a trend's conditions as a family ------------------------------------
def test_finding_11_a_trend_reports_the_family_probability_from_joint_samples():
    """A trend judged at 5 conditions: beside each condition's own P(holds), the
    probability that it holds at every one, from the same joint samples (never above
    the smallest condition's)."""
    us = SPACE.sobol(48, 2)
    y = 0.02 * pos(us, "batch_size") + 0.01 * np.random.default_rng(2).standard_normal(len(us))
    sur = fit_values(SPACE, us, y[:, None], 0)
    claim = {"name": "t", "type": "trend", "metric": "m", "dimension": "batch_size", "direction": "increasing",
             "given": ["lr"]}
    conds = trend.conditions(SPACE, claim)
    answers, family = trend.gp_family(sur, SPACE, claim, SPACE.enumerated(16, 3, canonical=False), conds, 256, 0)
    ps = [a["p_holds"] for a in answers]
    assert family["conditions"] == len(conds) == 4
    # the Frechet bounds of a joint probability from the same samples
    assert max(0.0, 1 - sum(1 - p for p in ps)) - 1e-12 <= family["p_all"] <= min(ps) + 1e-12
    assert family["p_all"] < min(ps)  # a family is harder to pass than its weakest member here
    result = common.result(claim, "trend", "m rises", [verdict.reading(a, stats.too_few(), None, ">", c["label"])
                                                       for c, a in zip(conds, answers)], family=family)
    table = claims_table([result])
    assert table.loc[0, "GP P(holds at every condition)"] == pytest.approx(round(family["p_all"], 3))
    assert table["GP P(holds at every condition)"].iloc[1:].isna().all()


# --- finding 12: a region of practical equivalence ------------------------------------
@pytest.mark.parametrize("difference, relation, expected", [
    (0.004, ">", "equivalent"),   # differ by less than the margin
    (0.004, ">=", "equivalent"),  # equivalent, hence also non-inferior
    (0.10, ">", "holds"),         # differ by more than the margin: superiority
    (-0.10, ">=", "fails"),
])
def test_finding_12_a_margin_gives_equivalent_or_holds(difference, relation, expected):
    us = SPACE.sobol(64, 4)
    y = 0.8 + 0.05 * pos(us, "lr") + difference * adam(us) + 0.005 * np.random.default_rng(4).standard_normal(len(us))
    claim = {**CLAIM, "metric": "m", "relation": relation, "margin": 0.03}
    sur = fit_values(SPACE, us, y[:, None], 0)
    gp = comparison.gp_answer(sur, SPACE, claim, reference_universes(SPACE, 64, 1, fix="optimizer"), 256, 0)
    obs = comparison.observed_answer(y, [u["optimizer"] for u in us], claim, 1000, 0)
    assert gp["verdict"] == expected, gp
    assert obs["verdict"] in (expected, "uncertain")
    if expected == "equivalent":
        assert gp["p_equivalent"] >= 0.95 and set(gp["regions"]["shares"]) == {"equivalent"}
    without = comparison.gp_answer(sur, SPACE, {k: v for k, v in claim.items() if k != "margin"},
                                   reference_universes(SPACE, 64, 1, fix="optimizer"), 256, 0)
    assert "p_equivalent" not in without and without["verdict"] != "equivalent"
