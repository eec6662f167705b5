import json
import logging
import math

import pytest
import torch
from conftest import three_universe_shard

from multiverse.metrics import metrics_shard, universe_metrics
from multiverse.train import failed_record, train_shard, train_universe

U = {"optimizer": "adam", "lr": 3e-3, "weight_decay": 1e-5, "batch_size": 64}
KW = dict(epochs=3, width=16, depth=1)


def test_training_is_deterministic(digits):
    s1, r1 = train_universe(digits, U, seed=5, **KW)
    s2, r2 = train_universe(digits, U, seed=5, **KW)
    s3, _ = train_universe(digits, U, seed=6, **KW)
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    drop = lambda h: [{k: v for k, v in e.items() if k != "seconds"} for e in h]  # noqa: E731
    assert drop(r1["history"]) == drop(r2["history"])
    assert not torch.equal(s1["0.weight"], s3["0.weight"])


def test_history_has_every_epoch(digits):
    _, r = train_universe(digits, U, seed=1, **KW)
    assert r["status"] == "ok" and r["epochs_run"] == 3
    assert [h["epoch"] for h in r["history"]] == [1, 2, 3]
    for h in r["history"]:
        assert set(h) == {"epoch", "train_loss", "train_acc", "val_loss", "val_acc", "seconds"}
        assert 0 <= h["val_acc"] <= 1 and h["train_loss"] > 0
    assert r["history"][-1]["val_acc"] > 0.5


def test_divergence_is_recorded_not_raised(digits):
    state, r = train_universe(digits, {**U, "optimizer": "sgd", "lr": 1e12}, seed=1, **KW)
    assert r["status"] == "diverged" and r["diverged_epoch"] == 1
    m = universe_metrics(digits, state, r, width=16, depth=1)
    assert m["test_acc"] == m["train_acc"] == 1 / r["n_classes"]
    assert math.isnan(m["test_loss"]) and m["gap"] == 0


def test_metrics_and_gap(digits):
    state, r = train_universe(digits, U, seed=1, **KW)
    m = universe_metrics(digits, state, r, width=16, depth=1)
    assert set(m) == {"train_acc", "train_loss", "val_acc", "val_loss", "test_acc", "test_loss", "gap"}
    assert m["gap"] == m["train_acc"] - m["test_acc"]
    assert m["test_acc"] > 0.5


def test_failed_universe_gets_nan_metrics(digits):
    r = failed_record(RuntimeError("out of memory"))
    m = universe_metrics(digits, {}, r, width=16, depth=1)
    assert r["status"] == "failed" and "out of memory" in r["error"]
    assert all(math.isnan(v) for v in m.values())


def test_shard_writes_one_file_per_universe_and_records_failures(digits, tmp_path, config):
    import numpy as np

    data = tmp_path / "data.npz"
    np.savez(data, **digits)
    universes = [
        {"id": "r0u000", "round": 0, "index": 0, "shard": 0, "slot": 0, "seed": 3, "params": U},
        {"id": "r0u001", "round": 0, "index": 1, "shard": 0, "slot": 1, "seed": 4,
         "params": {**U, "optimizer": "lbfgs-not-known"}},
    ]
    models = [str(tmp_path / f"u{k}.pt") for k in range(2)]
    records = [str(tmp_path / f"u{k}.json") for k in range(2)]
    outs = [str(tmp_path / f"m{k}.json") for k in range(2)]
    log = logging.getLogger("test")
    model, training = {**config["model"], "width": 16, "depth": 1}, {**config["training"], "epochs": 2}
    train_shard(str(data), universes, model, training, models, records, log)
    metrics_shard(str(data), models, records, model, outs, log)
    ok, failed = (json.load(open(p)) for p in outs)
    assert ok["status"] == "ok" and ok["metrics"]["test_acc"] > 0.3 and ok["params"] == U
    assert failed["status"] == "failed" and "lbfgs" in failed["error"]
    assert math.isnan(failed["metrics"]["test_acc"])
    # the same universe trained alone gives the same weights: shards do not interact
    alone, _ = train_universe(digits, U, seed=3, epochs=2, width=16, depth=1)
    saved = torch.load(models[0], weights_only=True)
    assert all(torch.equal(alone[k], saved[k]) for k in alone)
    assert not list(tmp_path.glob("*.tmp")), "no partial files are left behind"


