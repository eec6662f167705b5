"""Training one universe with torch (its metrics: :mod:`multiverse.metrics`).

Training is deterministic on the CPU: the weights come from ``torch.manual_seed(seed)``
and the minibatch order from a generator seeded with the same seed, so a universe's
result does not depend on which other universes share its process.

A universe's training state is saved in its ``run/`` folder every ``checkpoint_every``
epochs and a killed job resumes from it (:func:`train_universe`); a shard keeps the
universes it finished (:func:`train_shard`). On the CPU the result is bitwise the same
as an uninterrupted run's.
"""

from __future__ import annotations

import hashlib
import logging
import math
import shutil
import time
import zlib
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from multiverse import packed, shard
from multiverse.data import read_data
from multiverse.entrypoint import Progress, ShardClock, log_epoch
from multiverse.errors import Preempted
from multiverse.nets import (  # noqa: F401  (make_model, scaled_lr re-exported: callers import them from here)
    DEFAULT_BASE_BATCH, DEFAULT_EPS, DEFAULT_MOMENTUM, as_tensors, budget, count_classes, make_model, network,
    scaled_lr)
from multiverse.fidelity import low_epochs, not_continued_record, shard_draws
from multiverse.failures import ATTEMPTS, Attempts, cause_of, failed_record, stop_requested  # noqa: F401  (failed_record re-exported)
from multiverse.runtime import (  # noqa: F401  (DeviceUnavailable re-exported)
    DeviceUnavailable, atomic_write, read_json, take_gpu_share, universe_fields, versions, write_json)
from multiverse.runtime import resolve_device as node_device
from multiverse.shard import lane_slots, run_dir, train_slots

def resolve_device(device: str, log: logging.Logger | None = None) -> torch.device:
    """``cpu``, ``cuda`` or ``auto`` as a torch device (:func:`multiverse.runtime.resolve_device`:
    ``cuda`` without a GPU raises :class:`multiverse.runtime.DeviceUnavailable`)."""
    return torch.device(node_device(device, log))


def make_optimizer(
    name: str, params, lr: float, weight_decay: float, momentum: float | None = None, eps: float | None = None
) -> torch.optim.Optimizer:
    """The universe's optimizer. ``momentum`` is used by ``momentum`` alone and ``eps`` by
    ``adam``, ``adamw`` and ``rmsprop`` alone (None: the defaults), as in a conditional space."""
    momentum = DEFAULT_MOMENTUM if momentum is None else momentum
    eps = DEFAULT_EPS if eps is None else eps
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, eps=eps)
    if name == "adamw":  # decoupled weight decay (Loshchilov & Hutter 2019)
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, eps=eps)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, weight_decay=weight_decay, eps=eps)
    raise ValueError(f"unknown optimizer {name!r}")


#: Rows per forward pass of :func:`evaluate`: memory stays bounded on CIFAR-sized splits
#: (a ResNet-18 needs about 1 MB per image), while a split of up to this many rows (the
#: default study's digits splits: about 1,100) is still one pass, as before chunking.
EVAL_BATCH = 2048


