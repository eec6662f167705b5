"""Multi-fidelity universes in the real workflow (design.fidelity, multiverse.fidelity):
the low-fidelity jobs, the continuation draw and the continued jobs are rules of the
static DAG; the draw's probabilities are written before the full-fidelity outcomes they
decide; a continued universe is bitwise one trained to the end in one go; a rerun with a
larger continuation budget trains only the new continuations."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import load_config, make_checkout, planned_jobs, snakemake, write_config

OUT = Path("results/tiny")
#: six Sobol universes in shards of two, three epochs, the first one the low fidelity
FIDELITY = {"design": {"strategy": "sobol", "initial": 4, "rounds": 1, "batch": 2,
                       "fidelity": {"epochs": 1, "share": 0.5}},
            "training": {"epochs": 3}}


def checkout(dest: Path, **design) -> Path:
    cwd = make_checkout(dest, training=FIDELITY["training"], design={**FIDELITY["design"]})
    if design:
        config = load_config(cwd / "tiny.yaml")
        config["design"]["fidelity"].update(design)
        write_config(cwd, config)
    return cwd


def test_the_fidelity_rules_lint_clean(tmp_path):
    res = snakemake(checkout(tmp_path), "--lint")
    assert res.returncode == 0 and "Lints for" not in res.stdout + res.stderr, (res.stdout + res.stderr)[-3000:]


def test_a_dry_run_lists_every_fidelity_rule(tmp_path):
    """`snakemake -n` lists the low-fidelity train and metrics jobs, one continuation draw
    per round and the continued shards' train and metrics jobs; the draw reads only the
    low fidelity's files."""
    cwd = checkout(tmp_path)
    dry = snakemake(cwd, "-n", "--cores", "2", "aggregate")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert planned_jobs(dry) == {"prepare_data": 1, "design": 2, "train": 3, "metrics": 3, "continuation": 2,
                                 "train_continued": 3, "metrics_continued": 3, "aggregate": 1}
    out = dry.stdout + dry.stderr
    # on a cluster with a declared node: the low-fidelity and the continued shards each travel in
    # node-sized submissions of their own (the draw stands between them), one per round here
    config = load_config(cwd / "tiny.yaml")
    write_config(cwd, config, cluster={"cpus_per_node": 4, "mem_mb_per_node": 16000})
    clustered = snakemake(cwd, "-n", "--cores", "2", "aggregate")
    assert clustered.returncode == 0, clustered.stderr[-2000:]
    jobs = planned_jobs(clustered)
    assert jobs["submission_low"] == jobs["submission"] == 2 and jobs["train_continued"] == 3
    for block in re.findall(r"rule continuation:\n(.*?)\n\n", out, re.S):
        inputs = re.search(r"input: (.*)", block).group(1).split(", ")
        assert all("/low/" in f or "/design/round_" in f for f in inputs), inputs


@pytest.fixture(scope="module")
def fidelity_run(tmp_path_factory):
    cwd = checkout(tmp_path_factory.mktemp("fidelity"))
    res = snakemake(cwd, "--cores", "2", "aggregate")
    assert res.returncode == 0, res.stderr[-3000:]
    return cwd


@pytest.mark.slow
def test_probabilities_are_written_before_the_outcomes_they_decide(fidelity_run):
    """Each round's continue file states every universe's probability (in (0, 1]) and
    whether it was continued; it was written after the low fidelity's metrics and before
    any full-fidelity training of that round began; the table carries both fidelities."""
    out = fidelity_run / OUT
    df = pd.read_parquet(out / "multiverse.parquet")
    assert {"low_val_acc", "low_test_acc", "continued", "continuation_probability", "fidelity_trained"} <= set(df)
    for r in (0, 1):
        cont = json.loads((out / f"design/continue_{r}.json").read_text())
        written = (out / f"design/continue_{r}.json").stat().st_mtime
        for u in cont["universes"]:
            assert 0 < u["probability"] <= 1
            assert u["continued"] == (u["final"] or u["uniform"] < u["probability"])
            seed = out / f"universes/r{r}/s{u['shard']}/u{u['index'] % 2}/seed0"
            assert (seed / "low/metrics.json").stat().st_mtime <= written
            record = json.loads((seed / "train.json").read_text())
            assert (seed / "train.json").stat().st_mtime >= written
            assert record["status"] == ("not_continued" if not u["continued"] else "ok")
            row = df[df["id"] == u["id"]].iloc[0]
            assert row["continued"] == u["continued"] and row["continuation_probability"] == u["probability"]
            assert pd.isna(row["val_acc"]) != u["continued"] and pd.notna(row["low_val_acc"])
    assert (~df["continued"]).any() and df["continued"].any(), "the seed draws both kinds at share 0.5"


