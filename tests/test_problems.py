"""Benchmark problems: the interface, determinism, bounds, and the closed-form grids."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from multiverse.space import SearchSpace  # noqa: E402
from problems import PROBLEMS, axis, get_problem  # noqa: E402


def in_space(space, u):
    for name, spec in space.items():
        v = u[name]
        if spec["type"] == "categorical":
            assert v in spec["choices"]
        else:
            assert spec["low"] <= v <= spec["high"]
            if spec["type"] == "int":
                assert isinstance(v, int)
    return True


@pytest.fixture(scope="module")
def problems():
    return {name: get_problem(name) for name in PROBLEMS}


def test_registry(problems):
    assert {"svm_breast_cancer", "digits_model", "branin", "synthetic_mixed"} <= set(PROBLEMS)
    for name, p in problems.items():
        assert p.name == name and p.description and "\n" not in p.description
        SearchSpace.from_config(p.space)  # our config format
    with pytest.raises(KeyError):
        get_problem("nope")


def test_grid_universes_in_space(problems):
    sizes = {"svm_breast_cancer": 1600, "digits_model": 14 * 14 * 12 * 3, "branin": 1600, "synthetic_mixed": 12**3 * 3}
    for name, p in problems.items():
        grid = p.grid_universes()
        assert len(grid) == sizes[name]
        assert all(in_space(p.space, u) for u in grid)
        for dim, spec in p.space.items():  # every axis spans its dimension
            vals = [u[dim] for u in grid]
            if spec["type"] != "categorical":
                assert min(vals) == pytest.approx(spec["low"]) and max(vals) == pytest.approx(spec["high"])


def test_int_axis_is_distinct():
    vals = axis({"type": "int", "low": 1, "high": 24}, 12)
    assert len(vals) == len(set(vals)) == 12 and vals[0] == 1 and vals[-1] == 24
    assert all(isinstance(v, int) for v in vals)


@pytest.mark.parametrize("name", ["svm_breast_cancer", "digits_model"])
def test_accuracy_problems_deterministic(problems, name):
    p = problems[name]
    us = SearchSpace.from_config(p.space).sobol(6, seed=3)
    a = p.evaluate(us)
    assert a.shape == (6,) and np.all((a >= 0) & (a <= 1))
    # same values again, alone, and in another batch order
    np.testing.assert_array_equal(a, p.evaluate(us))
    np.testing.assert_array_equal(a[::-1], p.evaluate(us[::-1]))
    assert p.evaluate([us[2]])[0] == a[2]
    # a fresh instance (new data split, new init) agrees
    np.testing.assert_array_equal(a[:2], get_problem(name).evaluate(us[:2]))


def test_svm_surface_not_flat(problems):
    p = problems["svm_breast_cancer"]
    a = p.evaluate([{"C": 1e-2, "gamma": 1e1}, {"C": 10.0, "gamma": 1e-2}])
    assert a[0] < 0.7 < 0.9 < a[1]  # majority class vs a good fit


def test_digits_surface_not_flat(problems):
    p = problems["digits_model"]
    base = {"weight_decay": 1e-4, "epochs": 5}
    a = p.evaluate([{**base, "lr": 1e-2, "optimizer": "adam"},    # works
                    {**base, "lr": 1e1, "optimizer": "adam"},     # diverges
                    {**base, "lr": 1e-4, "optimizer": "sgd"}])    # barely moves
    assert a[0] > 0.9 and a[1] < 0.3 and a[2] < 0.3


def test_evaluate_rejects_points_outside_space(problems):
    p = problems["branin"]
    with pytest.raises(ValueError):
        p.evaluate([{"x1": 1.5, "x2": 0.5}])
    with pytest.raises(ValueError):
        p.evaluate([{"x1": 0.5}])
    with pytest.raises(ValueError):
        problems["synthetic_mixed"].evaluate([{"x1": 0.1, "x2": 0.5, "x3": 0.5, "level": "z"}])
    with pytest.raises(ValueError):
        problems["digits_model"].evaluate([{"lr": 0.1, "weight_decay": 1e-3, "epochs": 2.5, "optimizer": "sgd"}])


def test_branin_grid(problems, tmp_path):
    p = problems["branin"]
    universes, truth = p.grid(cache_dir=tmp_path)
    assert truth.shape == (1600,) and np.all(np.isfinite(truth))
    # known minima of the rescaled Branin: -1.0474 at (-pi, 12.275), (pi, 2.275), (9.42478, 2.475)
    minima = [{"x1": (x1 + 5) / 15, "x2": x2 / 15} for x1, x2 in [(-np.pi, 12.275), (np.pi, 2.275), (9.42478, 2.475)]]
    np.testing.assert_allclose(p.evaluate(minima), -1.0474, atol=1e-3)
    assert truth.min() >= -1.0474 - 1e-3 and truth.min() < -0.9
    np.testing.assert_array_equal(truth, p.evaluate(universes))


def test_mixed_grid_structure(problems, tmp_path):
    p = problems["synthetic_mixed"]
    universes, truth = p.grid(cache_dir=tmp_path)
    assert truth.shape == (12**3 * 3,) and np.all(np.isfinite(truth))
    # x3 is irrelevant: truth is constant along it
    by_rest = {}
    for u, v in zip(universes, truth):
        by_rest.setdefault((u["x1"], u["x2"], u["level"]), set()).add(v)
    assert all(len(s) == 1 for s in by_rest.values())
    # levels are affine maps of one function: b = 0.5 a + 0.5, c = -a + 0.25
    lv = {k: np.array([next(iter(by_rest[(x1, x2, k)])) for (x1, x2, l) in by_rest if l == "a"]) for k in "abc"}
    np.testing.assert_allclose(lv["b"], 0.5 * lv["a"] + 0.5)
    np.testing.assert_allclose(lv["c"], -lv["a"] + 0.25)
    assert lv["a"].std() > 0.2  # not flat


def test_grid_cache_reused_and_invalidated(problems, tmp_path):
    p = problems["branin"]
    _, truth = p.grid(cache_dir=tmp_path)
    path = tmp_path / "branin_truth.npz"
    assert path.exists()
    # a doctored cache with the right key is read back as is
    data = dict(np.load(path))
    np.savez(path, **{**data, "truth": data["truth"] + 1})
    np.testing.assert_array_equal(p.grid(cache_dir=tmp_path)[1], truth + 1)
    # a different grid does not match the cache: recomputed and rewritten
    p2 = get_problem("branin")
    p2.grid_sizes = {"x1": 5, "x2": 5}
    u2, t2 = p2.grid(cache_dir=tmp_path)
    assert len(u2) == 25 and np.array_equal(t2, p2.evaluate(u2))
    assert np.load(path)["truth"].shape == (25,)


def test_default_cache_dir_is_results():
    import problems as mod

    assert mod.CACHE_DIR == ROOT / "results" / "benchmarks"


def test_digits_epochs_share_a_trajectory(problems):
    p = problems["digits_model"]
    base = {"lr": 0.05, "weight_decay": 1e-3, "optimizer": "momentum"}
    us = [{**base, "epochs": e} for e in (1, 3, 2)] + [{**base, "optimizer": "sgd", "epochs": 2}]
    together = p.evaluate(us)
    alone = np.array([p.evaluate([u])[0] for u in us])
    np.testing.assert_array_equal(together, alone)
    assert together[0] < together[1]  # learning over epochs


def test_oracle_screen_is_exact_conditioning_and_its_pick_the_best_refit():
    """The oracle of benchmarks/exploration.py: its screen gives, for every grid point at
    once, the RMSE that BoTorch's ``condition_on_observations`` gives point by point; each
    pick is the refitted best of the screen's top few; after 4 picks its RMSE is below that
    of the next 4 Sobol points, and it never proposes a universe already in the trials."""
    import dataclasses

    import torch

    from exploration import oracle_round, screened_rmse, surrogate_error
    from multiverse.ids import derive_seed
    from multiverse.gp import features, fit_gp, noise_variance, outcome_scale
    from multiverse.space import SearchSpace

    p = dataclasses.replace(get_problem("branin"), grid_sizes={"x1": 12, "x2": 12})
    grid, truth = p.grid(cache_dir=None)
    space = SearchSpace.from_config(p.space)
    start = space.sobol(8, 0)
    y = list(p.evaluate(start))

    model = fit_gp(space, start, y, 0)
    X = features(space, grid, model)
    score = screened_rmse(model, X, truth)
    noise = torch.tensor([[float(noise_variance(model)[0]) * outcome_scale(model) ** 2]], dtype=X.dtype)
    for c in (0, 37, int(np.argmin(score))):
        with torch.no_grad():
            cond = model.condition_on_observations(X[c : c + 1], torch.tensor([[truth[c]]], dtype=X.dtype), noise=noise)
            mean = cond.posterior(X).mean.squeeze(-1).numpy()
        assert score[c] == pytest.approx(np.sqrt(np.mean((mean - truth) ** 2)), rel=1e-6)

    picks = oracle_round(space, start, y, 4, seed=3, n_refit=4, grid=grid, truth=truth)
    keys = [space.key(u) for u in start + picks]
    assert len(set(keys)) == len(keys) == 12
    oracle = surrogate_error(space, start + picks, y + list(p.evaluate(picks)), grid, truth, 0)[0]
    sobol = space.sobol(12, 0)
    assert surrogate_error(space, sobol, list(p.evaluate(sobol)), grid, truth, 0)[0] > oracle

    # the first pick: of the screen's 4 best (by the surrogate fitted with the oracle's seed), the lowest refitted RMSE
    first = oracle_round(space, start, y, 1, seed=3, n_refit=4, grid=grid, truth=truth)[0]
    model = fit_gp(space, start, y, derive_seed(3, 99))
    top = np.argsort(screened_rmse(model, features(space, grid, model), truth), kind="stable")[:4]
    errs = [surrogate_error(space, start + [grid[i]], y + [float(truth[i])], grid, truth, derive_seed(3, 99))[0]
            for i in top]
    assert space.key(first) == space.key(grid[int(top[int(np.argmin(errs))])])
