"""Packed training (multiverse.packed): a universe trained in a stack equals its
sequential twin (multiverse.train.train_universe: same initial weights, same minibatch
order) to rounding, for every optimizer, mixed batch sizes, warm-up, lr scaling and a
budget in steps; divergence stops one universe, not its stack."""

import json

import pytest
import torch

from multiverse import packed
from multiverse.train import train_universe

#: Every optimizer and training choice the built-in trainer supports, batch sizes within
#: BATCH_RATIO of each other (one stack, in lockstep with masking).
UNIVERSES = [
    {"optimizer": "sgd", "lr": 0.1, "weight_decay": 1e-3, "batch_size": 48},
    {"optimizer": "momentum", "lr": 0.05, "weight_decay": 1e-4, "batch_size": 56, "momentum": 0.8},
    {"optimizer": "adam", "lr": 3e-3, "weight_decay": 1e-3, "batch_size": 64, "eps": 1e-6},
    {"optimizer": "adamw", "lr": 3e-3, "weight_decay": 1e-2, "batch_size": 48, "warmup_epochs": 1},
    {"optimizer": "rmsprop", "lr": 1e-3, "weight_decay": 1e-5, "batch_size": 60, "lr_scaling": "sqrt"},
    {"optimizer": "adam", "lr": 1e-2, "weight_decay": 0.0, "batch_size": 50, "steps": 25},
]
SEEDS = [11, 12, 13, 14, 15, 16]
KW = dict(epochs=2, width=16, depth=2)


def max_difference(a, b):
    return max(float((a[k] - b[k]).abs().max()) for k in b)


def twins(digits, dtype, universes=UNIVERSES, seeds=SEEDS):
    stack = packed.train_stack(digits, universes, seeds, dtype=dtype, **KW)
    alone = [train_universe(digits, u, seed=s, dtype=dtype, **KW) for u, s in zip(universes, seeds)]
    return stack, alone


def test_in_float64_every_packed_universe_equals_its_sequential_twin(digits):
    """To 1e-10 after 2 epochs, for every optimizer, with mixed batch sizes (so the
    lockstep masks), warm-up, lr scaling and a budget that stops part-way."""
    assert len(packed.stacks([{"params": u} for u in UNIVERSES], 16, 2)) == 1
    stack, alone = twins(digits, torch.float64)
    for u, (s_p, r_p), (s_s, r_s) in zip(UNIVERSES, stack, alone):
        assert set(s_p) == set(s_s)
        assert max_difference(s_p, s_s) < 1e-10, u
        assert r_p["steps_run"] == r_s["steps_run"] and r_p["epochs_run"] == r_s["epochs_run"], u
        assert r_p["lr_final"] == pytest.approx(r_s["lr_final"], rel=1e-12)
        for hp, hs in zip(r_p["history"], r_s["history"]):
            for key in ("train_loss", "train_acc", "val_loss", "val_acc"):
                assert hp[key] == pytest.approx(hs[key], abs=1e-10), (u, key)
    assert stack[-1][1]["steps_run"] == 25  # the steps budget, part-way through epoch 2


def test_in_float32_a_packed_universe_is_as_close_as_float32_is_to_float64(digits):
    """The packed float32 weights differ from the sequential float32 ones by no more
    than twice the sequential run's own float32-vs-float64 difference (measured: at most 0.8x)."""
    stack32, alone32 = twins(digits, None)
    _, alone64 = twins(digits, torch.float64)
    for u, (s_p, _), (s_s, _), (s_d, _) in zip(UNIVERSES, stack32, alone32, alone64):
        precision = max_difference({k: v.double() for k, v in s_s.items()}, s_d)
        assert 0 < precision < 1e-3
        assert max_difference(s_p, s_s) < 2 * precision, u


def test_divergence_stops_one_universe_not_its_stack(digits):
    universes = [UNIVERSES[0], {**UNIVERSES[0], "lr": 1e12}, UNIVERSES[2]]
    stack, alone = twins(digits, torch.float64, universes, SEEDS[:3])
    (_, ok), (_, bad), _ = stack
    assert bad["status"] == alone[1][1]["status"] == "diverged"
    assert bad["diverged_epoch"] == alone[1][1]["diverged_epoch"] == 1 and bad["epochs_run"] == 0
    assert ok["status"] == "ok" and ok["epochs_run"] == 2
    for k in (0, 2):
        assert max_difference(stack[k][0], alone[k][0]) < 1e-10


