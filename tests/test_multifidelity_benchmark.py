"""The multi-fidelity benchmark (benchmarks/multifidelity.py) on a constructed grid with a
low fidelity: the continuation spends today's compute in expectation, the draw's table is
the one a multi-fidelity study's aggregate writes, and a few draws end to end through the
report's claims code."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import calibration as K  # noqa: E402
import multifidelity as MF  # noqa: E402

SPACE = {
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-3, "high": 1.0, "log": True},
    "epochs": {"type": "int", "low": 1, "high": 9},
}
AXES = {"optimizer": ["sgd", "adam"], "lr": [float(v) for v in np.logspace(-3, 0, 8)], "epochs": list(range(1, 10))}
COMPARISON = {"name": "cmp", "type": "comparison", "metric": "val_acc", "dimension": "optimizer",
              "a": ["adam"], "b": ["sgd"], "relation": ">="}
TREND = {"name": "tr", "type": "trend", "metric": "val_acc", "dimension": "epochs", "direction": "increasing"}
CORRELATION = {"name": "co", "type": "correlation", "x": "train_loss", "y": "val_acc", "relation": "negative"}


def constructed(q=0.25, noise=0.01, seed=0) -> MF.FidelityGrid:
    """val_acc = 0.5 + 0.1 [adam] + 0.2 epochs_position - 0.05 lr_position (+ seed noise);
    train_loss = 1 - the noise-free val_acc; the low fidelity reads 0.8 of each (+ noise)
    and its half-way point 0.6 (one epoch: the full values); the largest lr diverges
    (train_loss NaN) at both fidelities for sgd's second seed."""
    from multiverse.fidelity import low_epochs

    opt = np.array([0.0, 0.1])[:, None, None]
    lr = np.linspace(0, 1, 8)[None, :, None]
    ep = np.linspace(0, 1, 9)[None, None, :]
    f = 0.5 + opt + 0.2 * ep - 0.05 * lr
    rng = np.random.default_rng(seed)
    eps = noise * rng.standard_normal(f.shape + (2,))
    acc = f[..., None] + eps
    values = {"val_acc": acc, "train_loss": 1.0 - f[..., None] + 0 * eps}
    values["train_loss"][0, 7, :, 1] = np.nan
    grid = K.Grid("constructed", "made up", SPACE, AXES, values, ["val_acc"], [COMPARISON, TREND, CORRELATION])
    E = np.broadcast_to(np.array(AXES["epochs"], dtype=float)[None, None, :], f.shape).copy()
    low_e = np.vectorize(lambda e: float(low_epochs({"fraction": q}, int(e))))(E)
    complete = low_e >= E
    low = {m: np.where(complete[..., None], v, 0.8 * v + noise * rng.standard_normal(v.shape))
           for m, v in values.items()}
    half = {m: np.where(complete[..., None], v, 0.6 * v) for m, v in values.items()}
    return MF.FidelityGrid(grid, q, low, half, E, low_e, E - low_e, complete, "epochs")


def test_budget_probabilities_spend_the_budget():
    cost = np.array([2.0, 2.0, 4.0, 6.0, 8.0, 10.0])
    score = np.array([0.0, 1.0, 0.0, 3.0, 1.0, 0.5])
    p = MF.budget_probabilities(score, cost, 9.0, floor=0.1)
    assert p @ cost == pytest.approx(9.0, abs=1e-6)
    assert (p >= 0.1 - 1e-12).all() and (p <= 1).all()
    assert p[3] > p[1] > p[0]  # in proportion to the score above the floor
    uniform = MF.budget_probabilities(np.ones(6), cost, 9.0, floor=0.1)
    assert np.allclose(uniform, 9.0 / cost.sum())
    assert (MF.budget_probabilities(score, cost, 100.0) == 1).all()
    # the floor alone would overspend: it falls to the uniform share
    assert MF.budget_probabilities(score, cost, 1.0, floor=0.5) @ cost == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ValueError, match="no compute left"):
        MF.budget_probabilities(score, cost, -1.0)


def test_rounds_scale_today_s_layout():
    assert MF.rounds_of(48) == K.ROUNDS
    assert MF.rounds_of(96) == (32, 16, 16, 16, 16) and sum(MF.rounds_of(100)) == 100


