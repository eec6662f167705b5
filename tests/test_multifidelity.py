"""The multi-fidelity estimator (multiverse.estimators: continued_outcomes, power_tuning,
tuned_outcomes, multifidelity_mean_ci, means(continuation=...)): every universe trained at
a low fidelity, a random subset continued to full fidelity at stated probabilities.
Constructed multiverses with a known truth, against ppi-python, and coverage over
repeated draws (pure numpy: fast)."""

import numpy as np
import pytest

from multiverse import estimators as E

#: The multiverse: choices x uniform on [0, 1]; the full-fidelity metric and a
#: low-fidelity reading of it (biased, noisier), as a short training is of a long one.
TRUTH = float(np.mean(np.sin(3 * np.linspace(0, 1, 2_000_001))))


def draw(rng, n, good=True):
    x = rng.random(n)
    y = np.sin(3 * x) + 0.15 * rng.standard_normal(n)
    low = 0.7 * y - 0.2 + 0.05 * rng.standard_normal(n) if good else rng.standard_normal(n)
    return x, y, low


def uniform_continuation(rng, n, k):
    xi = np.zeros(n, bool)
    xi[rng.choice(n, k, replace=False)] = True
    return xi, np.full(n, k / n)


def active_continuation(rng, low, share, floor=0.1):
    """Probabilities that follow the low-fidelity outcome (more where it is high: a
    stand-in for the GP's uncertainty), never below ``floor``, summing to ``share * n``."""
    score = np.abs(low - np.median(low)) + 0.1
    p = np.clip(share * len(low) * score / score.sum(), floor, 1.0)
    return rng.random(len(low)) < p, p


def test_the_point_matches_ppi_python_at_a_given_weight():
    ppi = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(0)
    x, y, low = draw(rng, 400)
    xi, p = uniform_continuation(rng, 400, 60)
    for lam in (0.0, 0.7, 1.0):
        point, lo, hi = E.multifidelity_mean_ci(np.where(xi, y, np.nan), low, xi, p, lam=lam)
        assert point == pytest.approx(float(ppi.ppi_mean_pointestimate(y[xi], low[xi], low, lam=lam)[0]), abs=1e-12)
        assert lo < point < hi
        # ppi-python's interval (an independent unlabelled set, normal) and ours (nested
        # phases, Student's t) are of one width to within a fifth
        plo, phi = (float(v[0]) for v in ppi.ppi_mean_ci(y[xi], low[xi], low, alpha=0.05, lam=lam))
        assert hi - lo == pytest.approx(phi - plo, rel=0.2)
    # power-tuned, ours weighs the predictor by the regression of y on it (1.36 here, since
    # the low fidelity reads 0.7 y); ppi-python clips its weight to [0, 1]: ours is narrower
    point, lo, hi = E.multifidelity_mean_ci(np.where(xi, y, np.nan), low, xi, p)
    plo, phi = (float(v[0]) for v in ppi.ppi_mean_ci(y[xi], low[xi], low, alpha=0.05))
    assert hi - lo < phi - plo


def test_a_continued_universe_stands_for_the_ones_not_continued():
    """Pseudo-outcomes are unbiased for the full-fidelity values whatever the predictor:
    averaged over many continuation draws of one first phase, their mean is the mean of y."""
    rng = np.random.default_rng(1)
    x, y, low = draw(rng, 50)
    p = np.linspace(0.1, 0.9, 50)
    tuned = np.array([[0.3], [2.0]])  # a deliberately wrong predictor
    means = [E.continued_outcomes(y, low, rng.random(50) < p, p, tuned).mean() for _ in range(20_000)]
    assert np.mean(means) == pytest.approx(y.mean(), abs=4 * np.std(means) / np.sqrt(len(means)))


