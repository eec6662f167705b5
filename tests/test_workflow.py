"""End to end: the real workflow with snakemake on the tiny config (2 rounds x 2 universes x 2 epochs)."""
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_checkout, planned_jobs, snakemake

OUT = Path("results/tiny")


@pytest.fixture
def run(tiny_run):
    return tiny_run


def test_lint_is_clean(tmp_path):
    cwd = make_checkout(tmp_path)
    res = snakemake(cwd, "--lint")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Congratulations" in res.stdout + res.stderr
    assert "Lints for" not in res.stdout + res.stderr


@pytest.mark.slow
def test_design_rounds(run):
    r0 = json.loads((run / OUT / "design/round_0.json").read_text())
    r1 = json.loads((run / OUT / "design/round_1.json").read_text())
    assert r0["strategy"] == "sobol" and r1["strategy"] == "gp-ivr"
    assert len(r0["universes"]) == len(r1["universes"]) == 2
    assert r0["n_previous"] == 0 and r1["n_previous"] == 2  # round 1 read round 0's results
    assert set(r1["diagnostics"]["outcomes"]) == {"val_acc", "train_loss"}
    assert [u["id"] for u in r1["universes"]] == ["r1u000", "r1u001"]


@pytest.mark.slow
def test_every_universe_has_its_files(run):
    for r in (0, 1):
        for k in (0, 1):
            u = run / OUT / f"universes/r{r}/s0/u{k}/seed0"
            train = json.loads((u / "train.json").read_text())
            assert train["status"] in ("ok", "diverged") and (u / "model.pt").stat().st_size > 0
            assert len(train["history"]) == train["epochs_run"] <= 2
            metrics = json.loads((u / "metrics.json").read_text())["metrics"]
            assert metrics["gap"] == pytest.approx(metrics["train_acc"] - metrics["test_acc"])
            # every epoch is a line of the job's log (epoch, metrics, seconds) and has its seconds
            log = (run / OUT / f"logs/train/r{r}_s0_seed0.log").read_text()
            for h in train["history"]:
                assert f"{train['id']} epoch {h['epoch']}/{train['epochs_run']} train_loss=" in log and h["seconds"] >= 0


@pytest.mark.slow
def test_multiverse_table(run):
    df = pd.read_parquet(run / OUT / "multiverse.parquet")
    assert len(df) == 4 and list(df["id"]) == ["r0u000", "r0u001", "r1u000", "r1u001"]
    for col in ("round", "seed", "optimizer", "lr", "weight_decay", "batch_size", "train_acc", "val_acc",
                "test_acc", "train_loss", "val_loss", "test_loss", "gap", "status", "config_hash",
                "version_torch", "version_botorch", "version_pandas"):
        assert col in df.columns, col
    assert df["test_acc"].between(0, 1).all()
    csv = pd.read_csv(run / OUT / "multiverse.csv")
    assert list(csv["id"]) == list(df["id"])


FIGURES = ["claims", "outcomes_vs_dimensions"] + [
    f"{kind}_{m}" for m in ("test_acc", "gap", "train_loss", "val_acc")
    for kind in ("posterior_map", "specification_curve", "sobol", "loo")
] + [f"claim_{c}{w}" for c in ("adam_vs_sgd", "adaptive_gap", "gap_grows_with_batch", "train_loss_vs_gap",
                               "adam_expected_best") for w in ("", "_where")]


@pytest.mark.slow
def test_claims_and_figures(run):
    claims = json.loads((run / OUT / "report/claims.json").read_text())
    assert [c["name"] for c in claims["claims"]] == [
        "adam_vs_sgd", "adaptive_gap", "gap_grows_with_batch", "train_loss_vs_gap", "adam_expected_best"]
    assert [c["type"] for c in claims["claims"]] == ["comparison", "comparison", "trend", "correlation", "expected_best"]
    for c in claims["claims"]:
        g = c["gp"]
        assert g["verdict"] in ("holds", "fails", "equivalent", "uncertain", "too few universes")
        assert c["headline"]["badge"] in ("holds", "fails", "equivalent", "uncertain",
                                          "too few universes") and c["headline"]["text"].startswith(c["statement"])
        if g["verdict"] != "too few universes":
            assert 0 <= g["p_holds"] <= 1 and g["effect_lo"] <= g["effect_hi"]
        assert "observed" in c and "summary" in c and "surrogate_ok" in c
    trend = claims["claims"][2]
    assert [k["label"] for k in trend["conditions"]][::4] == ["marginal", "with lr scaled as batch_size^1"]
    for m in ("test_acc", "gap"):
        assert set(claims["sensitivity"][m]) == {"optimizer", "lr", "weight_decay", "batch_size", "momentum", "eps"}
        assert 0 <= claims["diagnostics"][m]["coverage"] <= 1
    for png in FIGURES:
        assert (run / OUT / f"report/{png}.png").read_bytes()[:4] == b"\x89PNG", png
    page = (run / OUT / "report.html").read_text()
    assert "Summary of claims" in page and page.count("<img ") == len(FIGURES)
    assert page.count("<a class='badge ") == len(claims["claims"]) and "{'ok'" not in page  # statuses as words


@pytest.mark.slow
def test_rerun_has_nothing_to_do(run):
    res = snakemake(run, "-n", "--cores", "1")
    assert res.returncode == 0 and "Nothing to be done" in res.stdout + res.stderr


@pytest.mark.slow
def test_snakemake_report(run):
    res = snakemake(run, "--report", "snakemake_report.html")
    assert res.returncode == 0, res.stderr[-3000:]
    html = (run / "snakemake_report.html").read_text()
    for name in ["claims.csv", "Specification curve", "Summary of claims", "Sobol", "leave-one-out"] + \
            [f"{png}.png" for png in FIGURES]:
        assert name in html, name


@pytest.mark.slow
def test_same_config_gives_identical_tables(run, tmp_path):
    """A second run from scratch, with one core, reproduces the designs and the table."""
    cwd = make_checkout(tmp_path)
    res = snakemake(cwd, "--cores", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    for f in ("design/round_0.json", "design/round_1.json", "multiverse.csv"):
        a, b = (run / OUT / f).read_bytes(), (cwd / OUT / f).read_bytes()
        if f.startswith("design"):
            a, b = (json.loads(x)["universes"] for x in (a, b))
        assert a == b, f
    pd.testing.assert_frame_equal(pd.read_parquet(run / OUT / "multiverse.parquet"),
                                  pd.read_parquet(cwd / OUT / "multiverse.parquet"))


def test_a_sobol_round_is_designed_without_waiting_for_training(tmp_path):
    """Rule design's input: a Sobol round reads the earlier rounds' design files, so
    Snakemake designs round 2 before any training; a GP round reads their metrics."""
    cwd = make_checkout(tmp_path, design={"strategy": "sobol", "rounds": 2})
    target = str(OUT / "design/round_2.json")
    res = snakemake(cwd, "-n", "--cores", "2", target)
    assert res.returncode == 0, res.stderr[-2000:]
    assert planned_jobs(res) == {"design": 3}
    cwd = make_checkout(tmp_path / "gp", design={"strategy": "gp-ivr", "rounds": 2})
    res = snakemake(cwd, "-n", "--cores", "2", target)
    assert res.returncode == 0, res.stderr[-2000:]
    assert planned_jobs(res)["train"] == 2 and planned_jobs(res)["metrics"] == 2