def test_stacks_group_by_network_and_batch_sizes_within_the_ratio():
    us = [{"params": {"batch_size": b, **extra}} for b, extra in
          [(16, {}), (20, {}), (23, {}), (32, {}), (256, {}), (16, {"width": 32})]]
    groups = packed.stacks(us, width=16, depth=1, max_size=2)
    assert groups == [[0, 1], [2, 3], [4], [5]]  # 32 <= 1.4 x 23; max_size 2 splits 16, 20 from 23
    for g in groups:
        sizes = [us[i]["params"]["batch_size"] for i in g]
        assert max(sizes) <= packed.BATCH_RATIO * min(sizes)
    assert packed.packable(UNIVERSES[0], "mlp") and not packed.packable({**UNIVERSES[0], "dropout": 0.1}, "mlp")
    assert not packed.packable(UNIVERSES[0], "cnn")


def test_a_shard_under_pack_auto_stacks_what_it_can_and_keeps_per_universe_outputs(digits, tmp_path, config, caplog):
    """train_shard with training.pack: auto: the two packable universes train as one
    stack (their weights equal their float32 sequential twins to float32 precision), the
    dropout one trains alone as with pack off (bitwise), each universe keeps its own
    weights and record, and the finished shard leaves no run/ folder."""
    import logging

    from conftest import three_universe_shard

    from multiverse.train import train_shard

    params = [UNIVERSES[0], UNIVERSES[2], {**UNIVERSES[2], "dropout": 0.1}]
    _, shard_args = three_universe_shard(tmp_path, digits, config, params)
    log = logging.getLogger("test")
    with caplog.at_level(logging.INFO):
        for folder, pack in (("packed", "auto"), ("alone", "off")):
            args = shard_args(folder, log=log)  # device auto: the stack runs on the device the shard resolved
            train_shard(**{**args, "training": {**args["training"], "epochs": 2, "pack": pack, "device": "auto"}})
    assert "stack of 2 trained" in caplog.text
    # each universe's epochs are lines of the job's log, as when it trains alone
    assert "r0u000 epoch 2/2 train_loss=" in caplog.text and "in a stack of 2; universe 1/3, shard ETA" in caplog.text
    load = lambda folder, k: torch.load(tmp_path / folder / f"u{k}" / "model.pt", weights_only=True)  # noqa: E731
    read = lambda folder, k: json.loads((tmp_path / folder / f"u{k}" / "train.json").read_text())  # noqa: E731
    for k in (0, 1):
        assert max_difference(load("packed", k), load("alone", k)) < 1e-5
        rec = read("packed", k)
        assert rec["pack_size"] == 2 and rec["status"] == "ok" and rec["epochs_run"] == 2 and rec["id"] == f"r0u00{k}"
        assert rec["params"] == params[k]
    assert all(torch.equal(a, b) for a, b in zip(load("packed", 2).values(), load("alone", 2).values()))
    assert "pack_size" not in read("packed", 2) and "pack_size" not in read("alone", 0)
    assert not list((tmp_path / "packed").rglob("run"))  # the shard is done: no run/ folder left