@pytest.mark.slow
def test_a_continued_universe_is_bitwise_one_trained_in_one_go(fidelity_run, tmp_path):
    """The same six universes without design.fidelity: every continued universe's weights
    and history are bitwise the one-go run's (its low fidelity's epochs are not trained twice)."""
    plain = make_checkout(tmp_path, training=FIDELITY["training"],
                          design={k: v for k, v in FIDELITY["design"].items() if k != "fidelity"})
    res = snakemake(plain, "--cores", "2", "aggregate")
    assert res.returncode == 0, res.stderr[-3000:]
    df = pd.read_parquet(fidelity_run / OUT / "multiverse.parquet")
    checked = 0
    for _, row in df[df["fidelity_trained"]].iterrows():
        rel = f"universes/r{row['round']}/s{row['index'] // 2}/u{row['index'] % 2}/seed0"
        a = torch.load(fidelity_run / OUT / rel / "model.pt", weights_only=True)
        b = torch.load(plain / OUT / rel / "model.pt", weights_only=True)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
        ha = json.loads((fidelity_run / OUT / rel / "train.json").read_text())["history"]
        hb = json.loads((plain / OUT / rel / "train.json").read_text())["history"]
        assert [{k: v for k, v in h.items() if k != "seconds"} for h in ha] == \
               [{k: v for k, v in h.items() if k != "seconds"} for h in hb]
        checked += 1
    assert checked >= 2


@pytest.mark.slow
def test_a_larger_budget_trains_only_the_new_continuations(fidelity_run, tmp_path):
    """share 0.5 -> 1: no low-fidelity job reruns; the draw and the continued shards do,
    keeping every universe continued before (logged kept, weights unchanged) and training
    only the newly continued ones, from their low-fidelity state."""
    import shutil

    cwd = tmp_path / "run"
    shutil.copytree(fidelity_run, cwd, symlinks=True)
    out = cwd / OUT
    before = pd.read_parquet(out / "multiverse.parquet")
    old = {r["id"]: torch.load(out / f"universes/r{r['round']}/s{r['index'] // 2}/u{r['index'] % 2}/seed0/model.pt",
                               weights_only=True) for _, r in before[before["fidelity_trained"]].iterrows()}
    config = load_config(cwd / "tiny.yaml")
    config["design"]["fidelity"]["share"] = 1.0
    write_config(cwd, config)
    dry = snakemake(cwd, "-n", "--cores", "2", "aggregate")
    assert dry.returncode == 0, dry.stderr[-2000:]
    jobs = planned_jobs(dry)
    assert "train" not in jobs and "metrics" not in jobs and "design" not in jobs
    assert jobs["continuation"] == 2
    res = snakemake(cwd, "--cores", "2", "aggregate")
    assert res.returncode == 0, res.stderr[-3000:]
    after = pd.read_parquet(out / "multiverse.parquet")
    assert after["continued"].all()
    logs = "".join(p.read_text() for p in (out / "logs/train_continued").glob("*.log"))
    new = set(after["id"]) - set(old)
    assert new, "the larger budget continues more universes"
    for uid in old:
        assert re.search(rf"{uid} kept", logs), f"{uid} continued before is kept"
        r = after[after["id"] == uid].iloc[0]
        w = torch.load(out / f"universes/r{r['round']}/s{r['index'] // 2}/u{r['index'] % 2}/seed0/model.pt",
                       weights_only=True)
        assert all(torch.equal(w[k], old[uid][k]) for k in w)
    trained = set(re.findall(r"(r\du\d+) epoch \d+/3", logs))  # the epochs trained in this run
    assert trained == new - set(after.loc[~after["fidelity_trained"], "id"])
    assert not re.search(r"r\du\d+ epoch 1/3", logs), "no low-fidelity epoch is trained twice"
    assert logs.count("resumed from") == len(trained)


