"""benchmarks/claims_design.py: its synthetic multiverses flip where they say, and a draw is
scored at every budget through the report's code."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import calibration as CB  # noqa: E402
import claims_design as D  # noqa: E402


def test_the_categorical_multiverse_flips_at_x1_0_4():
    g = D.synthetic_categorical()
    local, labels = CB.true_labels(g, g.claims[0])  # x1 x x2
    x1 = np.asarray(g.axes["x1"])
    assert (labels[x1 > 0.6] == "holds").all() and (labels[x1 < 0.2] == "fails").all()


def test_the_curved_multiverse_rises_inside_its_disc():
    g = D.synthetic_curved()
    local, labels = CB.true_labels(g, g.claims[0])  # x1 x x2
    x1, x2 = np.meshgrid(g.axes["x1"], g.axes["x2"], indexing="ij")
    r = np.hypot(x1 - 0.3, x2 - 0.3)
    assert (labels[r < 0.4] == "holds").all() and (labels[r > 0.6] == "fails").all()


def test_a_draw_is_scored_at_every_budget_from_the_same_sobol_start():
    g = D.synthetic_categorical()
    rows = {s: D.run(g, s, seed=0, rounds=(8, 4)) for s in ("sobol", "random")}
    for s, r in rows.items():
        assert [x["budget"] for x in r] == [8, 12] and all(x["strategy"] == s for x in r)
        assert all(x["width"] > 0 and 0 <= x["label_disagreement"] <= 1 for x in r)
    # round 0 is the same Sobol round for every strategy: the same answer at budget 8
    assert rows["sobol"][0]["gp_effect"] == rows["random"][0]["gp_effect"]
    table = D.tables(__import__("pandas").DataFrame(rows["sobol"] + rows["random"]))
    assert "synthetic_a_vs_b" in table and "Coverage" in table
