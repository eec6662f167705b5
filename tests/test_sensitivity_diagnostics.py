"""Sobol indices and leave-one-out diagnostics of the report's surrogates, on functions
whose answer is known."""
import numpy as np
import pytest

from multiverse.gp import fit_gp, joint_samples, loo_diagnostics
from multiverse.sensitivity import cross_path, forms, saltelli_paths, sobol_indices
from multiverse.space import SearchSpace

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam", "rmsprop", "momentum"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "wd": {"type": "float", "low": 0.0, "high": 1.0},
})


def sampler(model, space):
    return lambda points, n, seed: joint_samples(model, space, points, n, seed)


def test_sobol_indices_of_an_additive_function():
    # f = log10(lr) + 1 for adam (one level of four): Var = 16/12 + 3/16; wd does nothing
    us = SPACE.sobol(64, 0)
    y = np.array([np.log10(u["lr"]) + (u["optimizer"] == "adam") for u in us])
    y = y + 0.02 * np.random.default_rng(0).standard_normal(len(y))
    s = sobol_indices(sampler(fit_gp(SPACE, us, y, 0, kernel="matern"), SPACE), SPACE, n_mc=256, n_samples=32, seed=0)
    total = 16 / 12 + 3 / 16
    assert set(s) == {"optimizer", "lr", "wd"}  # the categorical's levels share one index
    assert s["lr"]["first"] == pytest.approx(16 / 12 / total, abs=0.03)
    assert s["optimizer"]["first"] == pytest.approx(3 / 16 / total, abs=0.03)
    assert abs(s["wd"]["total"]) < 0.01
    for v in s.values():  # additive: total = first
        assert v["total"] == pytest.approx(v["first"], abs=0.02)
        assert v["first_lo"] <= v["first"] <= v["first_hi"] and v["total_lo"] <= v["total"] <= v["total_hi"]


def test_sobol_indices_see_an_interaction():
    # f = lr position x [optimizer is adam]: lr matters only through the interaction
    us = SPACE.sobol(64, 1)
    y = np.array([SPACE["lr"].to_unit([u["lr"]])[0] * (u["optimizer"] == "adam") for u in us])
    s = sobol_indices(sampler(fit_gp(SPACE, us, y, 0, kernel="matern"), SPACE), SPACE, n_mc=256, n_samples=32, seed=0)
    assert s["lr"]["total"] > s["lr"]["first"] + 0.2
    assert s["optimizer"]["total"] > s["optimizer"]["first"] + 0.2



def test_cross_path_forms_are_the_two_path_estimators():
    # Saltelli first-order, Jansen total-order and covariance between two paths, by hand
    rng = np.random.default_rng(0)  # any three "paths": random values at the Saltelli rows
    sens, f = saltelli_paths(lambda pts, n, s: rng.standard_normal((n, len(pts))), SPACE, 64, 3, 0)
    own = np.array([forms(sens, p) for p in f])
    got = cross_path(forms(sens, f.mean(axis=0)), own.mean(axis=0), 3)
    want = []
    for p, q in [(0, 1), (0, 2), (1, 2)]:
        (a1, b1, *ab1), (a2, b2, *ab2) = f[p], f[q]
        first = [0.5 * (np.mean(b1 * (y2 - a2)) + np.mean(b2 * (y1 - a1))) for y1, y2 in zip(ab1, ab2)]
        total = [0.5 * np.mean((a1 - y1) * (a2 - y2)) for y1, y2 in zip(ab1, ab2)]
        x1, x2 = np.concatenate([a1, b1]), np.concatenate([a2, b2])
        want.append(first + total + [np.cov(x1, x2)[0, 1]])
    assert got == pytest.approx(np.mean(want, axis=0), abs=1e-10)


DEFAULT_SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "momentum", "adam", "rmsprop"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})
OFFSET = {"sgd": -0.01, "momentum": 0.0, "adam": 0.01, "rmsprop": 0.005}
CURVATURE = {"sgd": 0.35, "momentum": 0.3, "adam": 0.25, "rmsprop": 0.3}


def lr_and_optimizer(optimizer, x):
    """An accuracy of lr's position ``x`` and the optimizer only, with an interaction."""
    return 0.9 + OFFSET[optimizer] - CURVATURE[optimizer] * (x - 0.4) ** 2


def test_finding_6_inert_dimensions_sobol_interval_reaches_zero():
    # The truth ignores weight decay and batch size. Per-path indices gave them total-order
    # intervals [0.042, 0.098] and [0.052, 0.119] here, and optimizer's first-order
    # interval was [-0.80, 0.81] (an uncentred estimator).
    us = DEFAULT_SPACE.sobol(48, 0)
    x = DEFAULT_SPACE["lr"].to_unit([u["lr"] for u in us])
    y = np.array([lr_and_optimizer(u["optimizer"], xi) for u, xi in zip(us, x)])
    y = y + 0.01 * np.random.default_rng(0).standard_normal(48)
    model = fit_gp(DEFAULT_SPACE, us, y, 0, kernel="matern")
    s = sobol_indices(sampler(model, DEFAULT_SPACE), DEFAULT_SPACE, n_mc=256, n_samples=64, seed=0)

    # true indices of the noise-free truth, exactly: a fine lr grid times the four levels
    grid = (np.arange(4000) + 0.5) / 4000
    F = np.array([lr_and_optimizer(o, grid) for o in OFFSET])  # optimizer x lr
    var = F.var()
    true = {"optimizer": (F.mean(axis=1).var() / var, F.var(axis=0).mean() / var),
            "lr": (F.mean(axis=0).var() / var, F.var(axis=1).mean() / var)}
    assert true["optimizer"][1] > true["optimizer"][0] + 0.01  # an interaction to see
    for name in ("weight_decay", "batch_size"):
        assert s[name]["first_lo"] < 0.01 and s[name]["total_lo"] < 0.01, (name, s[name])
    for name, (first, total) in true.items():
        assert s[name]["first_lo"] <= first <= s[name]["first_hi"], (name, first, s[name])
        assert s[name]["total_lo"] <= total <= s[name]["total_hi"], (name, total, s[name])

def test_loo_diagnostics_of_a_good_and_a_hopeless_surrogate():
    us = SPACE.sobol(48, 2)
    rng = np.random.default_rng(0)
    smooth = np.array([np.sin(3 * SPACE["lr"].to_unit([u["lr"]])[0]) for u in us]) + 0.05 * rng.standard_normal(48)
    good = loo_diagnostics(fit_gp(SPACE, us, smooth, 0, kernel="matern"))
    assert good["ok"] and good["r2"] > 0.8 and good["coverage"] >= 0.85 and good["n"] == 48
    assert good["rmse_lo"] <= good["rmse"] <= good["rmse_hi"] and good["coverage_lo"] <= good["coverage"] <= good["coverage_hi"]
    noise = rng.standard_normal(48)
    bad = loo_diagnostics(fit_gp(SPACE, us, noise, 0, kernel="matern"))
    assert not bad["ok"] and bad["r2"] < 0.5