def test_probabilities_must_be_stated_and_positive():
    y, low = np.ones(3), np.ones(3)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        E.continued_outcomes(y, low, np.array([True, False, True]), np.array([0.5, 0.0, 0.0]))
    # a universe not continued may have any probability; one continued at 1 is read as it is
    z = E.continued_outcomes(np.array([2.0, np.nan, 4.0]), low, np.array([True, False, True]),
                             np.array([1.0, 0.5, 1.0]), np.array([[0.0], [1.0]]))
    assert z[:, 0].tolist() == [2.0, 1.0, 4.0]


@pytest.mark.parametrize("design", ["uniform", "active"])
def test_coverage_over_repeated_draws_and_tighter_than_the_continued_alone(design):
    """400 first phases of 200 universes, about a quarter continued: the 95% interval holds
    the truth in at least 92% of draws, and with a predictor that tracks the metric it is
    narrower than the continued universes' alone (lam = 0) at the same compute.
    Measured (2026-12-07): uniform 93.8% / width ratio 0.54, active 95.8% / 0.63."""
    rng = np.random.default_rng(2)
    hits, ratio = 0, []
    for _ in range(400):
        x, y, low = draw(rng, 200)
        xi, p = uniform_continuation(rng, 200, 50) if design == "uniform" else active_continuation(rng, low, 0.25)
        yobs = np.where(xi, y, np.nan)
        point, lo, hi = E.multifidelity_mean_ci(yobs, low, xi, p)
        _, lo0, hi0 = E.multifidelity_mean_ci(yobs, low, xi, p, lam=0.0)
        hits += lo <= TRUTH <= hi
        ratio.append((hi - lo) / (hi0 - lo0))
    print(f"{design}: coverage {hits / 400:.3f}, width / continued-alone width {np.mean(ratio):.2f}")
    assert hits / 400 >= 0.92
    assert np.mean(ratio) < 0.8


