import numpy as np
import pytest
from conftest import MIXED_SPACE

from multiverse.space import SearchSpace


@pytest.fixture
def space(default_config):
    return SearchSpace.from_config(default_config["space"])


COND = MIXED_SPACE


def test_encoding_is_raw_one_hot_and_bounds_are_in_log_space(space):
    """Features are raw values (the GP's input transform takes the log10 and rounds)."""
    u = {"optimizer": "adam", "lr": 1e-2, "weight_decay": 1e-4, "batch_size": 64}
    x = space.encode([u])[0]
    assert space.feature_names() == [
        "optimizer=sgd", "optimizer=momentum", "optimizer=adam", "optimizer=rmsprop",
        "lr", "weight_decay", "batch_size",
    ]
    np.testing.assert_allclose(x, [0, 0, 1, 0, 1e-2, 1e-4, 64])
    np.testing.assert_allclose(space.bounds(), [[0, 0, 0, 0, -4, -6, np.log10(16)], [1, 1, 1, 1, 0, -2, np.log10(256)]])
    np.testing.assert_allclose(space.encode([u], "index")[0], [2, 1e-2, 1e-4, 64])


def test_conditional_dimensions_are_none_when_inactive_and_do_not_count():
    space = SearchSpace.from_config(COND)
    us = space.sobol(64, seed=0) + space.random(64, seed=0) + space.enumerated(8, seed=0)
    for u in us:
        assert (u["momentum"] is not None) == (u["optimizer"] == "momentum")
        assert (u["eps"] is not None) == (u["optimizer"] in ("adam", "rmsprop"))
    sgd = next(u for u in us if u["optimizer"] == "sgd")
    # a value recorded for an inactive dimension changes neither identity nor features
    assert space.key({**sgd, "eps": 1e-3, "momentum": 0.7}) == space.key(sgd)
    np.testing.assert_array_equal(space.encode([{**sgd, "eps": 1e-3}]), space.encode([sgd]))
    # ... and the GP sees it at the middle of its range (log-middle for a log scale)
    x = space.encode([sgd])[0]
    cols = space.columns()
    assert x[cols["eps"][0]] == pytest.approx(1e-5) and x[cols["momentum"][0]] == pytest.approx(0.745)
    adam = next(u for u in us if u["optimizer"] == "adam")
    assert space.key({**adam, "eps": adam["eps"] * 2}) != space.key(adam)


def test_random_is_reproducible_and_in_bounds(space):
    a, b, c = space.random(32, seed=1), space.random(32, seed=1), space.random(32, seed=2)
    assert a == b and a != c
    for u in a:
        assert 1e-4 <= u["lr"] <= 1 and 16 <= u["batch_size"] <= 256 and isinstance(u["batch_size"], int)


def test_grid_is_a_full_factorial_in_a_seeded_order():
    space = SearchSpace.from_config(COND)
    g = space.grid(3, seed=0)
    # 3 x 3 numeric values for sgd; x 3 momentum for momentum; x 3 eps for adam and rmsprop
    assert len(g) == 9 + 27 + 27 + 27 == len({space.key(u) for u in g})
    assert g == space.grid(3, seed=0) and g != space.grid(3, seed=1)
    assert sorted(map(str, g)) == sorted(map(str, space.grid(3, seed=1)))
    assert sorted({u["lr"] for u in g}) == pytest.approx([1e-4, 1e-2, 1.0])


def test_unit_cube_maps_to_log_scale_and_integers(space):
    lr, bs = space["lr"], space["batch_size"]
    assert lr.from_unit(np.array([0.0, 0.5, 1.0])) == pytest.approx([1e-4, 1e-2, 1.0])
    values = bs.from_unit(np.linspace(0, 1, 50))
    assert all(isinstance(v, int) and 16 <= v <= 256 for v in values)
    assert values[0] == 16 and values[-1] == 256
    np.testing.assert_allclose(lr.to_unit([1e-4, 1e-2, 1.0]), [0, 0.5, 1])


def test_sobol_is_reproducible_in_bounds_and_covers_levels(space):
    a, b, c = space.sobol(16, seed=3), space.sobol(16, seed=3), space.sobol(16, seed=4)
    assert a == b and a != c
    assert {u["optimizer"] for u in a} == {"sgd", "momentum", "adam", "rmsprop"}
    for u in a:
        assert 1e-4 <= u["lr"] <= 1 and 1e-6 <= u["weight_decay"] <= 1e-2 and 16 <= u["batch_size"] <= 256


def test_enumerated_crosses_every_level(space):
    pts = space.enumerated(8, seed=1)
    assert len(pts) == 32
    for level in ("sgd", "momentum", "adam", "rmsprop"):
        sub = [p for p in pts if p["optimizer"] == level]
        assert [p["lr"] for p in sub] == [p["lr"] for p in pts[:8]]


def test_key_identifies_parameters(space):
    u = space.sobol(1, seed=0)[0]
    assert space.key(dict(u)) == space.key(u)
    assert space.key({**u, "lr": u["lr"] * 1.01}) != space.key(u)
