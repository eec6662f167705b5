"""No universe can stop the study (multiverse.failures): universes that kill their process
(real signals, SIGKILL included), hang past training.timeout (real hangs), run out of
memory, or are preempted by SIGTERM become failed rows or resume, and the shard goes on.
Damaged state is reported and retrained; an older results folder gets a clear message."""
import json
import logging
import math
import re
import signal
import subprocess
import sys
import time
import weakref
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import svm_project, three_universe_shard, user_project

from multiverse import entrypoint as E
from multiverse import failures as F
from multiverse.aggregate import aggregate, failures_by_cause, status_table
from multiverse.runtime import OlderResults
from multiverse.train import CHECKPOINT, FINAL, train_shard, train_universe

SCRIPTS = str(Path(__file__).resolve().parents[1] / "scripts")
DECLARED = {"val_acc": {"range": (0, 1)}, "loss": {"range": (0, None)}}
U = {"optimizer": "adam", "lr": 3e-3, "weight_decay": 1e-5, "batch_size": 64}

FAULTY = '''
import os, signal, sys, time

def train(C, seed, run_dir, progress):
    """What it does for a universe is decided by its C (a test's choice of faults)."""
    with open(os.path.join(os.path.dirname(__file__), "calls"), "a") as fh:
        fh.write(f"{C}\\n")
    print(f"training C={C}", flush=True)
    if C == 2.0:
        print("about to end my process", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if C == 3.0:
        os._exit(3)
    if C == 4.0:
        import ctypes
        ctypes.string_at(0)  # a segfault, as in a native library
    if C == 5.0 and not os.path.exists("no_hang"):
        time.sleep(3600)  # a real hang
    if C == 6.0:
        raise ValueError("C=6 is a bad choice")
    if C == 7.0:
        return {"val_acc": 2.0, "loss": 1.0}
    if C == 8.0:
        import torch
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (a stand-in on the CPU)")
    progress(epoch=1, val_acc=0.5)
    return {"val_acc": 0.5, "loss": C}
'''

HANG = '''
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
open(sys.argv[1], "w").write(str(child.pid))
print("started a child and waiting", flush=True)
time.sleep(3600)
'''

KILLS_ITSELF = '''
import os, signal, sys
print("a command about to die", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
'''


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # it forks (conftest.one_torch_thread)


@pytest.fixture
def project(tmp_path, monkeypatch):
    yield from user_project(tmp_path, monkeypatch, "faulty",
                            {"src/faulty.py": FAULTY, "hang.py": HANG, "kills_itself.py": KILLS_ITSELF})


def universes(*Cs):
    return [{"id": f"r0u{i:03d}", "round": 0, "index": i, "shard": 0, "slot": i, "seed": 10 + i, "params": {"C": C}}
            for i, C in enumerate(Cs)]


def calls(project):
    path = project / "src" / "calls"
    return [float(c) for c in path.read_text().split()] if path.exists() else []


def guarded_user_shard(project, Cs, *, retries=1, timeout=None, training=None):
    """The shard under the train job's guard, as scripts/train.py runs it (real fork)."""
    log_path = project / "train.log"
    handler = logging.FileHandler(log_path)
    log = logging.getLogger(f"failures{time.monotonic_ns()}")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    paths = [str(project / "out" / f"u{i}" / "train.json") for i in range(len(Cs))]
    training = training or {"entrypoint": "faulty:train", "pythonpath": ["src"]}
    try:
        F.guard(lambda: E.train_user_shard(universes(*Cs), training, DECLARED, paths, log, retries=retries),
                log, retries=retries, timeout=timeout)
    finally:
        handler.close()
        log.removeHandler(handler)
    return [json.loads(Path(p).read_text()) for p in paths], log_path.read_text()


@pytest.mark.parametrize("C, words", [
    (2.0, "its process was killed by signal 9 (SIGKILL); its last output: training C=2.0 / about to end my process"),
    (3.0, "its process exited with status 3; its last output: training C=3.0"),
    (4.0, "its process was killed by signal 11 (SIGSEGV); its last output: training C=4.0"),
], ids=["sigkill", "exit-code", "segfault"])
def test_an_entry_point_that_ends_its_process_is_a_failed_universe_and_the_shard_goes_on(project, C, words):
    records, log = guarded_user_shard(project, (1.0, C, 9.0), retries=1)
    ok, dead, after = records
    assert ok["status"] == after["status"] == "ok" and after["metrics"] == {"val_acc": 0.5, "loss": 9.0}
    assert dead["status"] == "failed" and dead["failure"] == "died" and dead["attempts"] == 2
    assert dead["error"].startswith(words), dead["error"]
    assert all(math.isnan(v) for v in dead["metrics"].values())
    assert calls(project) == [1.0, C, C, 9.0], "tried 1 + retries times, the others once"
    # every failure line names the universe, its seed and its parameters
    for attempt in (1, 2):
        assert f'universe r0u001 failed (attempt {attempt} of 2): died: {words}' in log
    assert '[seed 11, parameters {"C": ' in log
    assert not list(project.glob("out/*/run/*.json")), "a finished shard leaves no attempts or kept records"


