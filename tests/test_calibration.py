"""The calibration benchmark's statistics (benchmarks/calibration.py) on a constructed
grid whose answers are known, and a small calibration run end to end through the
report's claims code."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import calibration as K  # noqa: E402

SPACE = {
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-3, "high": 1.0, "log": True},
    "width": {"type": "int", "low": 1, "high": 9},
}
AXES = {"optimizer": ["sgd", "adam"], "lr": [1e-3, 1e-2, 1e-1, 1.0], "width": [1, 3, 5, 7, 9]}
COMPARISON = {"name": "cmp", "type": "comparison", "metric": "val_acc", "dimension": "optimizer",
              "a": ["adam"], "b": ["sgd"], "relation": ">="}
TREND = {"name": "tr", "type": "trend", "metric": "val_acc", "dimension": "width", "direction": "increasing"}
CORRELATION = {"name": "co", "type": "correlation", "x": "train_loss", "y": "val_acc", "relation": "negative"}
BEST = {"name": "eb", "type": "expected_best", "metric": "val_acc", "dimension": "optimizer", "a": ["adam"],
        "b": ["sgd"], "relation": ">=", "min_budget": 2}


def constructed(noise=0.01, seed=0):
    """val_acc = 0.5 + 0.1 [adam] + 0.2 width_position - 0.05 lr_position (+ seed noise);
    train_loss = 1 - val_acc, without noise."""
    opt = np.array([0.0, 0.1])[:, None, None]
    lr = np.linspace(0, 1, 4)[None, :, None]
    width = np.linspace(0, 1, 5)[None, None, :]
    f = 0.5 + opt + 0.2 * width - 0.05 * lr
    eps = noise * np.random.default_rng(seed).standard_normal(f.shape + (2,))
    acc = f[..., None] + eps
    values = {"val_acc": acc, "train_loss": 1.0 - f[..., None] + 0 * eps}
    return K.Grid("constructed", "made up", SPACE, AXES, values, ["val_acc"], [COMPARISON, TREND, CORRELATION, BEST])


def test_truths_of_a_constructed_grid():
    g = constructed(noise=0.0)
    assert K.truth(g, COMPARISON) == {"truth": pytest.approx(0.1), "error": pytest.approx(0.0),
                                      "one_seed": pytest.approx(0.1)}
    assert K.truth(g, TREND)["truth"] == pytest.approx(0.2)
    assert K.truth(g, CORRELATION)["truth"] == pytest.approx(-1.0)
    # adam's population is sgd's shifted by 0.1: its expected best is 0.1 higher at every budget
    assert K.truth(g, BEST, [2, 5, 20])["truth"] == pytest.approx(0.1)


def test_grid_error_is_half_the_seed_difference():
    g = constructed(noise=0.0)
    g.values["val_acc"][..., 1] += 0.02 * (np.array(AXES["optimizer"]) == "adam")[:, None, None]
    t = K.truth(g, COMPARISON)
    assert t["truth"] == pytest.approx(0.11) and t["error"] == pytest.approx(0.01)


def test_true_labels_flip_with_the_local_effect():
    g = constructed(noise=0.001)
    # adam ahead at small lr, behind at large lr
    g.values["val_acc"][1] -= 0.2 * np.linspace(0, 1, 4)[:, None, None]
    local, labels = K.true_labels(g, COMPARISON)
    assert local.shape == (4, 5)
    assert (labels[0] == "holds").all() and (labels[-1] == "fails").all()
    assert set(labels[1]) <= {"holds", "uncertain"}


def test_snap_takes_the_nearest_unused_cell_of_the_same_level():
    from multiverse.space import SearchSpace

    g, space = constructed(), SearchSpace.from_config(SPACE)
    u = {"optimizer": "adam", "lr": 0.012, "width": 4}
    first = K.snap(g, space, u, set())
    assert first[0] == 1 and first[1] == 1 and first[2] in (1, 2)
    second = K.snap(g, space, u, {first})
    assert second != first and second[0] == 1 and second[1] == 1


def test_coverage_and_wrong_verdicts():
    assert K.covers({"effect_lo": -0.1, "effect_hi": 0.2}, 0.0) == 1.0
    assert K.covers({"effect_lo": 0.1, "effect_hi": 0.2}, 0.0) == 0.0
    assert np.isnan(K.covers({"effect_lo": np.nan, "effect_hi": 0.2}, 0.0))
    assert K.wrong("fails", True) and K.wrong("holds", False)
    assert not K.wrong("uncertain", True) and not K.wrong("holds", True)
    # a true tie satisfies '>=' (so "fails" on it is wrong), not '>'
    assert K.holds(0.0, COMPARISON) and not K.holds(0.0, {**COMPARISON, "relation": ">"})


def test_wilson_interval():
    lo, hi = K.wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-3)
    lo, hi = K.wilson(45, 54)
    assert lo < 45 / 54 < hi
    assert K.rate([1, 0, np.nan, 1]) == "2/3 = 0.67 [0.21, 0.94]"


def test_the_draw_is_the_workflow_design_snapped_to_the_grid():
    g = constructed()
    df, cells = K.draw_table(g, seed=3, rounds=(8, 4))
    assert len(df) == len(cells) == 12 and df["universe"].is_unique
    assert set(df["seed"]) <= {0, 1}
    for row in df.to_dict("records"):
        cell = tuple(AXES[n].index(row[n]) for n in AXES)
        assert cell in cells
        assert row["val_acc"] == g.values["val_acc"][cell + (row["seed"],)]
    again, _ = K.draw_table(g, seed=3, rounds=(8, 4))
    assert again.equals(df)


def test_a_draw_that_reads_both_seeds_has_the_same_universes():
    g = constructed()
    one, cells = K.draw_table(g, seed=3, rounds=(8, 4))
    both, cells2 = K.draw_table(g, seed=3, rounds=(8, 4), seeds_read=2)
    assert cells2 == cells and len(both) == 2 * len(one)
    assert all(sorted(v) == [0, 1] for v in both.groupby("universe")["seed"].apply(list))
    drawn = both.merge(one[["universe", "seed"]], on=["universe", "seed"])  # the seed the design read
    assert drawn.sort_values("universe").reset_index(drop=True).equals(one.sort_values("universe").reset_index(drop=True))
    for row in both.to_dict("records"):
        cell = tuple(AXES[n].index(row[n]) for n in AXES)
        assert row["val_acc"] == g.values["val_acc"][cell + (row["seed"],)]


@pytest.mark.slow
def test_small_calibration_end_to_end():
    """Three draws on the constructed grid through report_analysis.analyse: every claim is scored,
    and on this smooth, well-measured grid the GP's intervals hold the strong truths."""
    g = constructed(noise=0.01)
    rows = [{"grid": "constructed", **r} for s in range(3)
            for r in K.run_draw(g, s, report={"samples": 128, "reference": 32, "bootstrap": 200}, rounds=(12, 6, 6))]
    assert {r["claim"] for r in rows} == {"cmp", "tr", "co", "eb"} and len(rows) == 12
    table = K.summary(rows)
    assert len(table) == 4 and table["draws"].tolist() == [3] * 4
    cmp = [r for r in rows if r["claim"] == "cmp"]
    assert sum(r["gp_covers"] for r in cmp) >= 2
    assert all(r["gp_verdict"] == "holds" and not r["gp_wrong"] for r in cmp)
    assert all(0 <= r["label_disagreement"] <= 1 for r in rows if r["type"] in ("comparison", "trend"))


