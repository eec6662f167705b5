"""The tiny study on a real SLURM (brought up by .ci/slurm-up) with the project's profile."""
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import ROOT, make_checkout, svm_project

OUT = Path("results/tiny")


def slurm_is_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    return res.returncode == 0 and any(s in res.stdout for s in ("idle", "mix", "alloc"))


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(), reason="no SLURM cluster here: run .ci/slurm-up first (as root)")
def test_tiny_study_on_slurm_equals_local_run(tiny_run, tmp_path):
    cwd = make_checkout(tmp_path)
    cmd = [sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--profile", "profiles/slurm",
           # the CI cluster has no accounts and answers status queries at once
           "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2"]
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "submitted with SLURM jobid" in log
    # without a declared node, each shard's train and metrics jobs travel as one submission
    assert "group_round0-seed0-part0" in log
    pd.testing.assert_frame_equal(pd.read_parquet(cwd / OUT / "multiverse.parquet"),
                                  pd.read_parquet(tiny_run / OUT / "multiverse.parquet"))
    for r in (0, 1):
        a, b = (json.loads((d / OUT / f"design/round_{r}.json").read_text())["universes"] for d in (cwd, tiny_run))
        assert a == b


def sbatch_view(job_id: str) -> dict[str, str]:
    """``scontrol show job``'s fields of a (finished) job: what SLURM was asked for."""
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\w[\w/:]*)=(\S*)", out))


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(), reason="no SLURM cluster here: run .ci/slurm-up first (as root)")
def test_a_multi_fidelity_study_travels_in_node_sized_low_and_continued_submissions(tmp_path):
    """design.fidelity on the CI cluster with its node declared (2 cores): per round, the
    low-fidelity shards travel as one submission (group round{r}-seed0-part0), then the
    continuation draw runs as its own job, then the continued shards as one submission of
    their own (continued-round{r}-seed0-part0); each fits the node; the table has both
    fidelities. (2026-12-07: 240 s on the 2-core machine under load.)"""
    cwd = make_checkout(tmp_path, training={"epochs": 3, "threads": 1, "mem_mb": 1000},
                        design={"strategy": "sobol", "initial": 4, "rounds": 1, "batch": 2,
                                "fidelity": {"epochs": 1, "share": 0.5}},
                        cluster={"cpus_per_node": 2, "mem_mb_per_node": 8000})
    cmd = [sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--profile", "profiles/slurm",
           "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2", "aggregate"]
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    jobs = re.findall(r"Job \S+ has been submitted with SLURM jobid (\d+) \(log: \S*/slurm_logs/(\S+)/\d+\.log\)", log)
    assert jobs, log[-3000:]
    for j, _ in jobs:  # everything finished, and nothing asks for more than the node
        v = sbatch_view(j)
        assert v["JobState"] == "COMPLETED" and int(v["NumCPUs"]) <= 2 and int(v["MinMemoryNode"].rstrip("M")) <= 8000, v
    groups = {name: j for j, name in jobs if name.startswith("group_")}
    draws = {int(name.rsplit("/", 1)[1]): int(j) for j, name in jobs if name.startswith("rule_continuation/")}
    assert len(groups) == 4 and len(draws) == 2, jobs
    for r, cpus in ((0, "2"), (1, "1")):  # round 0: its 2 shards side by side; round 1: its one shard
        low = groups[f"group_round{r}-seed0-part0_metrics_submission_low_train"]
        cont = groups[f"group_continued-round{r}-seed0-part0_metrics_continued_submission_train_continued"]
        assert sbatch_view(low)["NumCPUs"] == sbatch_view(cont)["NumCPUs"] == cpus
        assert int(low) < draws[r] < int(cont)  # submitted in this order: the round's draw stands between
    df = pd.read_parquet(cwd / OUT / "multiverse.parquet")
    assert {"continued", "continuation_probability", "low_val_acc"} <= set(df) and len(df) == 6
    assert df["continued"].any() and (~df["continued"]).any()
    assert (df.loc[df["continued"], "status"] == "ok").all() and df["low_val_acc"].notna().all()


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(), reason="no SLURM cluster here: run .ci/slurm-up first (as root)")
def test_a_gpu_study_is_submitted_with_its_gpu_request_sized_to_the_node(tmp_path):
    """The GPU-shaped CI cluster (.ci/slurm-up: 2 GPUs as GRES on dummy devices): with one
    GPU per job and a node of 2 GPUs, each round's two shards travel as one submission
    asking for 2 GPUs, SLURM schedules it (CUDA_VISIBLE_DEVICES set), and training falls
    back to the CPU under `device: auto`, saying so."""
    node = subprocess.run(["scontrol", "show", "node"], capture_output=True, text=True).stdout
    assert "Gres=gpu:2" in node, "the CI cluster declares 2 GPUs (.ci/slurm-up)"
    cwd = make_checkout(tmp_path, training={"device": "auto", "gpus": 1, "shard_size": 1, "threads": 1,
                                            "mem_mb": 1000, "epochs": 2},
                        cluster={"gpus_per_node": 2, "cpus_per_node": 2, "mem_mb_per_node": 8000})
    cmd = [sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--profile", "profiles/slurm",
           "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2"]
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    jobs = re.findall(r"Job (\S+) has been submitted with SLURM jobid (\d+)", log)
    assert jobs, log[-3000:]
    ids = {j: sbatch_view(j) for _, j in jobs}
    gpu = {j: v for j, v in ids.items() if v.get("TresPerJob") == "gres:gpu:2"}
    # one submission per round (2 shards of 1 GPU each), as the node allows; nothing else asks for a GPU
    assert len(gpu) == 2, {j: (v.get("JobName"), v.get("TresPerJob")) for j, v in ids.items()}
    for v in gpu.values():
        assert v["JobState"] == "COMPLETED" and v["NumCPUs"] == "2", v
    others = [v for j, v in ids.items() if j not in gpu]
    assert others and all("gpu" not in v.get("TresPerJob", "") for v in others)
    df = pd.read_parquet(cwd / OUT / "multiverse.parquet")
    assert len(df) == 4 and (df["status"] == "ok").all()
    train_log = (cwd / OUT / "logs/train/r0_s0_seed0.log").read_text()
    assert "training.device is 'auto' and torch.cuda.is_available() is False" in train_log
    assert "training on the CPU" in train_log


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(), reason="no SLURM cluster here: run .ci/slurm-up first (as root)")
def test_sigterm_to_a_train_job_on_slurm_saves_and_the_retry_resumes_to_the_uninterrupted_result(tmp_path):
    """Preemption on a real SLURM: `scancel --signal=TERM` to a running train job (what
    SLURM's preemption sends its steps) makes it save the running universe and exit 143;
    Snakemake's retry (the train rule's `retries`, training.retries) submits it again, and
    the retry resumes from the checkpoint to models and records equal to an uninterrupted
    local run's."""
    edits = {"training": {"epochs": 60, "shard_size": 2, "retries": 1}}
    targets = [f"{OUT}/universes/r0/s0/u{k}/seed0/{f}" for k in (0, 1) for f in ("model.pt", "train.json")]
    local = make_checkout(tmp_path / "local", **edits)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--cores", "1", *targets],
                         cwd=local, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    cwd = make_checkout(tmp_path / "slurm", **edits)
    out = open(tmp_path / "snakemake.log", "w")
    job = subprocess.Popen([sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--profile", "profiles/slurm",
                            "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2", *targets],
                           cwd=cwd, stdout=out, stderr=subprocess.STDOUT, text=True)
    train_log = cwd / OUT / "logs/train/r0_s0_seed0.log"
    deadline = time.monotonic() + 300
    while not (train_log.exists() and re.search(r"r0u000 epoch \d+/60", train_log.read_text())):
        assert job.poll() is None and time.monotonic() < deadline, (tmp_path / "snakemake.log").read_text()[-3000:]
        time.sleep(0.2)
    running = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i"], capture_output=True, text=True).stdout.split()
    assert len(running) == 1, running  # the train job (data and design ran before it)
    subprocess.run(["scancel", "--signal=TERM", running[0]], check=True)
    assert job.wait(timeout=600) == 0, (tmp_path / "snakemake.log").read_text()[-4000:]
    log = (tmp_path / "snakemake.log").read_text()
    assert len(re.findall(r"Job \S+ has been submitted with SLURM jobid", log)) >= 3, log[-3000:]  # + the retry
    assert "resumed from" in train_log.read_text(), train_log.read_text()[-3000:]  # the retry's own log
    for k in (0, 1):
        a, b = (torch.load(d / OUT / f"universes/r0/s0/u{k}/seed0/model.pt", weights_only=True) for d in (cwd, local))
        assert all(torch.equal(a[n], b[n]) for n in a)
        ra, rb = (json.loads((d / OUT / f"universes/r0/s0/u{k}/seed0/train.json").read_text()) for d in (cwd, local))
        assert ra["status"] == rb["status"] == "ok"
        assert [e["val_loss"] for e in ra["history"]] == [e["val_loss"] for e in rb["history"]]


