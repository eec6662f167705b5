"""Sobol indices and leave-one-out diagnostics of the report's surrogates, on functions
whose answer is known."""
import numpy as np
import pytest

from multiverse.gp import fit_gp, loo_diagnostics
from multiverse.sensitivity import sobol_indices
from multiverse.space import SearchSpace

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam", "rmsprop", "momentum"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "wd": {"type": "float", "low": 0.0, "high": 1.0},
})


def test_sobol_indices_of_an_additive_function():
    # f = log10(lr) + 1 for adam (one level of four): Var = 16/12 + 3/16; wd does nothing
    us = SPACE.sobol(64, 0)
    y = np.array([np.log10(u["lr"]) + (u["optimizer"] == "adam") for u in us])
    y = y + 0.02 * np.random.default_rng(0).standard_normal(len(y))
    s = sobol_indices(fit_gp(SPACE, us, y, 0, kernel="matern"), SPACE, n_mc=256, n_samples=32, seed=0)
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
    s = sobol_indices(fit_gp(SPACE, us, y, 0, kernel="matern"), SPACE, n_mc=256, n_samples=32, seed=0)
    assert s["lr"]["total"] > s["lr"]["first"] + 0.2
    assert s["optimizer"]["total"] > s["optimizer"]["first"] + 0.2


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