def test_conditional_dimensions_reach_only_the_optimizers_that_use_them(digits):
    from multiverse.train import make_optimizer

    p = [torch.nn.Parameter(torch.zeros(2))]
    assert make_optimizer("adam", p, 1e-3, 0.0, momentum=None, eps=1e-3).defaults["eps"] == 1e-3
    assert make_optimizer("rmsprop", p, 1e-3, 0.0, eps=1e-6).defaults["eps"] == 1e-6
    assert make_optimizer("momentum", p, 1e-3, 0.0, momentum=0.5).defaults["momentum"] == 0.5
    assert make_optimizer("momentum", p, 1e-3, 0.0).defaults["momentum"] == 0.9
    # Choi et al. 2019: a large eps turns Adam into momentum SGD; it changes what is learned
    small, _ = train_universe(digits, {**U, "eps": 1e-8, "momentum": None}, seed=5, **KW)
    large, _ = train_universe(digits, {**U, "eps": 1.0, "momentum": None}, seed=5, **KW)
    assert not torch.equal(small["0.weight"], large["0.weight"])


def test_width_depth_and_dropout_as_dimensions_and_adamw(digits):
    """A universe's own width, depth and dropout override model.width / model.depth, and
    the metrics step rebuilds the same network from its record."""
    params = {**U, "optimizer": "adamw", "width": 8, "depth": 2, "dropout": 0.3}
    state, r = train_universe(digits, params, seed=3, **KW)
    assert r["status"] == "ok" and state["0.weight"].shape == (8, 64)
    assert [k for k in state if k.endswith("weight")] == ["0.weight", "3.weight", "6.weight"]  # Linear, ReLU, Dropout
    m = universe_metrics(digits, state, {**r, "params": params}, width=16, depth=1)
    assert 0 <= m["test_acc"] <= 1 and m["train_loss"] > 0
    plain, _ = train_universe(digits, {**params, "dropout": None}, seed=3, **KW)
    assert set(plain) == {"0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias"}  # no dropout layers
    assert not torch.equal(plain["4.weight"], state["6.weight"])  # dropout changed the training


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a node without a GPU")
def test_cuda_without_a_gpu_stops_the_job_and_records_no_universe(digits, tmp_path, config, caplog):
    import socket

    import numpy as np

    from multiverse.runtime import DeviceUnavailable

    data = tmp_path / "data.npz"
    np.savez(data, **digits)
    u = {"id": "r0u000", "round": 0, "index": 0, "shard": 0, "slot": 0, "seed": 3, "params": U}
    model = {**config["model"], "width": 16, "depth": 1}
    models, records = [str(tmp_path / "u0.pt")], [str(tmp_path / "u0.json")]
    log = logging.getLogger("test_device")
    with pytest.raises(DeviceUnavailable, match="torch.cuda.is_available\\(\\) is False") as err:
        train_shard(str(data), [u], model, {**config["training"], "epochs": 1, "device": "cuda"}, models, records, log)
    assert socket.gethostname() in str(err.value) and "training.device" in str(err.value)
    assert not (tmp_path / "u0.json").exists() and not (tmp_path / "u0.pt").exists(), "no failed universe recorded"
    # auto falls back to the CPU, says so in the log, and trains
    with caplog.at_level(logging.INFO, logger="test_device"):
        train_shard(str(data), [u], model, {**config["training"], "epochs": 1, "device": "auto"}, models, records, log)
    assert "training on the CPU" in caplog.text and socket.gethostname() in caplog.text
    rec = json.load(open(records[0]))
    assert rec["status"] == "ok" and rec["device"] == "cpu"


class Killed(BaseException):
    """Stands for a kill: not an Exception, so no retry catches it."""


def without_seconds(history):
    return [{k: v for k, v in e.items() if k != "seconds"} for e in history]