def test_design_truth_of_a_correlation_is_the_single_run_tau():
    # seed noise attenuates Kendall's tau of one run's outcomes, not of the seed means:
    # the design-based answer reads one run per universe, so its truth is the per-seed tau
    g = constructed(noise=0.05)
    t = K.truth(g, CORRELATION)
    assert K.design_truth(g, CORRELATION) == pytest.approx(t["one_seed"])
    assert abs(t["one_seed"]) < abs(t["truth"])
    assert K.design_truth(g, COMPARISON) == pytest.approx(t := K.truth(g, COMPARISON)["truth"])


def test_an_expected_best_answer_without_budgets_scores_as_undecided():
    """With too few universes in a group, an expected-best answer has no budgets (a draw of
    32 universes on the digits grid gave one): the draw is scored at the claim's smallest
    budget, undecided, where it used to crash the benchmark."""
    from types import SimpleNamespace

    g = constructed(noise=0.0)
    none = {"verdict": "too few universes"}
    result = SimpleNamespace(claim=BEST, type="expected_best", gp=dict(none), observed=dict(none), design=dict(none))
    row = K.score(g, result)
    assert row["truth"] == pytest.approx(K.truth(g, BEST, [2])["truth"]) == pytest.approx(0.1)
    assert not row["design_decided"] and row["design_verdict"] == "too few universes"
