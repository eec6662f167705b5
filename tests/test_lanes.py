"""training.per_device: k universes of a shard at once, each in its own guarded process
sharing the job's device (multiverse.failures.guard_lanes), sized for Snakemake and SLURM
(multiverse.spec.layout.train_job_size). Real forks, real signals, real torch training."""
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import three_universe_shard, user_project

from multiverse import entrypoint as E
from multiverse import failures as F
from multiverse.spec import ConfigError, check_config, shards_per_submission, train_job_size
from multiverse.train import train_shard

DECLARED = {"val_acc": {"range": (0, 1)}, "loss": {"range": (0, None)}}

SPANS = '''
import json, os, signal, time

def train(C, seed, run_dir, progress):
    """Writes when and where it ran; C=2 kills its process, C=5 hangs."""
    start = time.time()
    if C == 2.0:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(3600 if C == 5.0 else 0.5)
    progress(epoch=1, val_acc=0.5)
    with open(os.path.join(run_dir, "span.json"), "w") as fh:
        json.dump({"pid": os.getpid(), "lane": os.environ.get("MULTIVERSE_LANE"),
                   "share": os.environ.get("MULTIVERSE_GPU_SHARE"), "start": start, "end": time.time()}, fh)
    return {"val_acc": 0.5, "loss": C + seed / 100}
'''


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # it forks (conftest.one_torch_thread)


@pytest.fixture
def project(tmp_path, monkeypatch):
    yield from user_project(tmp_path, monkeypatch, "spans", {"src/spans.py": SPANS})


def file_log(path: Path) -> logging.Logger:
    log = logging.getLogger(f"lanes{time.monotonic_ns()}")
    log.setLevel(logging.INFO)
    log.addHandler(logging.FileHandler(path))
    return log


def user_shard(project: Path, Cs, lanes: int, folder: str, **guarded):
    """A user shard of universes with these C's, as scripts/train.py runs it in ``lanes`` lanes."""
    us = [{"id": f"r0u{i:03d}", "round": 0, "index": i, "shard": 0, "slot": i, "seed": 10 + i, "params": {"C": C}}
          for i, C in enumerate(Cs)]
    paths = [str(project / folder / f"u{i}" / "train.json") for i in range(len(Cs))]
    training = {"entrypoint": "spans:train", "pythonpath": ["src"]}
    log = file_log(project / f"{folder}.log")
    works = [lambda lane=lane: E.train_user_shard(us, training, DECLARED, paths, log, retries=0, lane=(lane, lanes))
             for lane in range(lanes)]
    try:
        F.guard_lanes(works, log, retries=0, **guarded)
    finally:
        for h in log.handlers:
            h.close()
    records = [json.loads(Path(p).read_text()) for p in paths]
    spans = [json.loads(p.read_text()) if (p := Path(x).parent / "run" / "span.json").exists() else None
             for x in paths]
    return records, spans, (project / f"{folder}.log").read_text()


def same_outcome(record):
    return {k: v for k, v in record.items() if k not in ("train_seconds", "history")}


def test_k_lanes_train_k_universes_at_once_each_in_its_own_process_with_its_share(project):
    records, spans, log = user_shard(project, [1.0, 3.0, 4.0, 6.0], 2, "two")
    alone, _, _ = user_shard(project, [1.0, 3.0, 4.0, 6.0], 1, "one")
    # the same records as one universe after another
    assert [same_outcome(r) for r in records] == [same_outcome(r) for r in alone]
    assert all(r["status"] == "ok" for r in records)
    # slots 0 and 2 in lane 0, 1 and 3 in lane 1: one process per lane, each told its share
    assert [s["lane"] for s in spans] == ["0", "1", "0", "1"] and {s["share"] for s in spans} == {"0.5"}
    assert spans[0]["pid"] == spans[2]["pid"] != spans[1]["pid"] == spans[3]["pid"] != os.getpid()
    # the lanes ran side by side: each of lane 1's universes overlaps one of lane 0's
    for a, b in ((0, 1), (2, 3)):
        assert spans[a]["start"] < spans[b]["end"] and spans[b]["start"] < spans[a]["end"], spans