def test_a_universe_killed_mid_training_resumes_from_its_checkpoint_bitwise(digits, tmp_path, caplog):
    """Dropout (torch's global random stream), a warmup schedule still rising at the
    checkpoint, Adam's moments and the minibatch order all resume where they stopped."""
    params = {**U, "depth": 2, "dropout": 0.3, "warmup_epochs": 3}
    kw = dict(seed=5, epochs=4, width=16, depth=1)
    straight, r0 = train_universe(digits, params, **kw)
    path = tmp_path / "run" / "checkpoint.pt"
    saved, _ = train_universe(digits, params, **kw, checkpoint_path=path, checkpoint_every=1)
    assert all(torch.equal(straight[k], saved[k]) for k in straight), "saving changes nothing"
    path.unlink()

    def kill_after_epoch_2(epoch, **_):
        if epoch == 2:
            raise Killed

    with pytest.raises(Killed):
        train_universe(digits, params, **kw, checkpoint_path=path, checkpoint_every=1, progress=kill_after_epoch_2)
    assert torch.load(path, weights_only=True)["epoch"] == 2
    epochs = []
    with caplog.at_level(logging.INFO):
        resumed, r = train_universe(digits, params, **kw, checkpoint_path=path, progress=lambda epoch, **_: epochs.append(epoch))
    assert f"resumed from {path} after epoch 2" in caplog.text and epochs == [3, 4]
    assert list(resumed) == list(straight) and all(torch.equal(straight[k], resumed[k]) for k in straight)
    assert without_seconds(r["history"]) == without_seconds(r0["history"])
    same = ("status", "epochs_run", "steps_run", "lr_effective", "lr_final", "n_classes")
    assert {k: r[k] for k in same} == {k: r0[k] for k in same}
    # a checkpoint of another universe (here: another seed) is not resumed
    other, _ = train_universe(digits, params, **{**kw, "seed": 6})
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again, _ = train_universe(digits, params, **{**kw, "seed": 6}, checkpoint_path=path)
    assert "saved for another universe" in caplog.text and all(torch.equal(other[k], again[k]) for k in other)


KILLED_SHARD = """
import json, logging, os, signal, sys
sys.path.insert(0, sys.argv[1])
from multiverse.train import train_shard

class KillAt(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("r0u001 epoch 2/"):
            os.kill(os.getpid(), signal.SIGKILL)

log = logging.getLogger("killed")
log.setLevel(logging.INFO)
log.addHandler(KillAt())
train_shard(**json.load(open(sys.argv[2])), log=log)
"""


def test_a_universe_continued_from_its_low_fidelity_is_bitwise_one_trained_in_one_go(digits, tmp_path):
    """A low fidelity (stop_after: the first 2 of 4 epochs, under the 4-epoch schedule) then
    its continuation from the checkpoint it leaves: no epoch trained twice, and the same
    weights and history as the universe trained to the end in one go (issue 41). Checkpoints
    every 3 epochs, so the low fidelity's own end-of-run save is what the continuation reads."""
    params = {**U, "depth": 2, "dropout": 0.3, "warmup_epochs": 3}
    kw = dict(seed=7, epochs=4, width=16, depth=1)
    straight, r0 = train_universe(digits, params, **kw)
    path = tmp_path / "run" / "checkpoint.pt"
    epochs = []
    low, r_low = train_universe(digits, params, **kw, checkpoint_path=path, checkpoint_every=3, stop_after=2,
                                progress=lambda epoch, **_: epochs.append(epoch))
    assert r_low["fidelity_epochs"] == 2 and r_low["epochs_run"] == 2 and torch.load(path, weights_only=True)["epoch"] == 2
    assert without_seconds(r_low["history"]) == without_seconds(r0["history"][:2]), "the low fidelity is the first epochs"
    full, r = train_universe(digits, params, **kw, checkpoint_path=path, checkpoint_every=3,
                             progress=lambda epoch, **_: epochs.append(epoch))
    assert epochs == [1, 2, 3, 4], "no epoch trained twice"
    assert "fidelity_epochs" not in r and all(torch.equal(straight[k], full[k]) for k in straight)
    assert without_seconds(r["history"]) == without_seconds(r0["history"])
    # the low fidelity alone is deterministic: a fresh one gives the same weights
    again, _ = train_universe(digits, params, **kw, checkpoint_path=tmp_path / "other.pt", stop_after=2)
    assert all(torch.equal(low[k], again[k]) for k in low)


