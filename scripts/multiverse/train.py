"""Training one universe with torch (its metrics: :mod:`multiverse.metrics`).

Training is deterministic on the CPU: the weights come from ``torch.manual_seed(seed)``
and the minibatch order from a generator seeded with the same seed, so a universe's
result does not depend on which other universes share its process.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from multiverse.runtime import failed_record, universe_fields  # noqa: F401  (re-exported)

# Momentum of the "momentum" optimizer (SGD with heavy-ball momentum) when the space has
# no ``momentum`` dimension, and the eps of adam/rmsprop without an ``eps`` one (torch's).
DEFAULT_MOMENTUM = 0.9
DEFAULT_EPS = 1e-8


def resolve_device(device: str, log: logging.Logger | None = None) -> torch.device:
    """``cpu``, ``cuda`` or ``auto`` as a torch device (:func:`multiverse.runtime.resolve_device`:
    ``cuda`` without a GPU raises :class:`multiverse.runtime.DeviceUnavailable`)."""
    from multiverse.runtime import resolve_device as resolve

    return torch.device(resolve(device, log))


#: Network families (``model.arch``). All take flat features; ``cnn`` and ``resnet18``
#: reshape them to the dataset's image shape (:data:`multiverse.data.IMAGE_SHAPES`).
ARCHS = ("mlp", "cnn", "resnet18")
#: How ``lr_scaling`` ties the learning rate to the batch (Goyal et al. 2017: linear;
#: Hoffer et al. 2017 / Krizhevsky 2014: square root): lr x (batch / base_batch) ** power.
LR_SCALING = {"none": 0.0, "linear": 1.0, "sqrt": 0.5}
#: The batch at which ``lr`` is the learning rate itself under a scaling rule.
DEFAULT_BASE_BATCH = 128


def make_model(
    n_in: int, n_classes: int, width: int, depth: int, arch: str = "mlp", shape: Sequence[int] | None = None,
    dropout: float | None = None,
) -> nn.Module:
    """The universe's network (``dropout``: the drop probability of a ``dropout``
    dimension, after each hidden layer of the MLP and before the last layer of the CNN
    and ResNet; None: no dropout layer).

    - ``mlp``: ``depth`` hidden ReLU layers of ``width`` units.
    - ``cnn``: a small CNN for image data: ``depth`` blocks of 3x3 convolution (``width``
      channels, doubling per block), ReLU and 2x2 max-pooling while the image is at least
      2 pixels wide, then global average pooling and a linear layer.
    - ``resnet18``: the CIFAR variant of ResNet-18 (He et al. 2016; 3x3 stem, no max-pool,
      four stages of two basic blocks) with ``width`` base channels (64 is the usual
      network, 11.2 M parameters for 10 classes); ``depth`` is not used.
      Hand-written because torchvision does not install beside the pinned torch 2.13.0
      CPU build here (PyPI's torchvision 0.28.0 fails to import: "operator
      torchvision::nms does not exist"; a matching pair is torch 2.14.1's 5.5 GB CUDA build).
    """
    if arch == "mlp":
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(n_in if i == 0 else width, width), nn.ReLU()]
            if dropout is not None:
                layers.append(nn.Dropout(dropout))
        layers.append(nn.Linear(width if depth else n_in, n_classes))
        return nn.Sequential(*layers)
    if shape is None or math.prod(shape) != n_in:
        raise ValueError(f"model.arch {arch!r} needs the images' (channels, height, width), got {shape} for {n_in} features")
    c, h, _ = (int(v) for v in shape)
    if arch == "cnn":
        layers = [nn.Unflatten(1, tuple(int(v) for v in shape))]
        for i in range(depth):
            out = width * 2**i
            layers += [nn.Conv2d(c, out, 3, padding=1), nn.ReLU()]
            if h >= 2:
                layers.append(nn.MaxPool2d(2))
                h //= 2
            c = out
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        layers += [nn.Dropout(dropout)] if dropout is not None else []
        layers.append(nn.Linear(c, n_classes))
        return nn.Sequential(*layers)
    if arch == "resnet18":
        return nn.Sequential(nn.Unflatten(1, tuple(int(v) for v in shape)), ResNet18(c, n_classes, width, dropout))
    raise ValueError(f"config key 'model.arch': expected one of {list(ARCHS)}, got {arch!r}")


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an identity (or 1x1 projection) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out),
        )
        self.shortcut = (nn.Identity() if stride == 1 and c_in == c_out else
                         nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for small images (see :func:`make_model`)."""

    def __init__(self, channels: int, n_classes: int, width: int = 64, dropout: float | None = None):
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
        c = width
        for stage in range(4):
            out = width * 2**stage
            layers += [BasicBlock(c, out, 1 if stage == 0 else 2), BasicBlock(out, out, 1)]
            c = out
        head = [nn.Dropout(dropout)] if dropout is not None else []
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), *head)
        self.fc = nn.Linear(c, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))


