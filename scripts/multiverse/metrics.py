"""The metrics of a trained universe (rule ``metrics``): accuracy, loss and the
generalisation gap, and optionally OOD accuracy and adaptive sharpness.

The network is rebuilt with :func:`multiverse.nets.make_model` and evaluated on the
training device (``training.device``) in minibatches (:func:`multiverse.train.evaluate`):
the data stay on the CPU and only each minibatch moves, so memory does not grow with the
split.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Mapping, Sequence

import numpy as np

from multiverse.data import read_data
from multiverse.fidelity import NOT_CONTINUED
from multiverse.runtime import read_record, universe_fields, write_json

# torch is imported where a built-in model is evaluated: a user's training's metrics
# (:func:`recorded_metrics_shard`) need none.


def universe_metrics(
    data: Mapping[str, np.ndarray],
    state: Mapping[str, torch.Tensor],
    record: Mapping[str, Any],
    *,
    width: int,
    depth: int,
    arch: str = "mlp",
    sharpness: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> dict[str, float]:
    """Accuracy and loss on train, validation and test, and the generalisation gap; with
    an OOD split in ``data`` (``data.ood``) also ``ood_acc`` and ``ood_loss``, and with
    ``sharpness`` settings (``metrics.sharpness``) the adaptive ``sharpness``
    (:mod:`multiverse.sharpness`). The network runs on ``device`` (``cpu``, ``cuda`` or
    ``auto``, :func:`multiverse.runtime.resolve_device`).

    A diverged universe's network outputs NaN, so it predicts no better than
    chance: its accuracies are recorded as ``1 / n_classes`` and its losses (and its
    sharpness) as NaN. A failed universe (no trained model) gets NaN everywhere.
    """
    import torch  # deferred: only a built-in model's metrics need torch (the note above)

    # deferred: train loads torch
    from multiverse.train import as_tensors, evaluate, make_model, network, resolve_device

    splits = ("train", "val", "test") + (("ood",) if "X_ood" in data else ())
    if record["status"] in ("failed", NOT_CONTINUED):  # no trained model (NOT_CONTINUED: multiverse.fidelity)
        out = {f"{s}_{m}": math.nan for s in splits for m in ("acc", "loss")}
        out["gap"] = math.nan
        if sharpness is not None:
            out["sharpness"] = math.nan
        return out
    t, shape = as_tensors(data, torch.device("cpu"))
    width, depth, dropout = network(record.get("params") or {}, width, depth)
    model = make_model(t["X_train"].shape[1], record["n_classes"], width, depth, arch, shape, dropout)
    model.load_state_dict(state)
    model.to(resolve_device(device)).eval()
    out = {}
    for split in splits:
        acc, loss = evaluate(model, t[f"X_{split}"], t[f"y_{split}"])
        if record["status"] == "diverged" or not math.isfinite(loss):
            acc, loss = 1.0 / record["n_classes"], math.nan
        out[f"{split}_acc"], out[f"{split}_loss"] = acc, loss
    out["gap"] = out["train_acc"] - out["test_acc"]
    if sharpness is not None:
        from multiverse.sharpness import sharpness_metric  # deferred: sharpness loads torch

        out["sharpness"] = math.nan if math.isnan(out["train_loss"]) else sharpness_metric(model, t, sharpness)
    return out


def metrics_shard(
    data_path: str,
    model_paths: Sequence[str],
    record_paths: Sequence[str],
    model: Mapping[str, Any],
    out_paths: Sequence[str],
    log: logging.Logger,
    sharpness: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> None:
    """Write each universe's metrics record: its identity, outcome and :func:`universe_metrics`
    (``sharpness``: the ``metrics.sharpness`` settings, or None for no sharpness) on
    ``device`` (``training.device``; ``cuda`` without a GPU raises
    :class:`multiverse.runtime.DeviceUnavailable` before any universe is measured)."""
    import torch  # deferred: only a built-in model's metrics need torch (the note above)

    from multiverse.train import resolve_device  # deferred: train loads torch

    device = str(resolve_device(device, log))
    if device == "cuda":
        torch.use_deterministic_algorithms(True, warn_only=True)  # as in training
    data = read_data(data_path)
    for model_path, record_path, out in zip(model_paths, record_paths, out_paths):
        record = read_record(record_path, TRAIN_FIELDS)
        state = torch.load(model_path, weights_only=True)
        metrics = universe_metrics(data, state, record, width=model["width"], depth=model["depth"],
                                   arch=model["arch"], sharpness=sharpness, device=device)
        write_json(out, metrics_record(record, metrics))
        log.info("%s: %s", record["id"], metrics)


#: What the metrics step reads of every train record (:func:`multiverse.runtime.read_record`).
TRAIN_FIELDS = ("id", "round", "params", "status")


def metrics_record(record: Mapping[str, Any], metrics: Mapping[str, float]) -> dict[str, Any]:
    """A universe's metrics record: its identity and outcome from its train record, and ``metrics``."""
    keep = ("status", "failure", "error", "diverged_epoch", "epochs_run", "versions")
    return {**universe_fields(record), **{k: record.get(k) for k in keep}, "metrics": dict(metrics)}


def recorded_metrics_shard(record_paths: Sequence[str], out_paths: Sequence[str], log: logging.Logger) -> None:
    """Rule ``metrics`` for a user's training: its metrics were checked against their
    declarations when the universe trained (:mod:`multiverse.entrypoint`); written as the
    built-in trainer's are."""
    for record_path, out in zip(record_paths, out_paths):
        record = read_record(record_path, (*TRAIN_FIELDS, "metrics"))
        write_json(out, metrics_record(record, record["metrics"]))
        log.info("%s: %s", record["id"], record["metrics"])