@pytest.mark.parametrize("probability", ["uniform", "active"])
def test_a_multi_fidelity_draw_is_the_aggregate_s_table_at_today_s_compute(probability):
    fg = constructed()
    today, budget = MF.today_table(fg, seed=3)
    assert budget == sum(r["epochs"] for r in today.to_dict("records"))
    df, info = MF.fidelity_table(fg, 3, 96, probability, budget)
    # the expected compute is today's; the compute realised follows the draw
    assert info["expected_compute"] == pytest.approx(budget, rel=1e-6)
    low = sum(math.ceil(0.25 * e) for e in df["epochs"])
    assert info["low_compute"] == low
    more = sum(e - math.ceil(0.25 * e) for e, t in zip(df["epochs"], df["fidelity_trained"]) if t)
    assert info["compute"] == low + more
    assert len(df) == 96 and df["universe"].is_unique
    for col in ("low_val_acc", "low_train_loss", "val_acc", "train_loss", "continued", "continuation_probability",
                "fidelity_trained", "status", "design_weight", "design_draws"):
        assert col in df
    p, xi = df["continuation_probability"].to_numpy(), df["continued"].to_numpy(bool)
    assert ((p > 0) & (p <= 1)).all() and xi.any() and (~xi).any()
    assert df.loc[~xi, "val_acc"].isna().all() and df.loc[xi, "val_acc"].notna().all()
    assert set(df.loc[~xi, "status"]) == {"not_continued"} and set(df.loc[xi, "status"]) <= {"ok", "diverged"}
    diverged_low = fg.diverged_low()
    for row in df.to_dict("records"):
        cell = K.cell_of(fg.grid, row)
        at = cell + (row["seed"],)
        assert row["low_val_acc"] == fg.low["val_acc"][at]
        if row["continued"]:
            assert row["val_acc"] == fg.grid.values["val_acc"][at]
        final = bool(fg.complete[cell] or diverged_low[at])
        # a final low fidelity (one epoch, or diverged) is continued at probability 1 and costs nothing more
        if final:
            assert row["continued"] and row["continuation_probability"] == 1 and not row["fidelity_trained"]
        if diverged_low[at]:
            assert row["status"] == "diverged"
    # the continuation draw is the workflow's, keyed by the universes' ids: uniform and active share it
    from multiverse.fidelity import uniform_numbers

    u = uniform_numbers(3, df["universe"].tolist())
    assert np.array_equal(xi, (u < p))


@pytest.mark.slow
def test_small_benchmark_end_to_end():
    """Two draws on the constructed grid, every design through report_analysis.analyse: each
    claim is scored, every design spends today's compute in expectation, and the tables print."""
    import pandas as pd

    fg = constructed()
    rows = []
    for s in range(2):
        rows += [{"grid": "constructed", **r} for r in
                 MF.run_designs({fg.q: fg}, s, [(0.25, 64)], (1.0, 0.75),
                                report={"samples": 128, "reference": 32, "bootstrap": 200})]
    df = pd.DataFrame(rows)
    assert set(df["claim"]) == {"cmp", "tr", "co"}
    assert len(df) == 2 * 3 * (1 + 2 * 2)  # draws x claims x (today + 2 designs x 2 factors)
    for (lab, f, d), g in df.groupby(["label", "factor", "draw"]):
        assert g["expected_compute"].iloc[0] == pytest.approx(g["budget"].iloc[0], rel=1e-6)
        assert g["budget"].iloc[0] == pytest.approx(f * g["today_compute"].iloc[0])
    assert (df.groupby("draw")["today_compute"].nunique() == 1).all()  # one budget per draw: today's compute
    mf = df[df["design"] != "today"]
    assert (mf["continued"] < mf["N"]).all() and mf["design_verdict"].notna().all()
    assert np.isfinite(df["design_lo"]).any()
    assert len(MF.claims_table(df)) == 3 * 3
    at = MF.claims_table(df, 0.75)  # today's rows beside the designs at three quarters of its compute
    assert len(at) == 3 * 3 and (at[at["design"] != "today"]["mean compute"].astype(float)
                                 < at[at["design"] == "today"]["mean compute"].astype(float).max()).all()
    table = MF.designs_table(df)
    assert len(table) == 1 + 2 * 2 and table["draws"].eq(2).all()
    assert len(MF.compute_to_match(df)) == 2
