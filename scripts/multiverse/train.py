"""Training one universe with torch, and the metrics of a trained universe.

Training is deterministic on the CPU: the weights come from ``torch.manual_seed(seed)``
and the minibatch order from a generator seeded with the same seed, so a universe's
result does not depend on which other universes share its process.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

# Momentum of the "momentum" optimizer (SGD with heavy-ball momentum) when the space has
# no ``momentum`` dimension, and the eps of adam/rmsprop without an ``eps`` one (torch's).
DEFAULT_MOMENTUM = 0.9
DEFAULT_EPS = 1e-8


def resolve_device(device: str) -> torch.device:
    """``cpu``, ``cuda`` or ``auto`` (CUDA when a GPU is present)."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("config key 'training.device' is 'cuda' but no CUDA device is available")
    return torch.device(device)


def make_model(n_in: int, n_classes: int, width: int, depth: int) -> nn.Sequential:
    """An MLP with ``depth`` hidden ReLU layers of ``width`` units."""
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(n_in if i == 0 else width, width), nn.ReLU()]
    layers.append(nn.Linear(width if depth else n_in, n_classes))
    return nn.Sequential(*layers)


def make_optimizer(
    name: str, params, lr: float, weight_decay: float, momentum: float | None = None, eps: float | None = None
) -> torch.optim.Optimizer:
    """The universe's optimizer. ``momentum`` is used by ``momentum`` alone and ``eps`` by
    ``adam`` and ``rmsprop`` alone (None: the defaults), as in a conditional space."""
    momentum = DEFAULT_MOMENTUM if momentum is None else momentum
    eps = DEFAULT_EPS if eps is None else eps
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, eps=eps)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, weight_decay=weight_decay, eps=eps)
    raise ValueError(f"unknown optimizer {name!r}")


@torch.no_grad()
def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``model`` on ``X``, ``y``."""
    logits = model(X)
    loss = nn.functional.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).double().mean().item()
    return acc, loss


def _tensors(data: Mapping[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v, device=device) for k, v in data.items()}


def train_universe(
    data: Mapping[str, np.ndarray],
    params: Mapping[str, Any],
    *,
    seed: int,
    epochs: int,
    width: int,
    depth: int,
    device: str = "cpu",
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Train the universe ``params`` and return ``(state_dict, record)``.

    ``record`` holds the per-epoch ``history`` (train loss/accuracy averaged over the
    epoch's minibatches, validation loss/accuracy after the epoch) and a ``status``:
    ``ok``, or ``diverged`` when a loss turned NaN or infinite (training stops there;
    the universe stays part of the multiverse).
    """
    dev = resolve_device(device)
    if dev.type == "cuda":
        # The CPU kernels used here are deterministic already (tests/test_train.py checks
        # bitwise-equal weights); the global switch costs 1.4 s per process on the CPU.
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(seed)
    t = _tensors(data, dev)
    n_classes = int(max(t["y_train"].max(), t["y_val"].max(), t["y_test"].max()).item()) + 1
    model = make_model(t["X_train"].shape[1], n_classes, width, depth).to(dev)
    opt = make_optimizer(
        params["optimizer"], model.parameters(), params["lr"], params["weight_decay"],
        params.get("momentum"), params.get("eps"),
    )
    gen = torch.Generator().manual_seed(seed)
    n, bs = len(t["y_train"]), int(params["batch_size"])
    history: list[dict[str, float]] = []
    status, diverged_epoch = "ok", None
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(n, generator=gen).to(dev)
        loss_sum, correct = 0.0, 0
        for i in range(0, n, bs):
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
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(1) == yb).sum().item()
        if status == "diverged":
            break
        model.eval()
        val_acc, val_loss = evaluate(model, t["X_val"], t["y_val"])
        history.append(
            {"epoch": epoch, "train_loss": loss_sum / n, "train_acc": correct / n,
             "val_loss": val_loss, "val_acc": val_acc}
        )
        if not math.isfinite(val_loss):
            status, diverged_epoch = "diverged", epoch
            break
    record = {
        "status": status,
        "diverged_epoch": diverged_epoch,
        "epochs_run": len(history),
        "n_classes": n_classes,
        "history": history,
        "train_seconds": time.perf_counter() - start,
        "device": str(dev),
    }
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return state, record


