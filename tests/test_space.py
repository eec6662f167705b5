import numpy as np
import pytest

from multiverse.space import SearchSpace


@pytest.fixture
def space(default_config):
    return SearchSpace.from_config(default_config["space"])


def test_encoding_one_hot_and_log(space):
    u = {"optimizer": "adam", "lr": 1e-2, "weight_decay": 1e-4, "batch_size": 64}
    x = space.encode([u])[0]
    assert space.feature_names() == [
        "optimizer=sgd", "optimizer=momentum", "optimizer=adam", "optimizer=rmsprop",
        "lr", "weight_decay", "batch_size",
    ]
    np.testing.assert_allclose(x, [0, 0, 1, 0, -2, -4, np.log10(64)])
    np.testing.assert_allclose(space.bounds, [[0, 0, 0, 0, -4, -6, np.log10(16)], [1, 1, 1, 1, 0, -2, np.log10(256)]])


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