RERUN = '''
import json, logging, sys
sys.path.insert(0, sys.argv[1])
from multiverse import entrypoint as E
from multiverse.failures import guard
a = json.load(open(sys.argv[2]))
logging.basicConfig(filename="first.log", level=logging.INFO)
log = logging.getLogger("first")
guard(lambda: E.train_user_shard(a["universes"], a["training"], a["declared"], a["paths"], log, retries=1), log,
      retries=1)
'''


def test_a_rerun_of_a_killed_shard_does_not_try_again_a_universe_that_used_up_its_attempts(project):
    """The job itself is killed (SIGKILL to the guard) while a later universe hangs: the
    rerun keeps the universe that died twice as failed, without calling it."""
    Cs = (2.0, 5.0, 1.0)
    paths = [str(project / "out" / f"u{i}" / "train.json") for i in range(3)]
    (project / "args.json").write_text(json.dumps({
        "universes": universes(*Cs), "training": {"entrypoint": "faulty:train", "pythonpath": ["src"]},
        "declared": DECLARED, "paths": paths}))
    job = subprocess.Popen([sys.executable, "-c", RERUN, SCRIPTS, "args.json"], cwd=project)
    deadline = time.time() + 60
    while calls(project)[-1:] != [5.0] and time.time() < deadline and job.poll() is None:
        time.sleep(0.05)
    assert calls(project) == [2.0, 2.0, 5.0]
    job.send_signal(signal.SIGKILL)
    job.wait()
    (project / "no_hang").touch()
    records, log = guarded_user_shard(project, Cs, retries=1)
    assert calls(project) == [2.0, 2.0, 5.0, 5.0, 1.0], "the dead universe is not tried again"
    assert records[0]["status"] == "failed" and records[0]["failure"] == "died" and records[0]["attempts"] == 2
    assert "r0u000 kept: finished by an earlier run of this shard" in log
    assert records[1]["status"] == "ok" and records[1]["attempts"] == 1, "the job's own kill is not the universe's"


def test_a_universe_that_hangs_past_the_timeout_is_stopped_and_recorded_and_the_shard_goes_on(project):
    start = time.monotonic()
    records, log = guarded_user_shard(project, (5.0, 1.0), retries=1, timeout=0.02)  # 1.2 s
    assert time.monotonic() - start < 30
    hung, ok = records
    assert hung["status"] == "failed" and hung["failure"] == "timed out" and hung["error"] == "timed out after 0.02 min"
    assert hung["attempts"] == 2 and ok["status"] == "ok"
    assert "universe r0u000 failed (attempt 2 of 2): timed out: timed out after 0.02 min [seed 10" in log


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie waiting for a reaper is dead


def test_a_hanging_command_is_stopped_with_its_process_group(project):
    template = "{python} hang.py " + str(project / "grandchild.pid") + " --C {C} --out {out}"
    start = time.monotonic()
    records, log = guarded_user_shard(project, (1.0,), retries=0, timeout=0.02,
                                      training={"command": template})
    assert time.monotonic() - start < 30
    assert records[0]["failure"] == "timed out" and records[0]["attempts"] == 1
    grandchild = int((project / "grandchild.pid").read_text())
    deadline = time.time() + 5
    while alive(grandchild) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the command's own child is stopped with it"
    assert "r0u000 | started a child and waiting" in log


def test_a_command_killed_by_a_signal_is_a_failed_universe_named_by_its_signal(project):
    records, log = guarded_user_shard(project, (1.0,), retries=0, training={"command": "{python} kills_itself.py --C {C}"})
    r = records[0]
    assert r["status"] == "failed" and r["failure"] == "died"
    assert "the command was killed by signal 9 (SIGKILL); its last output: a command about to die" in r["error"]


