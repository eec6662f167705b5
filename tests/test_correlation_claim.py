"""Correlation claims: the claims review's findings 3 (granulated tau along dimensions that
move neither metric) and 8 (the two-outcome model: the report's kernel, and its own LOO
diagnostics for the 'fits poorly' flag), on constructed multiverses whose answer is known."""
import copy

import numpy as np
import pandas as pd
import pytest
import torch

from multiverse import gp, two_outcome
from multiverse.claims import correlation
from multiverse.claims.context import Context
from multiverse.space import SearchSpace
from multiverse.surrogate import per_universe

SPACE = SearchSpace.from_config({
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})
CLAIM = {"name": "c", "type": "correlation", "x": "x", "y": "y", "relation": "positive"}
IDENTITY2 = [gp.IDENTITY, gp.IDENTITY]


def pos(us, name):
    return SPACE[name].to_unit([u[name] for u in us])


def study(fx, fy, n=48, noise=0.1, seed=0):
    """``n`` Sobol universes, ``x = fx + noise`` and ``y = fy + noise`` (independent noise)."""
    us = SPACE.sobol(n, seed)
    x = fx(us) + noise * np.random.default_rng(seed).standard_normal(n)
    y = fy(us) + noise * np.random.default_rng(seed + 1).standard_normal(n)
    return us, x, y


def answer(us, x, y, seed=0, sobol=None):
    joint = correlation.fit_joint(SPACE, us, x, y, seed, IDENTITY2)
    return correlation.gp_answer(joint, SPACE, CLAIM, SPACE.sobol(64, 3), 128, seed, sobol=sobol)


def sine(us):
    return np.sin(3 * pos(us, "lr"))


# --- finding 3: no granulated tau along a dimension that moves neither metric --------
@pytest.mark.parametrize("seed", [0, 1])
def test_finding_3_no_granulated_tau_along_dimensions_that_move_neither_metric(seed):
    """The issue's case: x = sin(3 lr) + noise, y = -sin(3 lr) + noise on 48 Sobol points
    of a 3-D space. Along weight decay every pair is tied and tau is undefined; one shared
    kernel (KroneckerMultiTaskGP) said tau -0.94 [-1.00, -0.69], P = 1.00 there. Now weight
    decay and batch size have no per-dimension tau, the result says why, and the
    granulated mean is lr's alone."""
    res = answer(*study(sine, lambda us: -sine(us), seed=seed), seed=seed)
    assert set(res["granulated_per_dimension"]) == {"lr"}
    flat = f"neither metric varies along it: path signal < {correlation.MIN_SIGNAL:g}"
    assert res["granulated_excluded"] == {"weight_decay": flat, "batch_size": flat}
    lr = res["granulated_per_dimension"]["lr"]
    assert lr["verdict"] == "fails" and lr["effect_hi"] < -0.6 and lr["varies"] == ["x", "y"]
    assert res["granulated"]["effect"] == lr["effect"]
    sig = res["granulated_signal"]
    assert min(sig["lr"].values()) > 5 * correlation.MIN_SIGNAL
    assert max(sig["weight_decay"].values()) < correlation.MIN_SIGNAL


def test_the_left_out_dimensions_agree_with_the_sobol_indices():
    """The report's Sobol table and the per-dimension message cannot contradict each
    other: a dimension to which either metric's total-order Sobol index gives at least
    MIN_TOTAL_ORDER stays in the granulated tau, even where the two-outcome model's path
    signal is low, and a dimension left out says both criteria and the indices."""
    data = study(sine, lambda us: -sine(us))

    def sobol(wd_total):
        return {m: {"lr": {"total": 0.9}, "weight_decay": {"total": wd_total}, "batch_size": {"total": 0.01}}
                for m in ("x", "y")}

    kept = answer(*data, sobol=sobol(0.3))
    assert set(kept["granulated_per_dimension"]) == {"lr", "weight_decay"}
    assert max(kept["granulated_signal"]["weight_decay"].values()) < correlation.MIN_SIGNAL  # only Sobol keeps it
    assert kept["granulated_per_dimension"]["weight_decay"]["varies"] == ["x", "y"]
    assert kept["granulated_excluded"] == {"batch_size": "neither metric varies along it: total-order Sobol index "
                                           "< 0.05 (x 0.01, y 0.01), path signal < 2"}
    left = answer(*data, sobol=sobol(0.01))
    assert set(left["granulated_per_dimension"]) == {"lr"}


