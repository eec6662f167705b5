import pandas as pd

from multiverse.aggregate import multiverse_table, write_table


def _record(r, i, status="ok", acc=0.9):
    return {
        "id": f"r{r}u{i:03d}", "round": r, "index": i, "seed": 10 * r + i, "strategy": "sobol",
        "params": {"optimizer": "adam", "lr": 0.01, "batch_size": 32},
        "metrics": {m: acc for m in ("train_acc", "train_loss", "val_acc", "val_loss", "test_acc", "test_loss")} | {"gap": 0.0},
        "status": status, "error": "boom" if status == "failed" else None, "diverged_epoch": None,
        "epochs_run": 3, "versions": {"torch": "2.13.0"},
    }


def test_table_is_tidy_sorted_and_has_provenance(tmp_path):
    recs = [_record(1, 0), _record(0, 1, "failed", float("nan")), _record(0, 0)]
    df = multiverse_table(recs, ["optimizer", "lr", "batch_size"], {"config_hash": "abc"})
    assert list(df["id"]) == ["r0u000", "r0u001", "r1u000"]
    for col in ("round", "seed", "optimizer", "lr", "batch_size", "test_acc", "gap", "status", "error",
                "config_hash", "version_torch", "strategy"):
        assert col in df.columns
    assert df.loc[1, "status"] == "failed" and df.loc[1, "error"] == "boom"
    write_table(df, tmp_path / "t.parquet", tmp_path / "t.csv")
    back = pd.read_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(back, df)
    assert len(pd.read_csv(tmp_path / "t.csv")) == 3


def test_replicates_and_inactive_dimensions_in_the_table(tmp_path):
    """A replicate's row belongs to the universe it adds seeds to; an inactive dimension is missing."""
    a, b = _record(0, 0), _record(1, 0)
    a["params"]["eps"] = None
    b["params"] = {**a["params"]}
    b["replicate_of"] = "r0u000"
    df = multiverse_table([a, b], ["optimizer", "lr", "batch_size", "eps"], {"config_hash": "abc"})
    assert list(df["universe"]) == ["r0u000", "r0u000"] and df["eps"].isna().all()
    write_table(df, tmp_path / "t.parquet", tmp_path / "t.csv")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t.parquet"), df)