@torch.no_grad()
def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, batch: int = EVAL_BATCH) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``model`` on ``X`` (``n x features``), ``y`` (``n``).

    Evaluated in forward passes of at most ``batch`` rows (0: all at once), each moved to
    the model's device, so ``X`` and ``y`` may stay on the CPU. A split of at most
    ``batch`` rows is one pass, with torch's mean loss exactly as before; a larger one sums
    each pass's losses and correct predictions.
    """
    device = next(model.parameters()).device
    n = len(y)
    if batch <= 0 or n <= batch:
        X, y = X.to(device), y.to(device)
        logits = model(X)
        loss = nn.functional.cross_entropy(logits, y).item()
        acc = (logits.argmax(dim=1) == y).double().mean().item()
        return acc, loss
    loss_sum, correct = 0.0, 0
    for i in range(0, n, batch):
        xb, yb = X[i : i + batch].to(device), y[i : i + batch].to(device)
        logits = model(xb)
        loss_sum += nn.functional.cross_entropy(logits, yb, reduction="sum").item()
        correct += int((logits.argmax(dim=1) == yb).sum().item())
    return correct / n, loss_sum / n


def planned_epochs(params: Mapping[str, Any], epochs: int, n_train: int) -> int | None:
    """The epochs a universe plans (fewer if it diverges); None where its params do not
    say (it will fail)."""
    try:
        per_epoch, steps = budget(params, epochs, n_train)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return math.ceil(steps / per_epoch)


#: A universe's files in its ``run/`` folder, beside its declared outputs (which Snakemake
#: deletes when a job fails, this folder it keeps): its training state every
#: ``checkpoint_every`` epochs, and its weights and record once it is done, until its
#: shard is.
CHECKPOINT, FINAL = "checkpoint.pt", "final.pt"
#: A stack's attempts and its training state (``training.pack: auto``), in its first
#: universe's ``run/`` folder.
STACK, STACK_CHECKPOINT = "stack.json", "stack_checkpoint.pt"
#: A universe's ``run/`` files that go once its shard is done, its declared outputs
#: being what counts then; a checkpoint too, where a kill came between keeping its
#: result and dropping the checkpoint.
RUN_FILES = (CHECKPOINT, FINAL, ATTEMPTS, STACK, STACK_CHECKPOINT)
#: This module's code, part of what a checkpoint must match (:func:`universe_key`).
CODE_DIGEST = hashlib.sha256(b"".join((Path(__file__).parent / name).read_bytes()
                                       for name in ("train.py", "nets.py", "packed.py"))).hexdigest()[:16]


def data_digest(data: Mapping[str, np.ndarray]) -> str:
    """A cheap fingerprint of the splits: each array's name, dtype, shape and CRC-32 (about
    0.3 s for CIFAR-10's 0.7 GB)."""
    parts = []
    for name in sorted(data):
        a = np.ascontiguousarray(data[name])
        parts.append(f"{name}:{a.dtype}{list(a.shape)}:{zlib.crc32(a.reshape(-1).view(np.uint8)):08x}")
    return " ".join(parts)


def universe_key(
    digest: str, params: Mapping[str, Any], *, seed: int, epochs: int, width: int, depth: int,
    arch: str, base_batch: int, device: str,
) -> dict[str, Any]:
    """What a universe's training depends on: a checkpoint or a kept result is used only
    where all of it is the same (the arguments of :func:`train_universe`, the data's
    :func:`data_digest`, torch's version and this module's code)."""
    return {"params": dict(params), "seed": int(seed), "epochs": int(epochs), "width": int(width),
            "depth": int(depth), "arch": arch, "base_batch": int(base_batch), "device": device,
            "data": digest, "torch": str(torch.__version__), "code": CODE_DIGEST}


#: What a checkpoint and a kept result hold; a file lacking any is damaged, not used.
CHECKPOINT_FIELDS = ("epoch", "step", "history", "seconds", "model", "optimizer", "generator", "rng")
FINAL_FIELDS = ("state", "record")


