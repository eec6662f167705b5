"""Partial reruns, resume after kill -9, failing universes: the real workflow on tiny configs."""
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import load_config, make_checkout, planned_jobs, snakemake, write_config

OUT = Path("results/tiny")


def copy_run(src: Path, dest: Path) -> Path:
    """A finished run, copied with its timestamps and Snakemake's metadata."""
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    return dest


def digests(cwd: Path, patterns=("design/*.json", "universes/**/*.json", "universes/**/*.pt", "data/*")) -> dict:
    out = {}
    for pat in patterns:
        for f in sorted((cwd / OUT).glob(pat)):
            out[str(f.relative_to(cwd))] = (hashlib.sha256(f.read_bytes()).hexdigest(), f.stat().st_mtime_ns)
    return out


@pytest.mark.slow
def test_adding_a_round_runs_only_the_new_jobs(tiny_run, tmp_path):
    cwd = copy_run(tiny_run, tmp_path / "run")
    before = digests(cwd)
    config = load_config(cwd / "tiny.yaml")
    write_config(cwd, config, design={"rounds": 2})
    dry = snakemake(cwd, "-n", "--cores", "2")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert planned_jobs(dry) == {"design": 1, "train": 1, "metrics": 1, "aggregate": 1, "report": 1, "all": 1}
    res = snakemake(cwd, "--cores", "2")
    assert res.returncode == 0, res.stderr[-2000:]
    after = digests(cwd)
    assert {k: after[k] for k in before} == before, "earlier designs, models and results are untouched"
    assert (cwd / OUT / "design/round_2.json").exists()
    assert len(pd.read_parquet(cwd / OUT / "multiverse.parquet")) == 6


@pytest.mark.slow
def test_adding_seeds_runs_only_the_new_replicates(tiny_run, tmp_path):
    cwd = copy_run(tiny_run, tmp_path / "run")
    before = digests(cwd)
    write_config(cwd, load_config(cwd / "tiny.yaml"), training={"seeds": 2})
    dry = snakemake(cwd, "-n", "--cores", "2")
    assert dry.returncode == 0, dry.stderr[-2000:]
    # seed 1 of round 0's and round 1's shard; no design round is redone
    assert planned_jobs(dry) == {"train": 2, "metrics": 2, "aggregate": 1, "report": 1, "all": 1}
    res = snakemake(cwd, "--cores", "2")
    assert res.returncode == 0, res.stderr[-2000:]
    after = digests(cwd)
    assert {k: after[k] for k in before} == before
    df = pd.read_parquet(cwd / OUT / "multiverse.parquet")
    assert len(df) == 8 and sorted(df["replicate"].unique()) == [0, 1]
    first = df[df["replicate"] == 0].reset_index(drop=True)
    pd.testing.assert_frame_equal(first[["id", "seed", "test_acc"]],
                                  pd.read_parquet(tiny_run / OUT / "multiverse.parquet")[["id", "seed", "test_acc"]])
    assert (df.groupby("id")["seed"].nunique() == 2).all()


def test_design_reads_the_seeds_that_design_replicates_names(tmp_path):
    """With design.replicates 2, round 1's design reads both seeds of round 0's universes."""
    cwd = make_checkout(tmp_path, training={"seeds": 3}, design={"replicates": 2})
    dry = snakemake(cwd, "-n", "--cores", "1", str(OUT / "design/round_1.json"))
    assert dry.returncode == 0, dry.stderr[-2000:]
    out = dry.stdout + dry.stderr
    block = out[out.index("output: results/tiny/design/round_1.json") - 600:]
    for k in (0, 1):
        for j in (0, 1):
            assert f"r0/s0/u{k}/seed{j}/metrics.json" in block
    assert "seed2/metrics.json" not in block


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit",
    [
        {"claims": "add"},
        {"report": {"bootstrap": 300}},
        {"report": {"metrics": ["val_acc"]}},
        {"training": {"threads": 2, "retries": 3}},
    ],
    ids=["add-claim", "report-setting", "report-metric", "parallelism-and-retries"],
)
def test_report_only_edits_rerun_only_the_report(tiny_run, tmp_path, edit):
    cwd = copy_run(tiny_run, tmp_path / "run")
    config = load_config(cwd / "tiny.yaml")
    if edit.get("claims") == "add":
        claim = {"name": "rmsprop_vs_momentum", "metric": "val_acc", "dimension": "optimizer",
                 "a": ["rmsprop"], "b": ["momentum"], "relation": ">"}
        edit = {"claims": config["claims"] + [claim]}
    write_config(cwd, config, **edit)
    dry = snakemake(cwd, "-n", "--cores", "2")
    assert dry.returncode == 0, dry.stderr[-2000:]
    expected = {"report": 1, "all": 1} if "training" not in edit else {}
    assert planned_jobs(dry) == expected