def test_failures_are_recorded_by_cause_and_the_table_counts_them(project):
    records, _ = guarded_user_shard(project, (6.0, 7.0, 8.0, 1.0), retries=0)
    assert [r.get("failure") for r in records] == ["raised", "invalid metrics", "out of memory", None]
    df = pd.DataFrame({"status": ["ok", "failed", "failed", "diverged", "failed"],
                       "failure": [None, "died", "timed out", None, "died"], "error": [None, "x", "y", None, "z"]})
    assert failures_by_cause(df) == {"raised": 0, "died": 2, "timed out": 1, "out of memory": 0, "invalid metrics": 0}
    table = status_table(df)
    assert table.values.tolist() == [["ok", "", 1], ["diverged", "", 1], ["failed", "raised", 0], ["failed", "died", 2],
                                     ["failed", "timed out", 1], ["failed", "out of memory", 0],
                                     ["failed", "invalid metrics", 0]]
    # a table from before the failure column: the causes read from the errors
    old = df.drop(columns="failure").assign(error=[None, "RuntimeError: CUDA out of memory", "boom", None, "x"])
    assert failures_by_cause(old)["out of memory"] == 1 and failures_by_cause(old)["raised"] == 2


def test_cuda_out_of_memory_frees_the_universes_memory_and_the_next_one_trains(digits, tmp_path, config, monkeypatch):
    """A fault injected where the allocation happens (the model's move to its device): no
    GPU here, so torch's own OutOfMemoryError stands in for CUDA's."""
    from multiverse import train as T

    np.savez(tmp_path / "data.npz", **digits)
    held, seen_at_next = [], []
    real = T.make_model

    def make_model(*args, **kwargs):
        if not held:  # the first universe: allocate, then run out
            block = torch.empty(64 * 2**20, dtype=torch.uint8)
            held.append(weakref.ref(block))
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB")
        seen_at_next.append(held[0]() is None)
        return real(*args, **kwargs)

    emptied = []
    monkeypatch.setattr(T, "make_model", make_model)
    real_free = F.free_memory
    monkeypatch.setattr(F, "free_memory", lambda: (emptied.append(1), real_free()))
    us = [{"id": f"r0u00{k}", "round": 0, "index": k, "shard": 0, "slot": k, "seed": k, "params": U} for k in range(2)]
    paths = [str(tmp_path / f"u{k}" / "train.json") for k in range(2)]
    train_shard(str(tmp_path / "data.npz"), us, {**config["model"], "width": 8, "depth": 1},
                {**config["training"], "epochs": 1}, [p.replace("train.json", "model.pt") for p in paths], paths,
                logging.getLogger("oom"), retries=0)
    oom, ok = (json.loads(Path(p).read_text()) for p in paths)
    assert oom["status"] == "failed" and oom["failure"] == "out of memory" and "out of memory" in oom["error"]
    assert ok["status"] == "ok" and emptied == [1] and seen_at_next == [True], "freed before the next universe"


def test_a_preempted_universe_saves_inside_its_epoch_and_resumes_bitwise(digits, tmp_path, monkeypatch):
    params = {**U, "batch_size": 16, "dropout": 0.2, "warmup_epochs": 1, "depth": 2}
    kw = dict(seed=4, epochs=3, width=32, depth=1)
    straight, r0 = train_universe(digits, params, **kw)
    path = tmp_path / "run" / CHECKPOINT
    steps = []

    def stop_at_step_20(*a, **k):  # the SIGTERM handler's flag, set while a minibatch trains
        steps.append(1)
        return len(steps) > 20

    monkeypatch.setattr("multiverse.train.stop_requested", stop_at_step_20)
    with pytest.raises(F.Preempted, match="in epoch 1, after 20 of its steps"):
        train_universe(digits, params, **kw, checkpoint_path=path, checkpoint_every=0)
    saved = torch.load(path, weights_only=True)
    assert saved["epoch"] == 0 and saved["partial"]["next"] == 20 * 16
    monkeypatch.setattr("multiverse.train.stop_requested", lambda: False)
    resumed, r = train_universe(digits, params, **kw, checkpoint_path=path, checkpoint_every=0)
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)
    drop = ("seconds",)
    assert [{k: v for k, v in e.items() if k not in drop} for e in r["history"]] == \
        [{k: v for k, v in e.items() if k not in drop} for e in r0["history"]]


PREEMPTED_SHARD = '''
import json, logging, os, signal, sys
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)  # as the test's own runs (one_torch_thread): bitwise equal results
from multiverse.failures import guard
from multiverse.train import train_shard

class TermAt(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("r0u001 epoch 2/"):
            os.kill(os.getppid(), signal.SIGTERM)  # to the train job (the guard), as SLURM's preemption does

log = logging.getLogger("preempted")
log.setLevel(logging.INFO)
log.addHandler(logging.FileHandler(sys.argv[3]))
log.addHandler(TermAt())
a = json.load(open(sys.argv[2]))
guard(lambda: train_shard(**a, log=log), log, retries=1)
'''