def test_a_stopped_stack_saves_and_resumes_bitwise_to_the_uninterrupted_result(digits):
    """SIGTERM under the guard (should_stop) stops a stack before its next epoch, after
    saving its state; resumed from that state (as written to disk and read back), every
    universe ends with the weights, history and record of an uninterrupted stack, to the
    bit (float32, the CPU). Checkpoints every epoch hold the same state as the stop's."""
    import io

    from multiverse.errors import Preempted

    def on_disk(state):  # what train_stacks writes and reads back (torch.save, weights_only load)
        buf = io.BytesIO()
        torch.save({"state": state}, buf)
        buf.seek(0)
        return torch.load(buf, weights_only=True)["state"]

    kw = {**KW, "epochs": 3}
    whole = packed.train_stack(digits, UNIVERSES, SEEDS, **kw)
    asked, saved, every = [], [], []

    def should_stop():
        asked.append(1)
        return len(asked) > 2  # before the third epoch

    with pytest.raises(Preempted, match="before epoch 3 .*\\(saved\\)"):
        packed.train_stack(digits, UNIVERSES, SEEDS, should_stop=should_stop, save=lambda st: saved.append(on_disk(st)),
                           checkpoint_every=0, **kw)
    assert [st["epoch"] for st in saved] == [2]
    resumed = packed.train_stack(digits, UNIVERSES, SEEDS, resume=saved[0], **kw)
    packed.train_stack(digits, UNIVERSES, SEEDS, save=lambda st: every.append(on_disk(st)), checkpoint_every=1, **kw)
    assert [st["epoch"] for st in every][:2] == [1, 2] and torch.equal(every[1]["flat"], saved[0]["flat"])

    def timeless(record):
        return {**record, "train_seconds": None, "history": [{**e, "seconds": None} for e in record["history"]]}

    for (w1, r1), (w2, r2) in zip(whole, resumed):
        assert all(torch.equal(w1[n], w2[n]) for n in w1)
        assert timeless(r1) == timeless(r2)
        assert r1["epochs_run"] == len(r1["history"]) >= 1


def test_a_shard_killed_inside_a_stack_resumes_the_stack_from_its_checkpoint(digits, tmp_path, config, caplog):
    """train_shard under pack: auto, stopped between a stack's epochs (as SIGTERM does):
    the stack's checkpoint stays in its first universe's run/ folder; the job's rerun logs
    "resumed" and writes the same weights as an uninterrupted run, and leaves no run/."""
    import logging

    from conftest import three_universe_shard

    from multiverse import train as T
    from multiverse.errors import Preempted

    params = [UNIVERSES[0], UNIVERSES[2], {**UNIVERSES[2], "dropout": 0.1}]
    _, shard_args = three_universe_shard(tmp_path, digits, config, params)
    log = logging.getLogger("test")
    training = lambda args: {**args["training"], "epochs": 3, "pack": "auto"}  # noqa: E731
    args = shard_args("whole", log=log)
    T.train_shard(**{**args, "training": training(args)})
    calls = []

    def stop_after_two_epochs():
        calls.append(1)
        return len(calls) == 3

    args = shard_args("stopped", log=log)
    original = T.stop_requested
    T.stop_requested = stop_after_two_epochs
    try:
        with pytest.raises(Preempted):
            T.train_shard(**{**args, "training": training(args)})
    finally:
        T.stop_requested = original
    assert (tmp_path / "stopped" / "u0" / "run" / T.STACK_CHECKPOINT).exists()
    with caplog.at_level(logging.INFO):
        T.train_shard(**{**args, "training": training(args)})
    assert "resumed from" in caplog.text and "after epoch 2" in caplog.text
    for k in range(3):
        a, b = (torch.load(tmp_path / f / f"u{k}" / "model.pt", weights_only=True) for f in ("whole", "stopped"))
        assert all(torch.equal(a[n], b[n]) for n in a)
    assert not list((tmp_path / "stopped").rglob("run"))


def test_a_stack_that_raises_falls_back_to_one_universe_at_a_time(digits, tmp_path, config, caplog, monkeypatch):
    """A fault injected into the stacked trainer (as a CUDA error or a bug would raise):
    the shard logs it and trains the stack's universes one at a time, to the same bytes
    as pack: off."""
    import logging

    from conftest import three_universe_shard

    from multiverse.train import train_shard

    def broken(*args, **kwargs):
        raise RuntimeError("injected fault in the stack")

    _, shard_args = three_universe_shard(tmp_path, digits, config, [UNIVERSES[0], UNIVERSES[2], UNIVERSES[3]])
    log = logging.getLogger("test")
    with caplog.at_level(logging.INFO):
        for folder, pack in (("alone", "off"), ("fallback", "auto")):
            if pack == "auto":
                monkeypatch.setattr(packed, "train_stack", broken)
            args = shard_args(folder, log=log)
            train_shard(**{**args, "training": {**args["training"], "epochs": 2, "pack": pack}})
    assert "injected fault in the stack" in caplog.text and "training them one at a time" in caplog.text
    for k in range(3):
        a, b = (torch.load(tmp_path / f / f"u{k}" / "model.pt", weights_only=True) for f in ("alone", "fallback"))
        assert all(torch.equal(a[n], b[n]) for n in a)