def test_a_shard_killed_with_sigkill_keeps_its_finished_universes_and_resumes_the_one_it_was_training(
        digits, tmp_path, config):
    import subprocess
    import sys
    from pathlib import Path

    params = [U, {**U, "depth": 2, "dropout": 0.2, "warmup_epochs": 3}, {**U, "optimizer": "momentum", "lr": 0.05}]
    universes, shard_args = three_universe_shard(tmp_path, digits, config, params)
    args = shard_args("killed")
    (tmp_path / "args.json").write_text(json.dumps(args))
    scripts = str(Path(__file__).resolve().parents[1] / "scripts")
    proc = subprocess.run([sys.executable, "-c", KILLED_SHARD, scripts, str(tmp_path / "args.json")], timeout=300,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr[-2000:]
    u0, u1, u2 = (tmp_path / "killed" / f"u{k}" for k in range(3))
    assert (u0 / "train.json").exists() and (u0 / "run" / "final.pt").exists()
    assert not (u1 / "train.json").exists() and torch.load(u1 / "run" / "checkpoint.pt", weights_only=True)["epoch"] == 2
    assert not u2.exists()

    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    log = logging.getLogger("rerun")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        train_shard(**args, log=log)
    finally:
        log.removeHandler(handler)
    assert any(line.startswith("r0u000 kept") for line in lines) and not any(line.startswith("r0u000 epoch") for line in lines)
    assert any(line.startswith(f"resumed from {u1 / 'run' / 'checkpoint.pt'} after epoch 2") for line in lines)
    assert [line.split()[2] for line in lines if line.startswith("r0u001 epoch")] == ["3/4", "4/4"]
    assert [line.split()[2] for line in lines if line.startswith("r0u002 epoch")] == ["1/4", "2/4", "3/4", "4/4"]
    assert not any((u / "run").exists() for u in (u0, u1, u2)), "a finished shard leaves no checkpoint behind"

    straight = shard_args("straight")
    train_shard(**straight, log=logging.getLogger("straight"), checkpoint_every=0)
    for k in range(3):
        a, b = (torch.load(p[k], weights_only=True) for p in (args["model_paths"], straight["model_paths"]))
        assert list(a) == list(b) and all(torch.equal(a[n], b[n]) for n in a)
        ra, rb = (json.load(open(p[k])) for p in (args["record_paths"], straight["record_paths"]))
        assert without_seconds(ra.pop("history")) == without_seconds(rb.pop("history"))
        assert ra.pop("train_seconds") > 0 and {**ra, "train_seconds": 0} == {**rb, "train_seconds": 0}


def test_epoch_lines_say_the_epoch_of_its_total_the_metrics_and_the_shards_eta(digits, tmp_path, config, caplog):
    import numpy as np

    np.savez(tmp_path / "data.npz", **digits)
    universes = [{"id": f"r0u00{k}", "round": 0, "index": k, "shard": 0, "slot": k, "seed": k,
                  "params": {**U, "epochs": 1 + k}} for k in range(2)]
    model = {**config["model"], "width": 16, "depth": 1}
    with caplog.at_level(logging.INFO, logger="eta"):
        train_shard(str(tmp_path / "data.npz"), universes, model, config["training"],
                    [str(tmp_path / f"u{k}" / "model.pt") for k in range(2)],
                    [str(tmp_path / f"u{k}" / "train.json") for k in range(2)], logging.getLogger("eta"))
    lines = [r.getMessage() for r in caplog.records if " epoch " in r.getMessage()]
    assert [line.split()[:3] for line in lines] == [["r0u000", "epoch", "1/1"], ["r0u001", "epoch", "1/2"],
                                                     ["r0u001", "epoch", "2/2"]]
    assert all("train_loss=" in line and "val_acc=" in line for line in lines)
    assert "universe 1/2, shard ETA" in lines[0] and lines[-1].endswith("universe 2/2, shard ETA 0s)")