def test_sigterm_saves_the_running_universe_and_exits_to_be_rerun_which_resumes_bitwise(digits, tmp_path, config):
    params = [U, {**U, "dropout": 0.2, "depth": 2}, {**U, "optimizer": "momentum", "lr": 0.05}]
    us, shard_args = three_universe_shard(tmp_path, digits, config, params)
    shard_args = partial(shard_args, checkpoint_every=0)
    args = shard_args("preempted")
    (tmp_path / "args.json").write_text(json.dumps(args))
    job = subprocess.run([sys.executable, "-c", PREEMPTED_SHARD, SCRIPTS, str(tmp_path / "args.json"),
                          str(tmp_path / "first.log")], capture_output=True, text=True, timeout=300)
    assert job.returncode == F.PREEMPTED_EXIT, job.stderr[-2000:]
    first = (tmp_path / "first.log").read_text()
    assert "the train job was asked to stop (SIGTERM)" in first and "saved" in first
    u1 = tmp_path / "preempted" / "u1"
    assert torch.load(u1 / "run" / CHECKPOINT, weights_only=True)["epoch"] == 2, "saved although checkpoint_every is 0"
    # the guard trains in a forked worker: its log lines come back through a file
    handler = logging.FileHandler(tmp_path / "rerun.log")
    log = logging.getLogger("rerun")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        F.guard(lambda: train_shard(**args, log=log), log, retries=1)
    finally:
        log.removeHandler(handler)
        handler.close()
    lines = (tmp_path / "rerun.log").read_text().splitlines()
    assert any(line.startswith("r0u000 kept") for line in lines)
    assert any(line.startswith(f"resumed from {u1 / 'run' / CHECKPOINT} after epoch 2") for line in lines), lines
    straight = shard_args("straight")
    train_shard(**straight, log=logging.getLogger("straight"))
    for k in range(3):
        a, b = (torch.load(p[k], weights_only=True) for p in (args["model_paths"], straight["model_paths"]))
        assert all(torch.equal(a[n], b[n]) for n in a)
        ra, rb = (json.loads(Path(p[k]).read_text()) for p in (args["record_paths"], straight["record_paths"]))
        assert ra["attempts"] == 1 and ra["status"] == rb["status"] == "ok"
        assert [e["val_loss"] for e in ra["history"]] == [e["val_loss"] for e in rb["history"]]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "wrong-shapes"])
def test_a_damaged_checkpoint_is_reported_and_the_universe_trains_afresh(digits, tmp_path, caplog, damage):
    kw = dict(seed=1, epochs=2, width=16, depth=1)
    straight, _ = train_universe(digits, U, **kw)
    path = tmp_path / "run" / CHECKPOINT
    train_universe(digits, U, **kw, checkpoint_path=path, checkpoint_every=1)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00not a checkpoint")
    else:
        saved = torch.load(path, weights_only=True)
        saved["epoch"] = 1
        saved["model"] = {k: torch.zeros(3) for k in saved["model"]}
        torch.save(saved, path)
    with caplog.at_level(logging.INFO):
        again, record = train_universe(digits, U, **kw, checkpoint_path=path, checkpoint_every=0)
    assert "not used" in caplog.text and record["epochs_run"] == 2
    assert all(torch.equal(straight[k], again[k]) for k in straight)


def test_a_damaged_kept_result_or_record_is_retrained_never_a_crash_loop(digits, tmp_path, config, project, caplog):
    np.savez(tmp_path / "data.npz", **digits)
    us = [{"id": "r0u000", "round": 0, "index": 0, "shard": 0, "slot": 0, "seed": 1, "params": U}]
    args = dict(data_path=str(tmp_path / "data.npz"), universes=us, model={**config["model"], "width": 8, "depth": 1},
                training={**config["training"], "epochs": 1}, model_paths=[str(tmp_path / "b" / "model.pt")],
                record_paths=[str(tmp_path / "b" / "train.json")])
    run = tmp_path / "b" / "run"
    run.mkdir(parents=True)
    (run / FINAL).write_bytes(b"PK\x03\x04 truncated")
    (run / F.ATTEMPTS).write_text('{"key": ')
    with caplog.at_level(logging.INFO):
        train_shard(**args, log=logging.getLogger("damaged"))
    assert json.loads(Path(args["record_paths"][0]).read_text())["status"] == "ok"
    assert f"{run / FINAL} is unreadable, not used" in caplog.text and "starts its attempts afresh" in caplog.text
    # a user's kept record, cut short by a crash of the disk or the node
    user_run = project / "out" / "u0" / "run"
    user_run.mkdir(parents=True)
    (user_run / E.KEPT_RECORD).write_text('{"key": {"universe": ')
    records, log = guarded_user_shard(project, (1.0,), retries=0)
    assert records[0]["status"] == "ok" and "is damaged, not used" in log