def test_a_stack_that_kills_its_worker_is_recorded_and_its_universes_train_one_at_a_time(
        digits, tmp_path, config, monkeypatch):
    """Under the train job's guard (multiverse.failures.guard), a stack whose process is
    killed (SIGKILL, as the OOM killer would) is recorded in its own attempts file; the
    guard's next worker trains the stack's universes one at a time, so the shard
    finishes, bitwise as pack: off."""
    import logging
    import os
    import signal

    from conftest import three_universe_shard

    from multiverse.failures import guard
    from multiverse.train import train_shard

    def killed(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    _, shard_args = three_universe_shard(tmp_path, digits, config, [UNIVERSES[0], UNIVERSES[2], UNIVERSES[3]])
    handler = logging.FileHandler(tmp_path / "guarded.log")  # the forked workers' lines come back through a file
    log = logging.getLogger("guarded")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # GNU OpenMP is not fork-safe after multi-threaded work (see test_failures)
    try:
        alone = shard_args("alone", log=log)
        train_shard(**{**alone, "training": {**alone["training"], "epochs": 2}})
        monkeypatch.setattr(packed, "train_stack", killed)
        args = shard_args("guarded", log=log)
        guard(lambda: train_shard(**{**args, "training": {**args["training"], "epochs": 2, "pack": "auto"}}), log,
              retries=1)
    finally:
        torch.set_num_threads(before)
        log.removeHandler(handler)
        handler.close()
    text = (tmp_path / "guarded.log").read_text()
    assert "universe stack of r0u000, r0u002, r0u001 failed (attempt 1 of 2): died" in text, text  # by batch size
    assert "a stack of ['r0u000', 'r0u002', 'r0u001'] failed before" in text
    for k in range(3):
        a, b = (torch.load(tmp_path / f / f"u{k}" / "model.pt", weights_only=True) for f in ("alone", "guarded"))
        assert all(torch.equal(a[n], b[n]) for n in a)
        assert json.loads((tmp_path / "guarded" / f"u{k}" / "train.json").read_text())["status"] == "ok"
    assert not list((tmp_path / "guarded").rglob("run"))


def test_pack_off_may_be_written_bare_in_yaml(config):
    """YAML reads a bare `off` as false: the config takes it, and it means off."""
    import yaml

    from multiverse.spec import with_defaults

    bare = yaml.safe_load("pack: off")["pack"]
    assert bare is False
    assert with_defaults({**config, "training": {**config["training"], "pack": bare}})["training"]["pack"] is False


@pytest.mark.slow
def test_the_default_study_under_packing_reaches_verdicts_compatible_with_todays(tmp_path):
    """Item 2 of issue 32 at the level of the study: the default study with
    ``training.pack: auto`` against today's loop (``pack: off``), each run to the end by
    Snakemake. Every claim's and condition's design-based interval overlaps today's and no
    badge turns into its opposite.

    Not asked: the same badge everywhere. In float32 a few of the default study's universes
    (high learning rates) are chaotic in rounding: any change of arithmetic moves their
    outcome, and a badge whose P(holds) lies within that of its threshold moves with it.
    Today's loop under another BLAS path (``MKL_CBWR=COMPATIBLE``) moves a badge too,
    further than packing does (``benchmarks/packed_verdicts.py``, docs/benchmarks.md)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import packed_verdicts as V

    off, auto = V.run_study(tmp_path / "off", "off"), V.run_study(tmp_path / "auto", "auto")
    a, b = V.readings(off), V.readings(auto)
    assert a.keys() == b.keys() and len(a) >= 5
    agree = {k: V.agreement(a[k], b[k]) for k in a}
    assert set(agree.values()) <= {"same", "compatible"}, agree
    assert any("stack of" in f.read_text() for f in (auto / "logs" / "train").glob("*.log")), "packing packed"
