"""The specification curve (multiverse.report_analysis.specification_data,
multiverse.plots.specification_curve) at any size: the same image size for 48 universes as
for 5,000, points and a mark per universe below a few hundred, quantile bands and shares of
each bin above; each universe's seeds' range, the claim's groups, and the universes
without a value (failed, not continued) at the right. Each case draws in under a second
(--durations: 0.5 s at 48, 0.7 s at 5,000 on 2 cores, 2026-12-07)."""
import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from multiverse import plots
from multiverse.report_analysis import CURVE_BINS, CURVE_POINTS, specification_data
from multiverse.space import SearchSpace

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})
CLAIM = {"name": "adam_vs_sgd", "type": "comparison", "metric": "test_acc", "dimension": "optimizer",
         "a": ["adam"], "b": ["sgd"], "relation": ">="}


def study(n: int, seeds: int = 2, failed: int = 3, seed: int = 0) -> pd.DataFrame:
    """A constructed study table: ``n`` universes under ``seeds`` seeds, the first
    ``failed`` of them failed (no metric), the next one not continued."""
    rng = np.random.default_rng(seed)
    opt = rng.choice(["sgd", "adam"], n)
    lr = 10 ** rng.uniform(-4, 0, n)
    batch = np.round(2 ** rng.uniform(4, 8, n)).astype(int)
    rows = []
    for i in range(n):
        base = 0.9 - 0.3 * (np.log10(lr[i]) + 2) ** 2 / 4 + 0.05 * (opt[i] == "adam")
        for j in range(seeds):
            status = "failed" if i < failed else ("not_continued" if i == failed else "ok")
            value = np.nan if status != "ok" else base + 0.02 * rng.standard_normal()
            rows.append({"universe": f"r0u{i:04d}", "seed": j, "status": status, "optimizer": opt[i], "lr": lr[i],
                         "batch_size": batch[i], "test_acc": value})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("n", [48, 5000])
def test_the_curve_keeps_one_size_and_shows_the_claim_and_the_failed(tmp_path, n):
    df = study(n)
    data = specification_data(None, SPACE, df, "test_acc", [CLAIM])
    drawn = plots.specification_curve(data, SPACE, "test_acc", str(tmp_path / "curve.png"))
    image = imread(tmp_path / "curve.png")
    assert image.shape[:2] == (round(drawn["size_inches"][1] * 110), round(drawn["size_inches"][0] * 110))
    assert drawn["size_inches"] == plots.specification_curve(
        specification_data(None, SPACE, study(48), "test_acc", [CLAIM]), SPACE, "test_acc",
        str(tmp_path / "small.png"))["size_inches"], "one size whatever the count"
    assert drawn["missing"] == 4 and data["missing_counts"] == {"failed": 3, "not_continued": 1}
    assert drawn["n"] == n - 4 and drawn["binned"] == (n - 4 > CURVE_POINTS)
    assert len(drawn["lines"]) == 2 and all("adam_vs_sgd" in line for line in drawn["lines"])
    # the strip: 2 levels + 3 thirds of each numeric dimension + the claim's two groups
    assert drawn["strip_rows"] == 2 + 3 + 3 + 2
    ranked = data["table"]["value"].to_numpy()
    assert np.all(np.diff(ranked) >= 0) and (data["table"]["seed_hi"] >= data["table"]["seed_lo"]).all()
    if drawn["binned"]:
        assert data["bins"].max() == CURVE_BINS - 1