SPAN_SVM = '''
import json, os, time
from svm_study import train as svm_train

def train(kernel, C, gamma, data, seed, run_dir):
    """The example's SVM, writing when, where and with which share of the GPU it ran."""
    start = time.time()
    result = svm_train(kernel, C, gamma, data, seed)
    time.sleep(2.0)  # long enough that a shard's two universes, if side by side, overlap
    with open(os.path.join(run_dir, "span.json"), "w") as fh:
        json.dump({"pid": os.getpid(), "start": start, "end": time.time(),
                   **{k: os.environ.get(k) for k in ("MULTIVERSE_GPU_SHARE", "CUDA_VISIBLE_DEVICES")}}, fh)
    return result
'''


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(), reason="no SLURM cluster here: run .ci/slurm-up first (as root)")
def test_per_device_k_universes_share_each_gpu_of_the_gres_cluster_and_give_the_local_results(tmp_path):
    """training.per_device 2 on the GPU-shaped CI cluster (2 GPUs as GRES, 2 cores), with
    `device: auto` and the user's own code: each train job asks SLURM for one GPU and
    2 x training.threads cores, so a submission holds one shard (the node's cores run out
    before its GPUs); the job's two universes train at once, in two processes that each see
    the job's GPU and half of it; the table equals a local run's one universe at a time."""
    overlay = {"design": {"strategy": "sobol", "initial": 4, "rounds": 0, "batch": 2},
               "training": {"entrypoint": "span_svm:train", "shard_size": 2, "per_device": 2, "device": "auto",
                            "gpus": 1, "threads": 1, "mem_mb": 1000, "retries": 0},
               "cluster": {"gpus_per_node": 2, "cpus_per_node": 2, "mem_mb_per_node": 8000}}
    target = "results/svm_breast_cancer/multiverse.parquet"
    cwd = svm_project(tmp_path / "slurm", {"src/span_svm.py": SPAN_SVM}, overlay)
    res = subprocess.run([sys.executable, "-m", "snakemake", target, "--configfile", "tiny.yaml",
                          "--profile", str(ROOT / "profiles" / "slurm"), "--slurm-no-account",
                          "--slurm-init-seconds-before-status-checks", "2"],
                         cwd=cwd, capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    jobs = re.findall(r"Job (\S+) has been submitted with SLURM jobid (\d+)", log)
    ids = {j: sbatch_view(j) for _, j in jobs}
    gpu = [v for v in ids.values() if "gpu" in v.get("TresPerJob", "")]
    assert len(gpu) == 2, {j: (v.get("JobName"), v.get("TresPerJob"), v.get("NumCPUs")) for j, v in ids.items()}
    for v in gpu:  # one shard per submission: one GPU and 2 cores (per_device x threads)
        assert v["TresPerJob"] == "gres:gpu:1" and v["NumCPUs"] == "2" and v["JobState"] == "COMPLETED", v
    universes = cwd / "results/svm_breast_cancer/universes/r0"
    for shard in (0, 1):
        a, b = (json.loads((universes / f"s{shard}/u{k}/seed0/run/span.json").read_text()) for k in (0, 1))
        assert a["pid"] != b["pid"] and a["start"] < b["end"] and b["start"] < a["end"], (a, b)
        assert a["MULTIVERSE_GPU_SHARE"] == b["MULTIVERSE_GPU_SHARE"] == "0.5"
        assert a["CUDA_VISIBLE_DEVICES"] == b["CUDA_VISIBLE_DEVICES"] is not None  # SLURM's one GPU, shared
    train_log = (cwd / "results/svm_breast_cancer/logs/train/r0_s0_seed0.log").read_text()
    assert "training on the CPU" in train_log  # device: auto, and the CI's GPUs are dummies
    local = svm_project(tmp_path / "local", {"src/span_svm.py": SPAN_SVM},
                        {"design": overlay["design"], "training": {**overlay["training"], "per_device": 1}})
    res = subprocess.run([sys.executable, "-m", "snakemake", target, "--configfile", "tiny.yaml", "--cores", "2"],
                         cwd=local, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    df, ref = (pd.read_parquet(d / target).set_index("id") for d in (cwd, local))
    timing = [c for c in df.columns if "seconds" in c or c in ("started", "finished")]
    assert (df["status"] == "ok").all() and len(df) == 4
    pd.testing.assert_frame_equal(df.drop(columns=timing), ref.drop(columns=timing))