def test_a_universe_that_kills_its_lanes_worker_is_a_failed_row_and_both_lanes_go_on(project):
    records, spans, log = user_shard(project, [1.0, 2.0, 4.0, 6.0, 7.0, 8.0], 2, "kill")
    assert [r["status"] for r in records] == ["ok", "failed", "ok", "ok", "ok", "ok"]
    assert records[1]["failure"] == "died" and "SIGKILL" in records[1]["error"]
    # lane 1 went on in a new worker: its universes after the killed one ran in another process
    assert spans[3]["pid"] == spans[5]["pid"] != spans[0]["pid"] and spans[3]["lane"] == "1"
    assert "trying again" not in log and "r0u001" in log


def test_sigterm_to_the_job_stops_every_lane_and_exits_to_be_rerun(project):
    """SLURM's preemption: the job's SIGTERM reaches each lane's worker; a universe that
    does not stop within the grace is killed, and the job exits with PREEMPTED_EXIT."""
    threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    previous = signal.getsignal(signal.SIGTERM)
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as stop:
        user_shard(project, [5.0, 5.0], 2, "term", grace=1.0)
    assert stop.value.code == F.PREEMPTED_EXIT and time.monotonic() - t0 < 30
    assert signal.getsignal(signal.SIGTERM) is previous  # the job's own handler is back


def test_a_sigterm_while_the_job_forks_waits_for_its_handler_and_stops_the_job_to_be_rerun(project):
    """A stop that comes right after a fork, before the forking process's forwarding
    handler is in place (the job after its first lane's fork; a lane after its worker's),
    waits for that handler instead of killing the process: the job exits with
    PREEMPTED_EXIT. Run in a child of the test, which the signal would otherwise kill."""
    real_fork = os.fork
    forked: list[int] = []

    def fork():
        pid = real_fork()
        if pid:  # the forking process, just after its first fork
            forked.append(pid)
            if len(forked) == 1:
                os.kill(os.getpid(), signal.SIGTERM)
        return pid

    job = real_fork()
    if job == 0:
        code = 1
        try:
            os.fork = fork
            user_shard(project, [5.0, 5.0], 2, "window", grace=1.0)
            code = 0
        except SystemExit as err:
            code = err.code if isinstance(err.code, int) else 1
        finally:
            os._exit(code)
    t0 = time.monotonic()
    _, status = os.waitpid(job, 0)
    assert os.waitstatus_to_exitcode(status) == F.PREEMPTED_EXIT and time.monotonic() - t0 < 30
    assert "asked to stop" in (project / "window.log").read_text()


def test_a_sigterm_between_two_workers_reaches_the_next_worker(project, monkeypatch):
    """A stop that comes after a worker died and before the guard forks the next one meets
    the dead worker's forwarding handler: the next worker is told too, and its universe
    stops at its first progress report instead of training to the end."""
    watch, calls = F._watch, []

    def between(*args):
        calls.append(1)
        if len(calls) == 2:  # universe 0 killed the first worker; the second is not forked yet
            os.kill(os.getpid(), signal.SIGTERM)
        return watch(*args)

    monkeypatch.setattr(F, "_watch", between)
    with pytest.raises(SystemExit) as stop:
        user_shard(project, [2.0, 1.0], 1, "between", grace=10.0)
    assert stop.value.code == F.PREEMPTED_EXIT and len(calls) == 2
    assert not (project / "between" / "u1" / "run" / "span.json").exists(), "universe 1 trained to its end"


