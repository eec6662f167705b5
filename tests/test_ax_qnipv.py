"""The Ax + qNIPV reference round (benchmarks/ax_qnipv.py) returns valid universes."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("ax")

from ax_qnipv import ax_qnipv_round  # noqa: E402

SPACE = {
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
}


def test_ax_qnipv_round_returns_valid_universes():
    rng = np.random.default_rng(0)
    observed = [{"lr": float(10 ** rng.uniform(-4, 0)), "optimizer": ["sgd", "adam"][i % 2]} for i in range(8)]
    y = [math.sin(math.log10(u["lr"])) + 0.5 * (u["optimizer"] == "adam") for u in observed]
    y[3] = float("nan")  # left out
    new = ax_qnipv_round(SPACE, observed, y, q=2, seed=0, num_restarts=2, raw_samples=32, mc_points=32)
    assert len(new) == 2
    for u in new:
        assert set(u) == set(SPACE)
        assert isinstance(u["lr"], float) and 1e-4 <= u["lr"] <= 1.0
        assert u["optimizer"] in ("sgd", "adam")