def test_a_results_folder_from_an_older_version_gets_a_clear_message(tmp_path):
    folder = tmp_path / "results" / "old" / "universes" / "r0" / "s0" / "u0" / "seed0"
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({"id": "r0u000", "round": 0, "status": "ok", "val_acc": 0.5}))
    design = tmp_path / "round_0.json"
    design.write_text(json.dumps({"round": 0, "strategy": "sobol", "versions": {}, "universes": []}))
    with pytest.raises(OlderResults) as err:
        aggregate([str(folder / "metrics.json")], [str(design)], ["lr"], "hash", str(tmp_path / "t.parquet"),
                  str(tmp_path / "t.csv"))
    message = str(err.value)
    assert "lacks params, metrics" in message and "older version of this project" in message
    assert "snakemake --forcerun train" in message and str(tmp_path / "results" / "old") in message


FAULTY_SVM = '''
import json, os, signal, time
from svm_study import train as svm_train

def train(kernel, C, gamma, data, seed, run_dir):
    """The example's SVM, except for the universes that faults.json names (by r/s/u path)."""
    faults = json.load(open("faults.json")) if os.path.exists("faults.json") else {}
    where = "/".join(run_dir.split(os.sep)[-5:-2])  # .../universes/r0/s1/u2/seed0/run -> r0/s1/u2
    fault = faults.get(where)
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)  # as a segfault or the kernel's OOM killer
    if fault == "hang":
        time.sleep(3600)
    if fault == "raise":
        raise ValueError("a bad universe")
    return svm_train(kernel, C, gamma, data, seed)
'''


def svm_study(tmp_path, name, faults, *targets):
    from test_examples import REPORT_SIZES

    overlay = {"design": {"strategy": "sobol", "initial": 12, "rounds": 0, "batch": 4},
               "training": {"entrypoint": "faulty_svm:train", "shard_size": 4, "retries": 0, "timeout": 0.2},
               "report": REPORT_SIZES}
    files = {"src/faulty_svm.py": FAULTY_SVM, **({"faults.json": json.dumps(faults)} if faults else {})}
    project = svm_project(tmp_path / name, files, overlay)
    res = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", "2", "--configfile", "tiny.yaml"],
                         cwd=project, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return project / "results" / "svm_breast_cancer"


@pytest.mark.slow
def test_a_study_with_a_killed_a_hanging_and_a_raising_universe_finishes_and_counts_each(tmp_path):
    """A real Snakemake run of the SVM example in which one universe kills its process
    (SIGKILL), one hangs past training.timeout and one raises: the study finishes, its
    report counts one failure of each cause, and every other universe's row equals the
    same universe's row in a run where all of them train."""
    faults = {"r0/s0/u1": "kill", "r0/s1/u2": "hang", "r0/s2/u0": "raise"}
    out = svm_study(tmp_path, "faulty", faults)
    clean = svm_study(tmp_path, "clean", {}, "results/svm_breast_cancer/multiverse.parquet")  # no report needed
    df, ref = (pd.read_parquet(o / "multiverse.parquet").set_index("id") for o in (out, clean))
    failed = df[df["status"] == "failed"]
    assert sorted(failed["failure"]) == ["died", "raised", "timed out"] and len(df) == len(ref) == 12
    assert failures_by_cause(df) == {"raised": 1, "died": 1, "timed out": 1, "out of memory": 0, "invalid metrics": 0}
    assert failed.loc[failed["failure"] == "timed out", "error"].item() == "timed out after 0.2 min"
    assert "killed by signal 9 (SIGKILL)" in failed.loc[failed["failure"] == "died", "error"].item()
    assert (ref["status"] == "ok").all()
    # the other rows as in the clean run (the run's own timings and provenance aside)
    timing = [c for c in df.columns if "seconds" in c or c in ("started", "finished")]
    others = df.index.difference(failed.index)
    pd.testing.assert_frame_equal(df.loc[others].drop(columns=timing), ref.loc[others].drop(columns=timing))
    page = re.sub(r"\s+", "", (out / "report.html").read_text())
    for cause, n in (("raised", 1), ("died", 1), ("timedout", 1), ("outofmemory", 0), ("invalidmetrics", 0)):
        assert f"<td>failed</td><td>{cause}</td><td>{n}</td>" in page
    assert "<td>ok</td><td></td><td>9</td>" in page