def test_a_useless_predictor_never_widens_the_interval():
    """A low-fidelity reading that is pure noise is tuned away: in every draw the interval
    is no wider than with no predictor (the continued universes' weighted mean)."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        x, y, low = draw(rng, 120, good=False)
        xi, p = uniform_continuation(rng, 120, 30)
        yobs = np.where(xi, y, np.nan)
        z = E.tuned_outcomes(yobs, low, xi, p)[:, 0]
        flat = E.continued_outcomes(yobs, low, xi, p, np.array([[np.mean(y[xi])], [0.0]]))[:, 0]
        assert z.std() <= flat.std() + 1e-12


def test_means_reads_pseudo_outcomes_with_the_gp_correction_on_top():
    """E.means with a continuation: the first phase's GP correction and the second
    phase's together; the design-based jackknife's interval holds the truth in at least
    90% of 200 draws."""
    rng = np.random.default_rng(4)
    ref = [{"x": v} for v in np.linspace(0, 1, 256)]
    f = lambda v: np.sin(3 * v) - 0.1  # noqa: E731  (a slightly biased surrogate)
    h = lambda us, vals: vals["y"][:, None]  # noqa: E731
    hits = 0
    for _ in range(200):
        x, y, low = draw(rng, 120)
        xi, p = uniform_continuation(rng, 120, 30)
        n = len(x)
        sample = E.Sample([{"x": v} for v in x], np.ones(n), np.ones(n), np.zeros(n, dtype=int), np.zeros(n, dtype=int),
                          np.full(n, -1))
        m = E.means(h, sample, {"y": np.where(xi, y, np.nan)}, {"y": f(x)}, ref, {"y": f(np.linspace(0, 1, 256))[None]},
                    continuation=E.Continuation({"y": low}, xi, p))
        point, se = E.estimate(lambda v: v[..., 0], m)
        a = E.summarise(float(point), float(se), n - 1, ">")
        hits += a["effect_lo"] <= TRUTH <= a["effect_hi"]
    assert hits / 200 >= 0.9


def test_pair_pseudo_outcomes_cover_kendalls_tau_over_repeated_draws():
    """Kendall's tau of (y, x) over the multiverse from pairs of continued universes
    (E.pair_means(continuation=...), xi_i xi_j / (pi_i pi_j)): the interval holds the
    truth in at least 90% of 200 draws, and never is wider than the continued alone give."""
    from multiverse.claims.correlation import design_components

    kernel, tau = design_components({"x": "x", "y": "y"})
    # the truth: tau of (x, sin 3x + noise) over the multiverse, from a large sample
    rng = np.random.default_rng(11)
    xb, yb, _ = draw(rng, 3000)
    big = {"x": xb, "y": yb}
    k = kernel(big, big)
    truth = float(tau(k.sum((0, 1)) / (len(xb) * (len(xb) - 1))))
    hits = 0
    for _ in range(200):
        x, y, low = draw(rng, 80)
        xi, p = uniform_continuation(rng, 80, 30)
        n = len(x)
        sample = E.Sample([{}] * n, np.ones(n), np.ones(n), np.full(n, -1), np.zeros(n, dtype=int), np.full(n, -1))
        obs = {"x": x, "y": np.where(xi, y, np.nan)}
        cont = E.Continuation({"x": x, "y": low}, xi, p)
        m = E.pair_means(kernel, sample, obs, lambda s: {}, {"x": np.zeros((0, 1)), "y": np.zeros((0, 1))},
                         np.zeros(1, dtype=int), continuation=cont)
        flat = E.pair_means(kernel, sample, obs, lambda s: {}, {"x": np.zeros((0, 1)), "y": np.zeros((0, 1))},
                            np.zeros(1, dtype=int), continuation=cont, lam=0.0)
        point, se = E.estimate(tau, m)
        assert se <= E.estimate(tau, flat)[1] * 1.5  # per component the smaller variance of the two
        a = E.summarise(float(point), float(se), n - 1, ">")
        hits += a["effect_lo"] <= truth <= a["effect_hi"]
    assert hits / 200 >= 0.9


def test_continued_pairs_are_unbiased_for_every_pair():
    """E[pseudo-outcome of a pair] over the continuation draw is the pair's own kernel,
    whatever the predictor (exact expectation over all 2^4 draws of four universes)."""
    import itertools

    rng = np.random.default_rng(3)
    k, k_low = rng.standard_normal((4, 4, 1)), rng.standard_normal((4, 4, 1))
    p = np.array([0.2, 0.5, 1.0, 0.7])
    expect = np.zeros_like(k)
    for xi in itertools.product([0, 1], repeat=4):
        xi = np.array(xi, bool)
        prob = np.prod(np.where(xi, p, 1 - p))
        expect += prob * E.continued_pairs(k, k_low, xi, p, lam=0.8)
    off = ~np.eye(4, dtype=bool)
    assert np.allclose(expect[off], k[off])


def test_fidelity_summary_counts_ess_and_correlation():
    """The report's per-claim lines: universes at each fidelity, the effective sample size
    (a good predictor gives more than the continued count) and the predictor's correlation."""
    rng = np.random.default_rng(5)
    x, y, low = draw(rng, 200)
    xi, p = uniform_continuation(rng, 200, 50)
    s = E.fidelity_summary(low, np.where(xi, y, np.nan), xi, p)
    assert (s["low_fidelity"], s["continued"], s["continued_trained"]) == (200, 50, 50)
    assert 0.95 < s["predictor_correlation"] <= 1.0
    assert s["ess"] > 100  # the low fidelity carries most of the information
    useless = E.fidelity_summary(rng.standard_normal(200), np.where(xi, y, np.nan), xi, p)
    assert abs(useless["predictor_correlation"]) < 0.35 and useless["ess"] < 70