def test_finding_3_a_dimension_that_moves_one_metric_keeps_an_uncertain_tau():
    """x = lr + batch size, y = lr: along batch size only x moves. The dimension stays in
    (a proxy moving where the target does not is what the granulated tau is to catch),
    with the posterior's tau, which cannot tell a sign there; along lr both rise."""
    fx = lambda us: pos(us, "lr") + pos(us, "batch_size")  # noqa: E731
    res = answer(*study(fx, lambda us: pos(us, "lr"), noise=0.05))
    per = res["granulated_per_dimension"]
    assert per["batch_size"]["varies"] == ["x"]
    assert per["batch_size"]["effect_lo"] < 0 < per["batch_size"]["effect_hi"]
    assert per["lr"]["verdict"] == "holds" and per["lr"]["effect"] > 0.8
    assert "weight_decay" in res["granulated_excluded"]


def test_finding_3_path_signal_separates_a_trend_from_posterior_noise():
    """A path that rises the same way in every sample (each with its own wiggles) has a
    signal well above the bar; one whose samples only wiggle around flat, near 0."""
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 9)
    trend = t[None, None, :] + 0.1 * rng.standard_normal((256, 6, 9))
    flat = 0.1 * rng.standard_normal((256, 6, 9))
    s = correlation.path_signal(np.stack([trend, flat], -1))
    assert s[0] > 5 * correlation.MIN_SIGNAL and s[1] < 0.05


# --- finding 8: the two-outcome model -----------------------------------------------
def test_finding_8_the_two_outcome_model_uses_the_reports_matern_kernel():
    us, x, y = study(sine, lambda us: -sine(us))
    report = gp.fit_gp(SPACE, us, x, 0, kernel="matern").covar_module.base_kernel
    model = two_outcome.fit_multitask_gp(SPACE, us, np.c_[x, y], 0, n_draws=2, n_steps=50)
    for member in model.members:
        kernels = [k.data_covar_module for k in member.covar_module.covar_module_list]
        assert len(kernels) == two_outcome.MULTITASK_LATENTS >= 2
        for k in kernels:
            assert type(k) is type(report) and k.nu == report.nu == 2.5
            assert k.lengthscale_prior.concentration == report.lengthscale_prior.concentration
            assert k.lengthscale_prior.rate == report.lengthscale_prior.rate


def test_finding_8_block_loo_equals_conditioning_on_the_other_universes():
    """Leave-one-universe-out by the closed form matches conditioning a copy of the model
    (same hyperparameters and standardisation) on every other universe."""
    us, x, y = study(sine, lambda us: -0.5 * sine(us) + pos(us, "batch_size"), n=24)
    model = two_outcome.fit_multitask_gp(SPACE, us, np.c_[x, y], 0, n_draws=2, n_steps=50).members[1]
    mean, var, observed = two_outcome.multitask_loo(model)
    np.testing.assert_allclose(observed, np.c_[x, y], atol=1e-12)
    X, Y = model.train_inputs[0], model.train_targets
    sd, shift = model.outcome_transform.stdvs.reshape(-1), model.outcome_transform.means.reshape(-1)
    for i in (0, 13):
        rest = [j for j in range(len(us)) if j != i]
        sub = copy.deepcopy(model)
        sub.set_train_data(inputs=X[rest], targets=Y[rest], strict=False)
        with torch.no_grad():
            pred = sub.likelihood(sub(X[i:i + 1]))
        np.testing.assert_allclose(mean[i], (shift + sd * pred.mean.reshape(-1)).numpy(), rtol=1e-6)
        np.testing.assert_allclose(var[i], (sd**2 * pred.variance.reshape(-1)).numpy(), rtol=1e-6)


def test_finding_8_the_sampler_targets_the_models_posterior():
    """The hyperparameter sampler's log density differs between two settings by what
    GPyTorch's marginal likelihood and priors say (plus the log transforms' Jacobian)."""
    us, x, y = study(sine, lambda us: -sine(us), n=24)
    model = two_outcome.fit_multitask_gp(SPACE, us, np.c_[x, y], 0, n_draws=2, n_steps=200)
    a, b = model.fitted, model.members[1]

    def gpytorch_log_density(m):
        with torch.no_grad():
            ll = float(m.likelihood(m.forward(m.train_inputs[0])).log_prob(m.train_targets))
            prior = sum(float(p.log_prob(c(mod)).sum()) for _, mod, p, c, _ in m.named_priors())
        log_ls = [k.data_covar_module.lengthscale.log().sum() for k in m.covar_module.covar_module_list]
        return ll + prior + float(sum(log_ls)) + float(m.likelihood.task_noises.log().sum())

    X, Y = a.train_inputs[0].numpy(), a.train_targets.numpy()
    ours = (two_outcome.lmc_log_posterior(a.hyperparameters(), X, Y, two_outcome.MULTITASK_LATENTS)
            - two_outcome.lmc_log_posterior(b.hyperparameters(), X, Y, two_outcome.MULTITASK_LATENTS))
    assert ours != 0 and ours == pytest.approx(gpytorch_log_density(a) - gpytorch_log_density(b), abs=1e-6)