#: A user's training under the low-fidelity contract: an SGD linear classifier, one
#: partial_fit per epoch, its state in run_dir; it trains the first `stop_after` epochs
#: (None: to the end, resuming from run_dir) and logs every epoch it trains.
SGD_STUDY = '''
import os
import pickle

from sklearn.linear_model import SGDClassifier

EPOCHS = 6


def train(C, data, seed, run_dir, stop_after=None, progress=None, **_):
    path = os.path.join(run_dir, "sgd.pkl")
    if os.path.exists(path):
        with open(path, "rb") as f:
            model, done = pickle.load(f)
    else:
        model, done = SGDClassifier(alpha=1.0 / (C * len(data["train"][1])), random_state=seed), 0
    with open(os.path.join(run_dir, "epochs.log"), "a") as log:
        for epoch in range(done + 1, (stop_after or EPOCHS) + 1):
            model.partial_fit(*data["train"], classes=[0, 1])
            log.write(f"{epoch}\\n")
            progress(epoch=epoch)
            done = epoch
    with open(path, "wb") as f:
        pickle.dump((model, done), f)
    return {**{f"{s}_acc": float(model.score(*data[s])) for s in ("train", "val", "test")}, "support_share": 0.0}
'''


@pytest.mark.slow
def test_a_users_training_resumes_in_its_run_dir_under_the_contract(tmp_path):
    """training.entrypoint under design.fidelity: the function is given stop_after (the low
    fidelity's epochs), then for a continued universe None in the same run_dir: no epoch
    runs twice, and its metrics are those of the same universe trained in one go."""
    import subprocess
    import sys

    from conftest import svm_project

    def study(name, fidelity):
        overlay = {"design": {"strategy": "sobol", "initial": 8, "rounds": 0, "batch": 4,
                              **({"fidelity": fidelity} if fidelity else {})},
                   "training": {"entrypoint": "sgd_study:train", "shard_size": 4, "epochs": 6}}
        project = svm_project(tmp_path / name, {"src/sgd_study.py": SGD_STUDY}, overlay)
        res = subprocess.run([sys.executable, "-m", "snakemake", "results/svm_breast_cancer/multiverse.parquet",
                              "--cores", "2", "--configfile", "tiny.yaml"],
                             cwd=project, capture_output=True, text=True, timeout=900)
        assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
        return project / "results" / "svm_breast_cancer"

    out = study("fidelity", {"epochs": 2, "share": 0.5})
    plain = study("plain", None)
    df, ref = (pd.read_parquet(o / "multiverse.parquet").set_index("id") for o in (out, plain))
    assert df["continued"].any() and (~df["continued"]).any()
    for uid, row in df.iterrows():
        rel = f"universes/r0/s{row['index'] // 4}/u{row['index'] % 4}/seed0"
        epochs = (out / rel / "low/run/epochs.log").read_text().split()
        if row["continued"]:
            assert epochs == [str(e) for e in range(1, 7)], "each epoch once, the continuation after the low fidelity"
            assert row["test_acc"] == ref.loc[uid, "test_acc"] and row["val_acc"] == ref.loc[uid, "val_acc"]
        else:
            assert epochs == ["1", "2"] and row["status"] == "not_continued" and pd.isna(row["test_acc"])
        assert pd.notna(row["low_test_acc"])