def read_saved(path: str | Path, key: Mapping[str, Any], log: logging.Logger,
               fields: Sequence[str] = ()) -> dict[str, Any] | None:
    """The checkpoint or kept result at ``path`` when there is one, readable, saved
    under ``key`` and holding ``fields``; else None (and a warning when one is there but
    not used: the universe trains afresh, never fails on it)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001  (whatever it is, the universe trains afresh)
        log.warning("%s is unreadable, not used: %s: %s", path, type(err).__name__, err)
        return None
    if not isinstance(saved, dict) or saved.get("key") != key:
        log.warning("%s was saved for another universe, setting, data, torch or code: not used", path)
        return None
    missing = [f for f in fields if f not in saved]
    if missing:
        log.warning("%s is damaged (it lacks %s): not used", path, missing)
        return None
    return saved


def train_universe(
    data: Mapping[str, np.ndarray],
    params: Mapping[str, Any],
    *,
    seed: int,
    epochs: int,
    width: int,
    depth: int,
    device: str = "cpu",
    arch: str = "mlp",
    base_batch: int = DEFAULT_BASE_BATCH,
    progress: Callable[..., None] | None = None,
    checkpoint_path: str | Path | None = None,
    checkpoint_every: int = 1,
    log: logging.Logger | None = None,
    digest: str | None = None,
    dtype: torch.dtype | None = None,
    stop_after: int | None = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Train the universe ``params`` and return ``(state_dict, record)``.

    ``stop_after``: a low fidelity of the same universe: train its first ``stop_after``
    epochs under the full budget's schedule and stop, saving the state to
    ``checkpoint_path`` (where a later call without ``stop_after`` resumes it: a
    continued universe trains no epoch twice, and on the CPU ends bitwise as one trained
    to the end in one go). Its record says ``fidelity_epochs``.

    ``dtype``: the weights' and data's floating type (None: as the data come, float32);
    the packed trainer's equivalence tests train float64 twins (:mod:`multiverse.packed`).

    The network is ``arch`` of ``width`` and ``depth`` unless the space makes them (and
    ``dropout``) choices (:func:`network`). ``progress`` is called after every epoch
    with that epoch's history entry (:class:`multiverse.entrypoint.Progress` logs it).

    Besides the optimizer's own choices, ``params`` may hold the training choices of a
    large-batch study: ``lr_scaling`` (:func:`scaled_lr`), ``warmup_epochs`` (the
    learning rate rises linearly from lr / warmup steps to lr over that many epochs,
    Goyal et al. 2017, with torch's ``LinearLR``), and the budget as ``epochs`` (then it
    overrides the ``epochs`` argument) or as optimizer ``steps`` (the last epoch stops
    part-way).

    ``record`` holds the per-epoch ``history`` (train loss/accuracy averaged over the
    epoch's minibatches, validation loss/accuracy after the epoch) and a ``status``:
    ``ok``, or ``diverged`` when a loss turned NaN or infinite (training stops there;
    the universe stays part of the multiverse).

    With a ``checkpoint_path``, the training state (weights, optimizer, warmup schedule,
    the minibatch generator's and torch's random states, epoch, step, history, seconds)
    is written there after every ``checkpoint_every``-th epoch (0: never), and training
    resumes from a checkpoint found there at the start if it was saved under the same
    :func:`universe_key` (said in ``log``; ``digest``: the data's :func:`data_digest`,
    computed here if not given; a damaged one is reported and training starts afresh).
    When the job is asked to stop (:func:`multiverse.failures.stop_requested`: SIGTERM
    under the guard), the state is saved at the next minibatch, where it stands inside
    its epoch, and :class:`multiverse.failures.Preempted` is raised. On the CPU a resumed
    universe's weights and history are bitwise those of an uninterrupted run; saving
    draws no random number.
    """
    log = log or logging.getLogger(__name__)
    dev = resolve_device(device)
    key = None if checkpoint_path is None else universe_key(
        digest or data_digest(data), params, seed=seed, epochs=epochs, width=width, depth=depth, arch=arch, base_batch=base_batch,
        device=dev.type)
    if dev.type == "cuda":
        # The CPU kernels used here are deterministic already (tests/test_train.py checks
        # bitwise-equal weights); the global switch costs seconds per process on the CPU.
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.cuda.reset_peak_memory_stats(dev)
    torch.manual_seed(seed)
    t, shape = as_tensors(data, dev, dtype)
    n_classes = count_classes(t)
    width, depth, dropout = network(params, width, depth)
    model = make_model(t["X_train"].shape[1], n_classes, width, depth, arch, shape, dropout).to(dev)
    if dtype is not None:
        model = model.to(dtype)
    n, bs = len(t["y_train"]), int(params["batch_size"])
    lr = scaled_lr(params["lr"], bs, params.get("lr_scaling"), base_batch)
    opt = make_optimizer(
        params["optimizer"], model.parameters(), lr, params["weight_decay"], params.get("momentum"), params.get("eps"),
    )
    per_epoch, steps = budget(params, epochs, n)
    warmup = round(float(params.get("warmup_epochs") or 0) * per_epoch)
    schedule = torch.optim.lr_scheduler.LinearLR(opt, 1.0 / warmup, 1.0, warmup) if warmup > 0 else None
    gen = torch.Generator().manual_seed(seed)
    history: list[dict[str, float]] = []
    status, diverged_epoch, step, done, elapsed = "ok", None, 0, 0, 0.0
    saved = None if checkpoint_path is None else read_saved(checkpoint_path, key, log, CHECKPOINT_FIELDS)
    partial = None  # where in its epoch a preempted universe stopped
    if saved is not None:
        try:
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["optimizer"])  # its learning rate too, which LinearLR steps from
            if schedule is not None:
                schedule.load_state_dict(saved["schedule"])
            gen.set_state(saved["generator"])
            torch.set_rng_state(saved["rng"])  # dropout's
            if dev.type == "cuda":
                torch.cuda.set_rng_state(saved["cuda_rng"], dev)
            history, step, done, elapsed = list(saved["history"]), int(saved["step"]), int(saved["epoch"]), float(saved["seconds"])
            partial = saved.get("partial")
        except Exception as err:  # noqa: BLE001  (a damaged checkpoint: warn, train afresh, never fail on it)
            log.warning("%s is damaged, not used (%s: %s): training afresh", checkpoint_path, type(err).__name__, err)
            Path(checkpoint_path).unlink(missing_ok=True)
            return train_universe(data, params, seed=seed, epochs=epochs, width=width, depth=depth, device=device,
                                  arch=arch, base_batch=base_batch, progress=progress, checkpoint_path=checkpoint_path,
                                  checkpoint_every=checkpoint_every, log=log, digest=digest, dtype=dtype,
                                  stop_after=stop_after)
        log.info("resumed from %s after epoch %d%s (%.1fs trained before)", checkpoint_path, done,
                 f" and {partial['steps']} of its next epoch's steps" if partial else "", elapsed)
    start = time.perf_counter() - elapsed

    def snapshot(epoch: int, **more: Any) -> None:
        state = {
            "key": key, "epoch": epoch, "step": step, "history": history, "seconds": time.perf_counter() - start,
            "model": model.state_dict(), "optimizer": opt.state_dict(),
            "schedule": None if schedule is None else schedule.state_dict(),
            "generator": gen.get_state(), "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None, **more,
        }
        atomic_write(checkpoint_path, lambda tmp: torch.save(state, tmp))

    last = math.ceil(steps / per_epoch)
    stop = last if stop_after is None else min(int(stop_after), last)
    for epoch in range(done + 1, stop + 1):
        model.train()
        if partial is not None:  # resume inside the epoch a preemption stopped
            order, first = partial["order"].to(dev), int(partial["next"])
            loss_sum, correct, seen = float(partial["loss_sum"]), int(partial["correct"]), int(partial["seen"])
            partial = None
        else:
            order, first = torch.randperm(n, generator=gen).to(dev), 0
            loss_sum, correct, seen = 0.0, 0, 0
        for i in range(first, n, bs):
            if step == steps:
                break
            if stop_requested() and checkpoint_path is not None:  # SIGTERM: save where it stands, then stop
                snapshot(epoch - 1, partial={"order": order.cpu(), "next": i, "loss_sum": loss_sum, "correct": correct,
                                             "seen": seen, "steps": i // bs})
                raise Preempted(f"saved {checkpoint_path} in epoch {epoch}, after {i // bs} of its steps")
            idx = order[i : i + bs]
            xb, yb = t["X_train"][idx], t["y_train"][idx]
            logits = model(xb)
            loss = nn.functional.cross_entropy(logits, yb)
            if not torch.isfinite(loss):
                status, diverged_epoch = "diverged", epoch
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if schedule is not None and step < warmup:
                schedule.step()
            step += 1
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(1) == yb).sum().item()
            seen += len(idx)
        if status == "diverged":
            break
        model.eval()
        val_acc, val_loss = evaluate(model, t["X_val"], t["y_val"])
        history.append(
            {"epoch": epoch, "train_loss": loss_sum / seen, "train_acc": correct / seen,
             "val_loss": val_loss, "val_acc": val_acc, "seconds": round(time.perf_counter() - start, 3)}
        )
        if checkpoint_path is not None and checkpoint_every > 0 and epoch % checkpoint_every == 0 \
                and math.isfinite(val_loss):
            snapshot(epoch)
        if progress is not None:
            try:
                progress(**history[-1])
            except Preempted:  # the reporter saw SIGTERM at the epoch's end: save that epoch, then stop
                if checkpoint_path is None or not math.isfinite(val_loss):
                    raise
                snapshot(epoch)
                raise Preempted(f"saved {checkpoint_path} after epoch {epoch}") from None
        if not math.isfinite(val_loss):
            status, diverged_epoch = "diverged", epoch
            break
    if stop < last and status == "ok" and checkpoint_path is not None and done < stop:
        snapshot(stop)  # the low fidelity's end, where a continuation resumes
    record = {
        "status": status,
        "diverged_epoch": diverged_epoch,
        "epochs_run": len(history),
        "steps_run": step,
        "lr_effective": lr,
        "lr_final": opt.param_groups[0]["lr"],
        "n_classes": n_classes,
        "history": history,
        "train_seconds": time.perf_counter() - start,
        "device": str(dev),
        # the GPU memory its training took at most (CUDA only; a CPU record stays as it was)
        **({"peak_gpu_mb": torch.cuda.max_memory_allocated(dev) / 2**20} if dev.type == "cuda" else {}),
        **({"fidelity_epochs": stop} if stop < last else {}),
    }
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return state, record


#: ``clear_runs(record_paths)``: a finished shard's :data:`RUN_FILES`
#: (:func:`multiverse.shard.clear_runs`); its ``run/`` folders hold nothing else, so one
#: left empty goes too.
clear_runs = partial(shard.clear_runs, names=RUN_FILES, own_folder=True)


def keep_final(run: Path, key: Mapping[str, Any], state: Mapping[str, torch.Tensor], record: Mapping[str, Any],
               drop_checkpoint: bool = True) -> None:
    """Keep a finished universe's weights and record in its ``run/`` folder (:data:`FINAL`)
    until its shard is done, and drop its checkpoint (unless not ``drop_checkpoint``: a
    low fidelity's, which its resume file copies)."""
    final = {"key": key, "state": state, "record": record}
    atomic_write(run / FINAL, lambda tmp: torch.save(final, tmp))
    if drop_checkpoint:
        (run / CHECKPOINT).unlink(missing_ok=True)


def train_stacks(data: Mapping[str, np.ndarray], universes: Sequence[Mapping[str, Any]], model: Mapping[str, Any],
                 training: Mapping[str, Any], runs: Sequence[Path], keys: Sequence[Mapping[str, Any]],
                 log: logging.Logger, clock: ShardClock, env: Mapping[str, Any], device: torch.device,
                 checkpoint_every: int = 1) -> set[int]:
    """``training.pack: auto``: train the shard's universes that :func:`multiverse.packed.packable`
    allows and that no earlier run of the shard finished as stacked ensembles
    (:func:`multiverse.packed.stacks`; a stack of one trains alone, as the rest do), and
    keep each one's result in its ``run/`` folder (:func:`keep_final`), where
    :func:`train_shard` then finds it. Returns the slots trained here.

    A stack saves its training state (:data:`STACK_CHECKPOINT`, in its first universe's
    ``run/`` folder) every ``checkpoint_every`` epochs and when the job is stopped
    (SIGTERM, at the end of the running epoch), and a job that runs again resumes it, to
    the same result on the CPU as an uninterrupted run, as one universe's checkpoint does. A stack has
    its own attempts file (:data:`STACK`), so that under :func:`multiverse.failures.guard`
    a stack that raises, kills its worker or runs past ``training.timeout`` (one
    universe's limit: a stack of K takes longer) is recorded; then, in this worker or the
    next, its universes train one at a time under their own attempts, as with ``pack:
    off``."""

    pending = [i for i, u in enumerate(universes) if packed.packable(u["params"], model["arch"])
               and read_saved(runs[i] / FINAL, keys[i], log, FINAL_FIELDS) is None]
    done: set[int] = set()
    for group in packed.stacks([universes[i] for i in pending], model["width"], model["depth"],
                               max_size=len(universes)):
        slots = [pending[j] for j in group]
        if len(slots) < 2:
            continue
        ids = [universes[s]["id"] for s in slots]
        # the stack's attempts, so that the guard knows what a dead or overrunning worker was training
        attempts = Attempts(runs[slots[0]], {"stack": [keys[s] for s in slots]},
                            {"id": "stack of " + ", ".join(ids), "seed": [universes[s]["seed"] for s in slots],
                             "params": [universes[s]["params"] for s in slots]}, log, name=STACK)
        if attempts.failed:
            log.warning("a stack of %s failed before (%s): training them one at a time", ids,
                        attempts.failed[-1]["error"])
            continue
        checkpoint, key = runs[slots[0]] / STACK_CHECKPOINT, {"stack": [keys[s] for s in slots]}
        saved = read_saved(checkpoint, key, log, ("state",))
        if saved is not None:
            log.info("stack of %s resumed from %s after epoch %d", ids, checkpoint, saved["state"]["epoch"])

        def save(state: dict[str, Any], checkpoint=checkpoint, key=key) -> None:
            atomic_write(checkpoint, lambda tmp: torch.save({"key": key, "state": state}, tmp))

        # the seconds of a resumed stack's earlier epochs are not this job's (the ETA's clock)
        last = [0.0 if saved is None else float(saved["state"]["seconds"])] * len(slots)

        def progress(k: int, entry: Mapping[str, float], slots=slots, last=last) -> None:
            """A universe's epoch line, as :class:`multiverse.entrypoint.Progress` writes it,
            and the ETA's clock: a stacked epoch's seconds shared among the stack's universes."""
            slot = slots[k]
            clock.epoch(slot, entry["epoch"], (entry["seconds"] - last[k]) / len(slots))
            last[k] = entry["seconds"]
            log_epoch(log, universes[slot]["id"], entry, clock, slot, f" in a stack of {len(slots)}")

        attempts.start(1)
        try:
            out = packed.train_stack(
                data, [universes[s]["params"] for s in slots], [universes[s]["seed"] for s in slots],
                epochs=training["epochs"], width=model["width"], depth=model["depth"], device=device,
                base_batch=training["base_batch"], progress=progress, should_stop=stop_requested, save=save,
                checkpoint_every=checkpoint_every, resume=None if saved is None else saved["state"])
        except Preempted:
            raise
        except Exception as err:  # noqa: BLE001  (its universes train one at a time instead)
            log.warning("stack of %s failed (%s: %s): training them one at a time", ids, type(err).__name__, err)
            attempts.fail(cause_of(err), f"{type(err).__name__}: {err}")
            checkpoint.unlink(missing_ok=True)
            continue
        attempts.succeed()
        for s, (state, record) in zip(slots, out):
            u = universes[s]
            record = {**universe_fields(u), **record, "attempts": 1, "versions": env}
            keep_final(runs[s], keys[s], state, record)
            clock.finish(s, record["epochs_run"])
            done.add(s)
        attempts.clear()
        checkpoint.unlink(missing_ok=True)
        log.info("stack of %d trained in %.2fs: %s", len(slots), sum(r["train_seconds"] for _, r in out), ", ".join(
            f"{i} {r['status']}" for i, (_, r) in zip(ids, out)))
    return done


def train_shard(
    data_path: str,
    universes: Sequence[Mapping[str, Any]],
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    model_paths: Sequence[str],
    record_paths: Sequence[str],
    log: logging.Logger,
    retries: int = 1,
    checkpoint_every: int = 1,
    lane: tuple[int, int] = (0, 1),
    fidelity: Mapping[str, Any] | None = None,
    resume_paths: Sequence[str] | None = None,
    subset: Sequence[int] | None = None,
) -> None:
    """Train each universe of a shard and write its weights and record (slot order).

    ``fidelity`` (``design.fidelity``, :mod:`multiverse.fidelity`): train each universe at
    its low fidelity only (its first :func:`multiverse.fidelity.low_epochs` epochs under
    the full schedule) and write the training state it stopped in to ``resume_paths``
    (one a slot), from which :func:`train_continued_shard` resumes the continued ones.
    Universes train one at a time then (``training.pack`` does not stop part-way).
    ``subset``: train only these slots (the continued universes of
    :func:`train_continued_shard`), and keep their ``run/`` folders when done.
    ``lane`` ``(i, k)``: only slots ``i, i + k, ...``, one of the k lanes of
    ``training.per_device`` (:func:`multiverse.failures.guard_lanes`); a lane keeps its
    universes' ``run/`` files until every lane is done (:func:`clear_runs`), so that a
    job that fails or is stopped in another lane keeps what this one finished.

    A universe that fails is tried ``retries`` more times, then recorded as ``failed``
    with its cause (``failure``, :data:`multiverse.failures.CAUSES`) and error; one whose
    loss turns non-finite is ``diverged``. Neither stops the shard. Its attempts are
    counted in its ``run/`` folder (:class:`multiverse.failures.Attempts`), so that under
    :func:`multiverse.failures.guard` a universe that kills or hangs its process counts
    too, and one whose attempts are used up is not tried again. After running out of
    memory, what it held is freed before the next attempt. A checkpoint, kept result or
    attempts file that is damaged is reported and the universe trains afresh.

    A job killed mid-shard (kill -9, a time limit, a preemption) loses little when it runs
    again: each universe's ``run/`` folder (beside its record, not a declared output, so
    Snakemake keeps it) holds its training state every ``checkpoint_every`` epochs (0:
    never), from which it resumes (:func:`train_universe`), and, once it is done, its
    weights and record (:data:`FINAL`), so that it is kept, not trained again (logged
    ``kept``). Both are used only for the same universe, settings, data and code, and
    are removed when the whole shard is done. On the CPU the outputs are bitwise those of
    an uninterrupted run.
    """
    device = resolve_device(training["device"], log)  # no GPU where one is asked for: stop before any universe
    data = read_data(data_path)
    universes, model_paths, record_paths, *resume = lane_slots(universes, lane, model_paths, record_paths,
                                                               *([resume_paths] if fidelity is not None else []))
    if subset is not None:
        keep_slots = [i for i, u in enumerate(universes) if u["slot"] in set(subset)]
        universes, model_paths, record_paths = ([xs[i] for i in keep_slots] for xs in (universes, model_paths, record_paths))
    take_gpu_share(device.type, log)
    env = versions(["torch", "numpy"])
    planned = [planned_epochs(u["params"], training["epochs"], len(data["y_train"])) for u in universes]
    stops = [None if fidelity is None else low_epochs(fidelity, p) for p in planned]
    clock = ShardClock(planned if fidelity is None else stops, lane)
    digest = data_digest(data)  # once per shard, for every universe's key
    # YAML reads a bare off as false; a low fidelity stops part-way and a continuation resumes: one at a time
    pack = "auto" if training.get("pack") == "auto" and fidelity is None and subset is None else "off"
    runs = [run_dir(r) for r in record_paths]
    keys = [{"universe": universe_fields(u), **({"pack": pack} if pack != "off" else {}),
             **({"fidelity_epochs": k} if k is not None else {}), **universe_key(
        digest, u["params"], seed=u["seed"], epochs=training["epochs"], width=model["width"], depth=model["depth"],
        arch=model["arch"], base_batch=training["base_batch"], device=device.type)} for u, k in zip(universes, stops)]
    stacked = set()
    if pack == "auto":
        stacked = train_stacks(data, universes, model, training, runs, keys, log, clock, env, device, checkpoint_every)

    def read_final(path: Path, key: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        kept = read_saved(path, key, log, FINAL_FIELDS)
        return None if kept is None else (kept["state"], kept["record"])

    def train(slot: int, u: Mapping[str, Any], run: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        return train_universe(
            data, u["params"], seed=u["seed"], epochs=training["epochs"], width=model["width"],
            depth=model["depth"], device=training["device"], arch=model["arch"],
            base_batch=training["base_batch"], progress=Progress(u["id"], log, clock, slot),
            checkpoint_path=run / CHECKPOINT, checkpoint_every=checkpoint_every, log=log, digest=digest,
            stop_after=stops[slot],
        )

    def write(slot: int, state: Mapping[str, torch.Tensor]) -> None:
        atomic_write(model_paths[slot], lambda tmp: torch.save(state, tmp))
        if fidelity is not None:  # where a continuation resumes (a universe final at its low fidelity: none)
            checkpoint = runs[slot] / CHECKPOINT
            atomic_write(resume[0][slot], lambda tmp: shutil.copyfile(checkpoint, tmp) if checkpoint.exists()
                         else torch.save({"final": True}, tmp))

    # at a low fidelity, a finished universe keeps its checkpoint (what its resume file copies)
    keep = keep_final if fidelity is None else partial(keep_final, drop_checkpoint=False)
    train_slots(universes, record_paths, keys, log, kept_name=FINAL, read_kept=read_final, train=train,
                keep=keep, clear_runs=clear_runs if subset is None else lambda _: None, env=env, clock=clock, retries=retries, lane=lane,
                write=write, quiet=stacked,
                outcome=lambda r: f" ({r['failure']}: {r['error']})" if r["status"] == "failed" else "")


def train_continued_shard(
    data_path: str,
    universes: Sequence[Mapping[str, Any]],
    continuation: Mapping[str, Any],
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    low: Mapping[str, Sequence[str]],
    model_paths: Sequence[str],
    record_paths: Sequence[str],
    log: logging.Logger,
    retries: int = 1,
    checkpoint_every: int = 1,
) -> None:
    """Rule ``train_continued``: a shard's universes at full fidelity, as the round's
    continuation draw (``continuation``, :func:`multiverse.fidelity.continuation_round`)
    says. A continued universe resumes from its low-fidelity training state
    (``low["resume"]``, one a slot) and trains only the epochs left (on the CPU, bitwise
    as one trained to the end in one go); one whose low fidelity was final (diverged,
    failed, no epochs left) is its low-fidelity result (``low["models"]``,
    ``low["records"]``); one not continued is recorded ``not_continued`` (no weights).

    The continued universes' results stay in their ``run/`` folders after the shard is
    done (the study's only copy besides the outputs, which Snakemake deletes before a
    rerun): a rerun with a larger continuation budget keeps them (logged ``kept``) and
    trains only the universes newly continued."""
    universes, draws, trained = shard_draws(universes, continuation)
    for slot, (u, d) in enumerate(zip(universes, draws)):
        if slot in trained:
            checkpoint = run_dir(record_paths[slot]) / CHECKPOINT
            if not checkpoint.exists():  # a rerun of a killed job resumes from where it got to
                checkpoint.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(low["resume"][slot], checkpoint)
            continue
        if d["continued"]:  # its low fidelity is its full fidelity
            state = torch.load(low["models"][slot], weights_only=True)
            record = read_json(low["records"][slot])
            log.info("%s: final at its low fidelity (%s), not trained further", u["id"], record["status"])
        else:
            state, record = {}, not_continued_record(universe_fields(u), d, versions=versions(["torch", "numpy"]))
            log.info("%s: not continued (probability %.3f)", u["id"], d["probability"])
        atomic_write(model_paths[slot], lambda tmp, state=state: torch.save(state, tmp))
        write_json(record_paths[slot], record)
    if trained:
        train_shard(data_path, universes, model, training, model_paths, record_paths, log, retries=retries,
                    checkpoint_every=checkpoint_every, subset=trained)