def test_finding_8_joint_samples_of_the_two_outcome_model():
    """``multiverse.gp.joint_samples`` and ``posterior_mean_std`` read the hyperparameter
    mixture as any model: ``n x q x 2`` samples (split over the members), the same for the
    same seed, whose mean is the mixture's."""
    us, x, y = study(sine, lambda us: -sine(us), n=24)
    model = two_outcome.fit_multitask_gp(SPACE, us, np.c_[x, y], 0, n_draws=4, n_steps=100)
    f = gp.joint_samples(model, SPACE, us[:5], 10, 3)
    assert f.shape == (10, 5, 2) and np.array_equal(f, gp.joint_samples(model, SPACE, us[:5], 10, 3))
    again = two_outcome.fit_multitask_gp(SPACE, us, np.c_[x, y], 0, n_draws=4, n_steps=100)
    assert np.array_equal(f, gp.joint_samples(again, SPACE, us[:5], 10, 3))  # deterministic fit and sampler
    mean, sd = gp.posterior_mean_std(model, gp.features(SPACE, us[:5], model))  # the mixture's moments
    draws = gp.joint_samples(model, SPACE, us[:5], 4000, 0)
    assert mean.shape == sd.shape == (5, 2)
    np.testing.assert_allclose(draws.mean(0), mean, atol=4 * sd.max() / np.sqrt(4000))


def context(us, x, y):
    df = pd.DataFrame([{**u, "universe": f"u{i}", "status": "ok", "x": a, "y": b}
                       for i, (u, a, b) in enumerate(zip(us, x, y))])
    return Context(space=SPACE, df=df, surrogates={}, divergence=None, samples=64, reference=32,
                   bootstrap=200, seed=0, universes=per_universe(df, SPACE, "x")[0])


def test_finding_8_the_claim_carries_the_two_outcome_models_diagnostics():
    """The 'fits poorly' flag reads the result's own diagnostics: the LOO of the model the
    verdict rests on, per metric. Here y is pure noise, which that model cannot predict."""
    us, x, y = study(sine, lambda us: 0.0 * sine(us))
    res = correlation.analyse(CLAIM, context(us, x, y), 0, None)
    diag = res.diagnostics
    assert set(diag) == {"x", "y"}
    # the model works on the metrics' normal scores (tau reads ranks only); its LOO is read back on their scales
    assert all(isinstance(w, gp.RankWarp) for w in res.model.warps)
    assert diag == dict(zip(["x", "y"], two_outcome.multitask_loo_diagnostics(res.model.model, res.model.warps)))
    assert diag["x"]["ok"] and diag["x"]["r2"] > 0.8 and diag["x"]["coverage"] >= gp.MIN_COVERAGE
    assert not diag["y"]["ok"] and diag["y"]["r2"] < gp.MIN_LOO_R2


def test_rank_warp_keeps_order_and_tames_outliers():
    """Normal scores: increasing, symmetric, back to the observed values exactly, distinct
    beyond them; a loss of 1e30 is one step above the rest, not 60 log units."""
    from scipy.stats import kendalltau, norm

    v = np.array([0.3, 0.01, 1e30, 0.02, np.nan, 0.02, 2.0])
    w = gp.RankWarp(v)
    z = w.forward(v)
    assert np.isnan(z[4]) and z[1] < z[3] == z[5] < z[0] < z[6] < z[2]
    assert z[2] == pytest.approx(norm.ppf(6 / 7)) and z[1] == pytest.approx(-z[2])  # ranks 6 and 1 of 6
    ok = np.isfinite(v)
    np.testing.assert_allclose(w.inverse(z[ok]), v[ok], rtol=1e-12)
    beyond = w.inverse(np.array([z[1] - 1, z[1] - 2, z[2] + 1, z[2] + 2]))
    assert beyond[1] < beyond[0] < 0.01 and 1e30 < beyond[2] < beyond[3]
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=40), rng.normal(size=40)
    assert kendalltau(gp.RankWarp(a).forward(a), gp.RankWarp(b).forward(b)).statistic == pytest.approx(
        kendalltau(a, b).statistic)