def universe_metrics(
    data: Mapping[str, np.ndarray],
    state: Mapping[str, torch.Tensor],
    record: Mapping[str, Any],
    *,
    width: int,
    depth: int,
) -> dict[str, float]:
    """Accuracy and loss on train, validation and test, and the generalisation gap.

    A diverged universe's network outputs NaN, so it predicts no better than
    chance: its accuracies are recorded as ``1 / n_classes`` and its losses as NaN.
    A failed universe (no trained model) gets NaN everywhere.
    """
    if record["status"] == "failed":
        out = {f"{s}_{m}": math.nan for s in ("train", "val", "test") for m in ("acc", "loss")}
        out["gap"] = math.nan
        return out
    t = _tensors(data, torch.device("cpu"))
    model = make_model(t["X_train"].shape[1], record["n_classes"], width, depth)
    model.load_state_dict(state)
    model.eval()
    out = {}
    for split in ("train", "val", "test"):
        acc, loss = evaluate(model, t[f"X_{split}"], t[f"y_{split}"])
        if record["status"] == "diverged" or not math.isfinite(loss):
            acc, loss = 1.0 / record["n_classes"], math.nan
        out[f"{split}_acc"], out[f"{split}_loss"] = acc, loss
    out["gap"] = out["train_acc"] - out["test_acc"]
    return out


def failed_record(error: BaseException) -> dict[str, Any]:
    """The record of a universe whose training raised: kept as data, not a crash."""
    return {
        "status": "failed",
        "error": f"{type(error).__name__}: {error}",
        "diverged_epoch": None,
        "epochs_run": 0,
        "history": [],
        "train_seconds": 0.0,
    }


def _universe_fields(universe: Mapping[str, Any]) -> dict[str, Any]:
    fields = ("id", "round", "index", "shard", "slot", "replicate", "seed", "replicate_of", "params")
    return {k: universe.get(k, 0 if k == "replicate" else None) for k in fields}


def train_shard(
    data_path: str,
    universes: Sequence[Mapping[str, Any]],
    model: Mapping[str, Any],
    training: Mapping[str, Any],
    model_paths: Sequence[str],
    record_paths: Sequence[str],
    log: logging.Logger,
    retries: int = 1,
) -> None:
    """Train each universe of a shard and write its weights and record (slot order).

    A universe that raises is tried ``retries`` more times, then recorded as ``failed``
    with its error; one whose loss turns non-finite is ``diverged``. Neither stops the
    shard. (The rule's own ``retries`` covers a job whose process dies.)
    """
    from multiverse.data import read_data
    from multiverse.runtime import atomic_write, versions, write_json

    data = read_data(data_path)
    universes = sorted(universes, key=lambda u: u["slot"])
    if [u["slot"] for u in universes] != list(range(len(model_paths))):
        raise ValueError(f"shard holds slots {[u['slot'] for u in universes]}, expected {len(model_paths)}")
    env = versions(["torch", "numpy"])
    for u, model_path, record_path in zip(universes, model_paths, record_paths):
        for attempt in range(1, retries + 2):
            try:
                state, record = train_universe(
                    data, u["params"], seed=u["seed"], epochs=training["epochs"], width=model["width"],
                    depth=model["depth"], device=training.get("device") or "cpu",
                )
                break
            except Exception as err:  # a universe's own failure is data, not a crash
                log.exception("universe %s failed (attempt %d of %d)", u["id"], attempt, retries + 1)
                state, record = {}, failed_record(err)
        record = {**_universe_fields(u), **record, "attempts": attempt, "versions": env}
        atomic_write(model_path, lambda tmp: torch.save(state, tmp))
        write_json(record_path, record)
        log.info("%s %s in %.2fs: %s", u["id"], u["params"], record["train_seconds"], record["status"])


def metrics_shard(
    data_path: str,
    model_paths: Sequence[str],
    record_paths: Sequence[str],
    model: Mapping[str, Any],
    out_paths: Sequence[str],
    log: logging.Logger,
) -> None:
    """Write each universe's metrics record: its identity, outcome and :func:`universe_metrics`."""
    from multiverse.data import read_data
    from multiverse.runtime import read_json, write_json

    data = read_data(data_path)
    for model_path, record_path, out in zip(model_paths, record_paths, out_paths):
        record = read_json(record_path)
        state = torch.load(model_path, weights_only=True)
        metrics = universe_metrics(data, state, record, width=model["width"], depth=model["depth"])
        keep = ("status", "error", "diverged_epoch", "epochs_run", "versions")
        write_json(out, {**_universe_fields(record), **{k: record.get(k) for k in keep}, "metrics": metrics})
        log.info("%s: %s", record["id"], metrics)
