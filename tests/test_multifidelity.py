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
