"""Trend, correlation and expected-best claims on made-up multiverses whose answer is
known: one where the claim holds everywhere, one where it holds nowhere, one where it
flips on a known boundary, and pure noise; and the intervals' coverage of the truth
over repeated draws."""
from pathlib import Path

import numpy as np
import pytest

from multiverse import gp, stats
from multiverse.claims import comparison, expected_best
from multiverse.spec import load_config, with_defaults
from multiverse.claims import correlation as correlation_claim
from multiverse.claims import trend as trend_claim
from multiverse.space import SearchSpace
from multiverse.surrogate import REPORT_KERNEL, Surrogate

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})


#: The default study's report settings (the schema's defaults filled in).
REPORT = with_defaults(load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml"))["report"]


def fit_gp(space, us, y, seed, noise_sd=0.0):
    """The report's surrogate: its kernel and input warping (on the metric's scale: no
    outcome warp)."""
    model = gp.fit_gp(space, us, y, seed, kernel=REPORT_KERNEL, warping=REPORT["input_warping"])
    return Surrogate.of(model, space, noise_sd=noise_sd)


def joint(space, us, Y, seed):
    """The correlation claim's two-outcome surrogate, on the metrics' normal scores as the report fits it."""
    return correlation_claim.fit_joint(space, us, Y[:, 0], Y[:, 1], seed, [gp.RankWarp(Y[:, 0]), gp.RankWarp(Y[:, 1])])


def pos(us, name):
    return SPACE[name].to_unit([u[name] for u in us])


def draw(fn, n=40, noise=0.02, seed=0):
    """``n`` Sobol universes and ``fn(universes) + noise``."""
    us = SPACE.sobol(n, seed)
    return us, fn(us) + noise * np.random.default_rng(seed).standard_normal(n)


def base(n=32, seed=1):
    return SPACE.enumerated(n, seed, canonical=False)


# --- trend ---------------------------------------------------------------------
TREND = {"name": "t", "type": "trend", "metric": "m", "dimension": "batch_size", "direction": "increasing"}


def trend(fn, claim=TREND, noise=0.02, seed=0, condition=0):
    us, y = draw(fn, noise=noise, seed=seed)
    model = fit_gp(SPACE, us, y, seed=0)
    cond = trend_claim.conditions(SPACE, claim)[condition]
    gp = trend_claim.gp_answer(model, SPACE, claim, base(), 256, seed, cond)
    obs = trend_claim.observed_answer(SPACE, us, y, claim, 500, seed, cond)
    return gp, obs


def test_trend_that_holds_everywhere():
    gp, obs = trend(lambda us: 0.1 * pos(us, "batch_size"))
    assert gp["verdict"] == obs["verdict"] == "holds"
    # a GP shrinks a trend towards flat (0.069 here, observed 0.084 for a true 0.1);
    # the calibration test below measures how often the intervals hold the truth
    assert gp["effect"] > 0.06 and obs["effect"] > 0.06
    assert gp["fraction_holds_lo"] > 0.9


def test_trend_that_holds_nowhere():
    gp, obs = trend(lambda us: -0.1 * pos(us, "batch_size"))
    assert gp["verdict"] == obs["verdict"] == "fails"
    assert gp["fraction_holds_hi"] < 0.1


def test_trend_that_flips_on_a_boundary_and_its_conditional_verdicts():
    # rises with batch size for lr < 1e-2, falls above it
    claim = {**TREND, "given": ["lr"]}
    fn = lambda us: 0.1 * pos(us, "batch_size") * np.sign(-2 - np.log10([u["lr"] for u in us]))  # noqa: E731
    gp, _ = trend(fn, claim, noise=0.01)
    assert 0.3 < gp["fraction_holds"] < 0.7
    assert any(leaf["rule"].startswith("lr <") and leaf["holds"] for leaf in gp["regions"]["leaves"])
    labels = [c["label"] for c in trend_claim.conditions(SPACE, claim)]
    assert labels[1].startswith("at lr = 0.000464") and labels[3].startswith("at lr = 0.215")
    low, _ = trend(fn, claim, noise=0.01, condition=1)  # lr = 4.6e-4: rises
    high, obs_high = trend(fn, claim, noise=0.01, condition=3)  # lr = 0.22: falls
    assert low["verdict"] == "holds" and high["verdict"] == "fails" and obs_high["verdict"] == "fails"


def test_trend_along_a_scaled_path():
    # the metric depends on lr / batch only: at fixed lr it falls with batch size, but
    # with lr scaled linearly with the batch it stays flat
    claim = {**TREND, "scaled": {"dimension": "lr", "power": 1}}
    fn = lambda us: 0.05 * (np.log10([u["lr"] for u in us]) - np.log10([u["batch_size"] for u in us]))  # noqa: E731
    marginal, _ = trend(fn, claim, noise=0.005)
    assert marginal["verdict"] == "fails"
    scaled, obs = trend(fn, claim, noise=0.005, condition=1)
    assert scaled["n_reference"] > 8
    assert abs(scaled["effect"]) < 0.01 and scaled["effect_lo"] < 0 < scaled["effect_hi"]
    assert abs(obs["effect"]) < 0.01 and abs(marginal["effect"]) > 0.05


def test_trend_under_pure_noise_is_rarely_confident():
    res = [trend(lambda us: 0.0 * pos(us, "lr"), noise=0.05, seed=s) for s in range(5)]
    assert sum(g["verdict"] == "uncertain" for g, _ in res) >= 4
    assert sum(o["verdict"] == "uncertain" for _, o in res) >= 4


# --- correlation ------------------------------------------------------------------
CORR = {"name": "c", "type": "correlation", "x": "x", "y": "y", "relation": "positive"}


def correlation(fx, fy, noise=0.02, seed=0, n=40):
    # the same universes, independent noise for the two metrics
    us, x = draw(fx, n=n, noise=noise, seed=2 * seed)
    y = fy(us) + noise * np.random.default_rng(2 * seed + 1).standard_normal(len(us))
    model = joint(SPACE, us, np.c_[x, y], seed=0)
    gp_ = correlation_claim.gp_answer(model, SPACE, CORR, SPACE.sobol(64, 3), 128, seed)
    obs = correlation_claim.observed_answer(SPACE, us, x, y, CORR, 500, seed)
    return gp_, obs


def lr_effect(us):
    return 0.1 * pos(us, "lr")


def test_correlation_that_holds_everywhere():
    gp, obs = correlation(lr_effect, lambda us: 2 * lr_effect(us))
    assert gp["verdict"] == obs["verdict"] == gp["granulated_per_dimension"]["lr"]["verdict"] == "holds"
    assert gp["effect"] > 0.5 and obs["effect"] > 0.5
    # the choices that move neither metric have no tau (finding 3): the granulated mean is lr's
    assert set(gp["granulated_excluded"]) == {"optimizer", "batch_size"}
    assert gp["granulated_per_dimension"]["lr"]["effect"] > 0.8 and gp["granulated"]["effect"] > 0.8


def test_correlation_that_holds_nowhere():
    gp, obs = correlation(lr_effect, lambda us: -lr_effect(us))
    assert gp["verdict"] == obs["verdict"] == gp["granulated_per_dimension"]["lr"]["verdict"] == "fails"


def test_correlation_that_flips_between_dimensions():
    # x and y move together along lr but oppositely along batch size: the granulated
    # tau shows the flip that one overall tau hides
    fx = lambda us: 0.1 * pos(us, "lr") + 0.1 * pos(us, "batch_size")  # noqa: E731
    fy = lambda us: 0.1 * pos(us, "lr") - 0.1 * pos(us, "batch_size")  # noqa: E731
    gp, obs = correlation(fx, fy, noise=0.005)
    per = gp["granulated_per_dimension"]
    assert per["lr"]["verdict"] == "holds" and per["batch_size"]["verdict"] == "fails"
    assert per["lr"]["effect"] > 0.8 and per["batch_size"]["effect"] < -0.8
    assert abs(gp["effect"]) < 0.3 and obs["effect_lo"] < 0 < obs["effect_hi"]


def test_correlation_under_pure_noise_is_rarely_confident():
    # under no correlation a confident verdict (one-sided at 95%) comes ~10% of the time
    res = [correlation(lambda us: 0.0 * lr_effect(us), lambda us: 0.0 * lr_effect(us), noise=0.05, seed=s)
           for s in range(8)]
    assert sum(o["verdict"] == "uncertain" for _, o in res) >= 6
    assert sum(o["effect_lo"] < 0 < o["effect_hi"] for _, o in res) >= 7
    assert sum(g["verdict"] == "uncertain" for g, _ in res) >= 6


def test_kendall_tau_matches_scipy():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.normal(size=30)
    y[:10] = x[:10]
    x[3] = x[4]  # a tie
    assert stats.kendall_tau(x, y) == pytest.approx(kendalltau(x, y).statistic)


def test_granulated_tau_on_matched_universes_of_a_grid():
    """On a grid every universe has partners differing in one dimension only: along lr
    x rises with y (tau +1 in every group), along batch size x falls with y (-1)."""
    us = SPACE.grid(4, 0)
    lr, bs = pos(us, "lr"), pos(us, "batch_size")
    x, y = lr - bs, lr + bs  # x and y agree in lr, disagree in batch size
    m = correlation_claim.matched_granulated(SPACE, us, x, y, n_boot=200, seed=0)
    assert m["per_dimension"]["lr"] == 1.0 and m["per_dimension"]["batch_size"] == -1.0
    assert np.isnan(m["per_dimension"].get("optimizer", np.nan))  # no change in x or y across optimizers
    assert m["effect"] == 0.0 and m["lo"] == m["hi"] == 0.0 and m["groups"] >= correlation_claim.MIN_MATCHED_GROUPS
    # a single matched pair says nothing: no estimate
    few = correlation_claim.matched_granulated(SPACE, us[:2], x[:2], y[:2], n_boot=200, seed=0)
    assert few["groups"] < correlation_claim.MIN_MATCHED_GROUPS and np.isnan(few["effect"]) and np.isnan(few["lo"])


# --- expected best --------------------------------------------------------------
BEST = {"name": "e", "type": "expected_best", "metric": "val_acc", "dimension": "optimizer",
        "a": ["adam"], "b": ["sgd"], "relation": ">="}


def test_mean_max_is_the_mean_over_subsets_and_unbiased():
    import itertools

    v = np.random.default_rng(1).random(9)
    for k in (1, 3, 9):
        exact = np.mean([max(c) for c in itertools.combinations(v, k)])
        assert stats.mean_max(v, [k])[0] == pytest.approx(exact)
    # unbiased: averaged over samples of n=10 from U(0,1), the estimate of E[max of 4] is 4/5
    rng = np.random.default_rng(2)
    est = stats.mean_max(rng.random((20000, 10)), [4])[:, 0]
    assert est.mean() == pytest.approx(0.8, abs=0.003)


def groups(a, b, n=24, seed=0):
    """Observed values ``a(rng, n)`` for adam, ``b(rng, n)`` for sgd."""
    rng = np.random.default_rng(seed)
    return np.r_[a(rng, n), b(rng, n)], ["adam"] * n + ["sgd"] * n


def test_expected_best_that_holds_everywhere_and_nowhere():
    v, g = groups(lambda r, n: r.uniform(0.6, 0.9, n), lambda r, n: r.uniform(0.3, 0.6, n))
    assert expected_best.observed_answer(v, g, BEST, 500, 0)["verdict"] == "holds"
    assert expected_best.observed_answer(v, g, {**BEST, "relation": "<"}, 500, 0)["verdict"] == "fails"


def test_expected_best_that_flips_with_the_budget():
    # adam: always 0.70; sgd: uniform on [0.3, 0.9], whose expected best of k is
    # 0.3 + 0.6 k / (k + 1): 0.60 at k = 1, 0.75 at k = 3, 0.84 at k = 9
    v, g = groups(lambda r, n: np.full(n, 0.7), lambda r, n: r.uniform(0.3, 0.9, n), n=40)
    one = expected_best.observed_answer(v, g, {**BEST, "max_budget": 1}, 1000, 0)
    late = expected_best.observed_answer(v, g, {**BEST, "min_budget": 6, "max_budget": 12}, 1000, 0)
    every = expected_best.observed_answer(v, g, {**BEST, "max_budget": 12}, 1000, 0)
    assert one["verdict"] == "holds" and late["verdict"] == "fails" and every["verdict"] == "fails"
    assert every["curve_b"]["point"][8] == pytest.approx(0.3 + 0.6 * 9 / 10, abs=0.04)


def test_expected_best_from_the_surrogate_flips_with_the_budget():
    fn = lambda us: np.where([u["optimizer"] == "adam" for u in us], 0.7, 0.3 + 0.6 * pos(us, "lr"))  # noqa: E731
    us, y = draw(fn, n=40, noise=0.005)
    model = Surrogate.of(gp.fit_gp(SPACE, us, y, 0, kernel=REPORT_KERNEL), SPACE, noise_sd=0.005)
    ref = [u for u in SPACE.enumerated(128, 2, canonical=False) if u["optimizer"] == "sgd"]
    gp1 = expected_best.gp_answer(model, SPACE, {**BEST, "max_budget": 1}, ref, 128, 0, [1])
    gp6 = expected_best.gp_answer(model, SPACE, BEST, ref, 128, 0, list(range(6, 13)))
    assert gp1["verdict"] == "holds" and gp6["verdict"] == "fails"
    assert gp6["curve_b"]["mean"][-1] == pytest.approx(0.3 + 0.6 * 12 / 13, abs=0.03)


def test_expected_best_under_pure_noise_is_uncertain():
    vs = [groups(lambda r, n: r.normal(0.5, 0.1, n), lambda r, n: r.normal(0.5, 0.1, n), seed=s) for s in range(6)]
    assert sum(expected_best.observed_answer(v, g, {**BEST, "max_budget": 8}, 500, 0)["verdict"] == "uncertain"
               for v, g in vs) >= 5


# --- calibration: the intervals cover the truth at about their stated rate -------
N_DRAWS = 24
#: With 32 universes a weak trend's slope is shrunk towards flat (0.031 for a true
#: 0.040) and its interval held the truth in only 13 of 24 draws: see multiverse.gp.KERNELS.
N_UNIVERSES = 64


def covered(lo_hi, truth):
    return lo_hi[0] < truth < lo_hi[1]


#: Draws of 24 whose interval must hold the truth, per claim type (the issue's bar is 22).
#: Expected best: 23 of 24 (21 before; 22 once the least favourable budget's upper end
#: reaches the budgets' own, 23 with the reference set's error: multiverse.claims.expected_best).
#: Comparison 24 and trend 22 of 24 (24 and 21 with the Matern kernel alone; the linear
#: term keeps a trend from being pulled flat at the range's ends: multiverse.gp.KERNELS).
#: Correlation 23 of 24 (18 with one shared RBF kernel on unstandardised outcomes, 20
#: with a Matern one on standardised outcomes, 21 with the two-latent LMC at its MAP
#: hyperparameters, 23 averaged over draws of them: multiverse.two_outcome.fit_multitask_gp).
BAR = {"comparison": 22, "trend": 22, "correlation": 22, "expected_best": 22}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["comparison", "trend", "correlation", "expected_best"])
def test_gp_intervals_cover_the_truth_over_repeated_draws(kind):
    """Over repeated noisy draws of the same multiverse (64 universes), each claim type's
    95% credible interval holds the true value of its statistic (computed from the
    noise-free function on a large Sobol sample) in at least :data:`BAR` of 24 draws
    (for a calibrated 95% interval, fewer than 22 happens with probability 0.12, fewer
    than 20 with probability 0.006)."""
    big = SPACE.sobol(4096, 99)
    f = lambda us: (0.05 * np.sin(3 * pos(us, "lr")) + 0.04 * pos(us, "batch_size")  # noqa: E731
                    + np.where([u["optimizer"] == "adam" for u in us], 0.03 * pos(us, "lr"), 0.0))
    g = lambda us: 0.5 * f(us) + 0.03 * pos(us, "batch_size") ** 2  # noqa: E731
    noise = 0.01
    adam = [{**u, "optimizer": "adam"} for u in big]
    sgd = [{**u, "optimizer": "sgd"} for u in big]
    if kind == "comparison":
        claim = {"name": "c", "metric": "m", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"], "relation": ">="}
        truth = float(np.mean(f(adam) - f(sgd)))
    elif kind == "trend":
        claim = TREND
        t = np.linspace(0, 1, 65)
        pdp = [np.mean(f([{**u, "batch_size": SPACE["batch_size"].from_unit(np.array([x]))[0]} for u in big[:512]]))
               for x in t]
        truth = float(np.polyfit(t, pdp, 1)[0])
    elif kind == "correlation":
        claim = CORR
        truth = float(stats.kendall_tau(f(big[:1500]), g(big[:1500])))
    else:
        claim = {**BEST, "max_budget": 4}
        # one seed's noise, the basis gp_answer samples on (noise=1 x latent_noise_sd = 0.01)
        rng = np.random.default_rng(0)
        va, vb = (f(s) + noise * rng.standard_normal(len(s)) for s in (adam, sgd))
        truth = float(np.min(stats.mean_max(va, [1, 2, 3, 4]) - stats.mean_max(vb, [1, 2, 3, 4])))
    hits = 0
    for s in range(N_DRAWS):
        us = SPACE.sobol(N_UNIVERSES, 1000 + s)
        y = f(us) + noise * np.random.default_rng(s).standard_normal(len(us))
        model = fit_gp(SPACE, us, y, seed=s, noise_sd=noise)
        if kind == "comparison":
            ref = [u for u in SPACE.enumerated(64, s, canonical=False) if u["optimizer"] == "sgd"]
            r = comparison.gp_answer(model, SPACE, claim, ref, 256, s)
        elif kind == "trend":
            r = trend_claim.gp_answer(model, SPACE, claim, SPACE.enumerated(32, s, canonical=False), 256, s)
        elif kind == "correlation":
            y2 = g(us) + noise * np.random.default_rng(s + 500).standard_normal(len(us))
            r = correlation_claim.gp_answer(joint(SPACE, us, np.c_[y, y2], s), SPACE, claim, SPACE.sobol(128, s), 128, s)
        else:
            ref = [u for u in SPACE.enumerated(128, s, canonical=False) if u["optimizer"] == "sgd"]
            r = expected_best.gp_answer(model, SPACE, claim, ref, 256, s, [1, 2, 3, 4])
        hits += covered((r["effect_lo"], r["effect_hi"]), truth)
    print(f"{kind}: the 95% interval held the truth in {hits} of {N_DRAWS} draws")
    assert hits >= BAR[kind], f"{kind}: the 95% interval covered the truth {hits} of {N_DRAWS} times (truth {truth:+.4f})"