def test_the_built_in_trainer_in_two_lanes_writes_what_one_lane_writes_bitwise(tmp_path, digits, config):
    params = [{"optimizer": "adam", "lr": 3e-3, "weight_decay": 1e-5, "batch_size": 64},
              {"optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0, "batch_size": 32},
              {"optimizer": "rmsprop", "lr": 1e-3, "weight_decay": 1e-4, "batch_size": 128}]
    _, shard_args = three_universe_shard(tmp_path, digits, config, params)
    for folder, lanes in (("one", 1), ("two", 2)):
        args = shard_args(folder, log=file_log(tmp_path / f"{folder}.log"), retries=0)
        F.guard_lanes([lambda lane=lane, args=args: train_shard(**args, lane=(lane, lanes)) for lane in range(lanes)],
                      args["log"], retries=0)
    for k in range(3):
        a, b = (torch.load(tmp_path / f / f"u{k}" / "model.pt") for f in ("one", "two"))
        assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
        ra, rb = (json.loads((tmp_path / f / f"u{k}" / "train.json").read_text()) for f in ("one", "two"))
        assert ra["history"][-1]["val_acc"] == rb["history"][-1]["val_acc"] and ra["status"] == rb["status"] == "ok"
    # each lane's epoch lines count and time its own universes, and say so
    one, two = ((tmp_path / f"{f}.log").read_text() for f in ("one", "two"))
    assert "universe 3/3, shard ETA" in one and "lane" not in one
    assert "universe 2/2 of lane 1/2, lane ETA" in two and "universe 1/1 of lane 2/2, lane ETA" in two
    # a lane keeps its universes' kept results until every lane is done (scripts/train.py then clears them)
    assert all((tmp_path / "two" / f"u{k}" / "run" / "final.pt").exists() for k in range(3))
    assert not any((tmp_path / "one").glob("u*/run"))  # one lane alone clears its own
    from multiverse.train import clear_runs

    clear_runs([str(tmp_path / "two" / f"u{k}" / "train.json") for k in range(3)])
    assert not any((tmp_path / "two").glob("u*/run"))


def test_a_lane_that_fails_leaves_what_the_other_lane_finished_for_the_rerun(project):
    """One lane fails outside any universe (its entry point cannot load), the other
    finishes: the job fails, and the finished lane's kept records stay in run/, so the
    rerun keeps them (logged "kept") rather than training them again."""
    us = [{"id": f"r0u{i:03d}", "round": 0, "index": i, "shard": 0, "slot": i, "seed": 10 + i, "params": {"C": C}}
          for i, C in enumerate([1.0, 3.0, 4.0, 6.0])]
    paths = [str(project / "out" / f"u{i}" / "train.json") for i in range(4)]
    log = file_log(project / "lanes.log")
    good = {"entrypoint": "spans:train", "pythonpath": ["src"]}
    bad = {"entrypoint": "no_such_module:train", "pythonpath": ["src"]}

    def work(lane, training):
        E.train_user_shard(us, training if lane == 0 else bad, DECLARED, paths, log, retries=0, lane=(lane, 2))

    with pytest.raises(F.ShardFailed, match="lane 1 of 2 failed outside any universe"):
        F.guard_lanes([lambda: work(0, good), lambda: work(1, good)], log, retries=0)
    kept = [Path(p).parent / "run" / E.KEPT_RECORD for p in paths]
    assert kept[0].exists() and kept[2].exists() and not kept[1].exists()
    log2 = file_log(project / "rerun.log")
    E.train_user_shard(us, good, DECLARED, paths, log2, retries=0)
    text = (project / "rerun.log").read_text()
    assert "r0u000 kept" in text and "r0u002 kept" in text and "r0u001 kept" not in text
    assert all(json.loads(Path(p).read_text())["status"] == "ok" for p in paths)


def test_a_train_job_asks_for_k_times_a_universes_cores_and_memory_and_one_gpu(config):
    config["training"].update(device="cuda", threads=2, mem_mb=3000, per_device=3, shard_size=4)
    assert train_job_size(config) == {"threads": 6, "mem_mb": 9000, "gpus": 1}
    # a node of 4 GPUs, 24 cores: 4 jobs side by side, 3 universes on each GPU
    config["cluster"] = {"gpus_per_node": 4, "cpus_per_node": 24, "mem_mb_per_node": 64000}
    assert shards_per_submission(config) == 4
    config["cluster"]["cpus_per_node"] = 12  # cores run out first
    assert shards_per_submission(config) == 2
    config["cluster"]["cpus_per_node"] = 4
    with pytest.raises(ConfigError, match=r"training.threads x training.per_device.*cluster.cpus_per_node"):
        shards_per_submission(config)


def test_more_universes_at_once_than_a_shard_holds_is_refused_naming_the_key(config):
    config["training"].update(per_device=8, shard_size=4)
    with pytest.raises(ConfigError, match=r"training.per_device.*at most training.shard_size \(4\)"):
        check_config(config)