def test_drawn_reads_a_multi_fidelity_table():
    """multiverse.inference.Drawn on a study table with low_<metric>, continued and
    continuation_probability columns: its means are E.means with the continuation, its
    point is near the truth, and each answer says what it rests on."""
    import pandas as pd

    from multiverse.inference import Drawn
    from multiverse.space import SearchSpace

    space = SearchSpace.from_config({"x": {"type": "float", "low": 0.0, "high": 1.0}})
    rng = np.random.default_rng(8)
    n = 96
    x, y, low = draw(rng, n)
    xi, p = uniform_continuation(rng, n, 32)
    df = pd.DataFrame({"universe": [f"r0u{i}" for i in range(n)], "round": 0, "strategy": "sobol", "x": x,
                       "y": np.where(xi, y, np.nan), "low_y": low, "continued": xi, "continuation_probability": p,
                       "status": np.where(xi, "ok", "not_continued"), "design_weight": 1.0, "design_draws": 1.0})
    universes = [{"x": v} for v in x]
    drawn = Drawn(df, space, universes, lambda m: df[m].to_numpy(float), seed=1,
                  low=lambda m: df["low_" + m].to_numpy(float))
    h = lambda us, vals: vals["y"][:, None]  # noqa: E731
    m = drawn.means(["y"], h)
    own, ref, _, _ = drawn.predictions("y")
    direct = E.means(h, drawn.sample, {"y": df["y"].to_numpy(float)}, {"y": own}, drawn.reference, {"y": ref},
                     E.reference_groups(len(drawn.reference), drawn.per[0]),
                     continuation=E.Continuation({"y": drawn.calibrated_low("y")}, xi, p))
    assert np.allclose(m.value, direct.value)
    # the predictor is the low fidelity on the full fidelity's scale: the power-tuned line of it
    a, lam = E.power_tuning(np.where(xi, y, np.nan)[:, None], low[:, None], xi, p)[:, 0]
    inside = (a + lam * low > np.nanmin(df["y"])) & (a + lam * low < np.nanmax(df["y"]))
    assert np.allclose(drawn.calibrated_low("y")[inside], (a + lam * low)[inside]) and 0.5 < lam < 2
    # the GPs read both fidelities: the continued universes' own values, the others' calibrated ones
    assert np.array_equal(drawn.training_values("y")[xi], y[xi])
    point, se = E.estimate(lambda v: v[..., 0], m)
    assert abs(point - TRUTH) < 4 * se
    summary = drawn.fidelity(["y"])["y"]
    assert summary["low_fidelity"] == n and summary["continued"] == 32
    assert "continued to full fidelity" in drawn.sample.note


def test_a_claim_s_design_based_answer_says_what_it_rests_on():
    """multiverse.claims.common.design_based on a multi-fidelity study: the answer carries
    per metric the universes at each fidelity, the ESS and the predictor's correlation, and
    the report words them (multiverse.html.fidelity_text)."""
    import types

    import pandas as pd

    from multiverse.claims import common
    from multiverse.html import fidelity_text
    from multiverse.inference import Drawn
    from multiverse.space import SearchSpace

    space = SearchSpace.from_config({"x": {"type": "float", "low": 0.0, "high": 1.0}})
    rng = np.random.default_rng(9)
    x, y, low = draw(rng, 64)
    xi, p = uniform_continuation(rng, 64, 24)
    df = pd.DataFrame({"universe": [f"r0u{i}" for i in range(64)], "round": 0, "strategy": "sobol", "x": x,
                       "y": np.where(xi, y, np.nan), "low_y": low, "continued": xi, "continuation_probability": p,
                       "status": np.where(xi, "ok", "not_continued"), "design_weight": 1.0, "design_draws": 1.0})
    drawn = Drawn(df, space, [{"x": v} for v in x], lambda m: df[m].to_numpy(float), seed=2,
                  low=lambda m: df["low_" + m].to_numpy(float))
    ctx = types.SimpleNamespace(drawn=lambda: drawn)
    answer = common.design_based(ctx, ["y"], (lambda us, v: v["y"][:, None], lambda m: m[..., 0]), ">")
    f = answer["fidelity"]["y"]
    assert (f["low_fidelity"], f["continued"]) == (64, 24) and f["ess"] > 24 and f["predictor_correlation"] > 0.9
    text = fidelity_text(answer["fidelity"])
    assert "64 universes trained at the low fidelity, 24 continued" in text and "effective sample size" in text