def network(params: Mapping[str, Any], width: int, depth: int) -> tuple[int, int, float | None]:
    """A universe's ``(width, depth, dropout)``: its ``width``, ``depth`` and ``dropout``
    dimensions where the space has them, else ``model.width``, ``model.depth`` and no dropout."""
    return (int(params["width"]) if params.get("width") is not None else width,
            int(params["depth"]) if params.get("depth") is not None else depth,
            float(params["dropout"]) if params.get("dropout") is not None else None)


def scaled_lr(lr: float, batch_size: int, rule: str | None, base_batch: int = DEFAULT_BASE_BATCH) -> float:
    """The learning rate a universe trains with: ``lr`` scaled to its batch by ``rule``
    (:data:`LR_SCALING`; None when the space has no ``lr_scaling`` dimension)."""
    return lr * (batch_size / base_batch) ** LR_SCALING[rule or "none"]


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


@torch.no_grad()
def evaluate(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``model`` on ``X``, ``y``."""
    logits = model(X)
    loss = nn.functional.cross_entropy(logits, y).item()
    acc = (logits.argmax(dim=1) == y).double().mean().item()
    return acc, loss


def as_tensors(data: Mapping[str, np.ndarray], device: torch.device) -> tuple[dict[str, torch.Tensor], tuple | None]:
    """The splits as tensors on ``device``, and the images' shape (None if not recorded)."""
    shape = tuple(int(v) for v in data["shape"]) if "shape" in data else None
    return {k: torch.as_tensor(v, device=device) for k, v in data.items() if k != "shape"}, shape


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
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Train the universe ``params`` and return ``(state_dict, record)``.

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
    """
    dev = resolve_device(device)
    if dev.type == "cuda":
        # The CPU kernels used here are deterministic already (tests/test_train.py checks
        # bitwise-equal weights); the global switch costs seconds per process on the CPU.
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(seed)
    t, shape = as_tensors(data, dev)
    n_classes = int(max(t["y_train"].max(), t["y_val"].max(), t["y_test"].max()).item()) + 1
    width, depth, dropout = network(params, width, depth)
    model = make_model(t["X_train"].shape[1], n_classes, width, depth, arch, shape, dropout).to(dev)
    n, bs = len(t["y_train"]), int(params["batch_size"])
    lr = scaled_lr(params["lr"], bs, params.get("lr_scaling"), base_batch)
    opt = make_optimizer(
        params["optimizer"], model.parameters(), lr, params["weight_decay"], params.get("momentum"), params.get("eps"),
    )
    per_epoch = math.ceil(n / bs)
    steps = int(params["steps"]) if params.get("steps") is not None else int(params.get("epochs") or epochs) * per_epoch
    warmup = round(float(params.get("warmup_epochs") or 0) * per_epoch)
    schedule = torch.optim.lr_scheduler.LinearLR(opt, 1.0 / warmup, 1.0, warmup) if warmup > 0 else None
    gen = torch.Generator().manual_seed(seed)
    history: list[dict[str, float]] = []
    status, diverged_epoch, step = "ok", None, 0
    start = time.perf_counter()
    for epoch in range(1, math.ceil(steps / per_epoch) + 1):
        model.train()
        order = torch.randperm(n, generator=gen).to(dev)
        loss_sum, correct, seen = 0.0, 0, 0
        for i in range(0, n, bs):
            if step == steps:
                break
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
        if progress is not None:
            progress(**history[-1])
        if not math.isfinite(val_loss):
            status, diverged_epoch = "diverged", epoch
            break
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
    }
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return state, record


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
    from multiverse.runtime import DeviceUnavailable, atomic_write, versions, write_json

    resolve_device(training["device"], log)  # no GPU where one is asked for: stop before any universe
    data = read_data(data_path)
    universes = sorted(universes, key=lambda u: u["slot"])
    if [u["slot"] for u in universes] != list(range(len(model_paths))):
        raise ValueError(f"shard holds slots {[u['slot'] for u in universes]}, expected {len(model_paths)}")
    from multiverse.entrypoint import Progress

    env = versions(["torch", "numpy"])
    for u, model_path, record_path in zip(universes, model_paths, record_paths):
        for attempt in range(1, retries + 2):
            try:
                state, record = train_universe(
                    data, u["params"], seed=u["seed"], epochs=training["epochs"], width=model["width"],
                    depth=model["depth"], device=training["device"], arch=model["arch"],
                    base_batch=training["base_batch"], progress=Progress(u["id"], log),
                )
                break
            except DeviceUnavailable:  # the node's fault, not the universe's
                raise
            except Exception as err:  # a universe's own failure is data, not a crash
                log.exception("universe %s failed (attempt %d of %d)", u["id"], attempt, retries + 1)
                state, record = {}, failed_record(err)
        record = {**universe_fields(u), **record, "attempts": attempt, "versions": env}
        atomic_write(model_path, lambda tmp: torch.save(state, tmp))
        write_json(record_path, record)
        log.info("%s %s in %.2fs: %s", u["id"], u["params"], record["train_seconds"], record["status"])