@pytest.mark.slow
def test_single_targets(tiny_run, tmp_path):
    cwd = make_checkout(tmp_path)
    one_round = snakemake(cwd, "-n", "--cores", "1", "results/tiny/design/round_0.json")
    assert planned_jobs(one_round) == {"design": 1}
    one_shard = snakemake(cwd, "-n", "--cores", "1", "results/tiny/universes/r0/s0/u1/seed0/metrics.json")
    assert planned_jobs(one_shard) == {"prepare_data": 1, "design": 1, "train": 1, "metrics": 1}
    until = snakemake(cwd, "-n", "--cores", "1", "--until", "train")
    assert set(planned_jobs(until)) == {"prepare_data", "design", "train", "metrics"}
    # --until train still needs round 0's metrics for round 1's design, so only round 0 is complete
    assert planned_jobs(until)["train"] == 2 and planned_jobs(until)["design"] == 2


@pytest.mark.slow
def test_kill_9_during_training_then_rerun(tmp_path):
    """Only incomplete jobs run again, no partial file is taken as complete, results are equal."""
    slow = {"training": {"epochs": 40}, "model": {"width": 64, "depth": 2}}
    cwd = make_checkout(tmp_path / "killed", **slow)
    cmd = [sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--cores", "1"]
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first = cwd / OUT / "universes/r0/s0/u0/seed0/train.json"
    deadline = time.time() + 300
    while not first.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first.exists(), "the run was killed while training its first shard"
    second = cwd / OUT / "universes/r0/s0/u1/seed0"
    # Files are written then renamed: whatever exists is whole.
    for f in (cwd / OUT / "universes").rglob("*.json"):
        json.loads(f.read_text())
    for f in (cwd / OUT / "universes").rglob("*.pt"):
        torch.load(f, weights_only=True)
    assert not (second / "metrics.json").exists()
    # Snakemake marked the killed shard's outputs incomplete, finished or not
    marks = {base64.b64decode(m.name).decode() for m in (cwd / ".snakemake/incomplete").iterdir()}
    assert "results/tiny/universes/r0/s0/u0/seed0/train.json" in marks

    dry = snakemake(cwd, "-n", "--cores", "2")
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = planned_jobs(dry)
    assert "prepare_data" not in jobs and jobs["train"] == 2  # shard r0/s0 again, then round 1's
    assert "design" in jobs and jobs["design"] == 1  # round 0's design finished and is kept
    # A killed Snakemake leaves its lock; --unlock removes it (documented in docs/workflow.md).
    assert snakemake(cwd, "--unlock").returncode == 0
    res = snakemake(cwd, "--cores", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    assert not (cwd / ".snakemake/incomplete").exists() or not any((cwd / ".snakemake/incomplete").iterdir())

    ref = make_checkout(tmp_path / "reference", **slow)
    assert snakemake(ref, "--cores", "2").returncode == 0
    pd.testing.assert_frame_equal(pd.read_parquet(cwd / OUT / "multiverse.parquet"),
                                  pd.read_parquet(ref / OUT / "multiverse.parquet"))


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_universes_that_raise_are_recorded_and_do_not_stop_the_workflow(tmp_path):
    """A training that raises for every universe (as one out of GPU memory would; a missing
    GPU itself stops the job instead: tests/test_train.py) is recorded, retried, and the
    workflow goes on to a report that says it has too few universes."""
    cwd = make_checkout(tmp_path)
    (cwd / "src").mkdir()
    (cwd / "src" / "oom.py").write_text("def train(lr, seed):\n    raise RuntimeError('CUDA out of memory (a stand-in)')\n")
    config = {
        "study": "tiny", "seed": 1,
        "training": {"entrypoint": "oom:train", "pythonpath": ["src"], "shard_size": 2, "retries": 2},
        "metrics": {"val_acc": {"range": [0, 1], "goal": "maximize"}},
        "space": {"lr": {"type": "float", "low": 0.001, "high": 1.0, "log": True},
                  "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]}},
        "design": {"strategy": "gp-ivr", "initial": 2, "rounds": 1, "batch": 2, "outcomes": ["val_acc"],
                   "candidates": 32, "reference": 16},
        "claims": [{"name": "adam", "metric": "val_acc", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"],
                    "relation": ">="}],
        "report": {},
    }
    (cwd / "tiny.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    res = snakemake(cwd, "--cores", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    df = pd.read_parquet(cwd / OUT / "multiverse.parquet")
    assert len(df) == 4 and (df["status"] == "failed").all() and df["error"].str.contains("out of memory").all()
    record = json.loads((cwd / OUT / "universes/r0/s0/u0/seed0/train.json").read_text())
    assert record["attempts"] == 3  # 1 + retries
    r1 = json.loads((cwd / OUT / "design/round_1.json").read_text())
    assert r1["n_previous"] == 2 and r1["strategy"] == "sobol" and "fallback" in r1["diagnostics"]
    claims = json.loads((cwd / OUT / "report/claims.json").read_text())
    assert all(c["gp"]["verdict"] == "too few universes" for c in claims["claims"])


@pytest.mark.slow
@pytest.mark.parametrize("edit", [{"reference": 64}, {"candidates": 64}], ids=["design.reference", "design.candidates"])
def test_a_gp_setting_reruns_the_gp_rounds_never_round_0(tiny_run, tmp_path, edit):
    """Round 0 is Sobol: its params hold only what it uses (multiverse.spec.strategies.round_settings)."""
    cwd = copy_run(tiny_run, tmp_path / "run")
    write_config(cwd, load_config(cwd / "tiny.yaml"), design=edit)
    dry = snakemake(cwd, "-n", "--cores", "2")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert planned_jobs(dry) == {"design": 1, "train": 1, "metrics": 1, "aggregate": 1, "report": 1, "all": 1}
    out = dry.stdout + dry.stderr
    assert "output: results/tiny/design/round_1.json" in out and "output: results/tiny/design/round_0.json" not in out


@pytest.mark.slow
def test_partial_report_reads_the_rounds_finished_so_far_and_trains_nothing(tiny_run, tmp_path):
    cwd = copy_run(tiny_run, tmp_path / "run")
    (cwd / OUT / "universes/r1/s0/u1/seed0/metrics.json").unlink()  # round 1 still running
    before = digests(cwd)
    dry = snakemake(cwd, "-n", "--cores", "2", "--nolock", "partial_report")
    assert planned_jobs(dry) == {"partial_aggregate": 1, "partial_report_files": 1, "partial_report": 1}
    res = snakemake(cwd, "--cores", "2", "--nolock", "partial_report")
    assert res.returncode == 0, res.stderr[-2000:]
    df = pd.read_parquet(cwd / OUT / "partial/multiverse.parquet")
    assert sorted(df["round"].unique()) == [0] and len(df) == 2
    assert (cwd / OUT / "partial/report.html").stat().st_size > 10_000
    assert digests(cwd) == before, "the study's own files are untouched"
    assert json.loads((cwd / OUT / "partial/report/claims.json").read_text())["n_universes"] == 2


def test_partial_report_before_any_round_finished_says_so(tmp_path):
    cwd = make_checkout(tmp_path)
    dry = snakemake(cwd, "-n", "--cores", "1", "partial_report")
    assert dry.returncode != 0
    assert "no design round of study 'tiny' has finished yet" in dry.stdout + dry.stderr
