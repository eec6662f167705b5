"""The built-in trainer's networks and the arithmetic of a universe's training plan.

The MLP, CNN and ResNet-18 a universe trains (:func:`make_model`, :func:`network`), the
learning rate its ``lr_scaling`` gives (:func:`scaled_lr`), its budget in optimizer steps
(:func:`budget`) and the splits as tensors (:func:`as_tensors`): shared by the sequential
trainer (:mod:`multiverse.train`) and the packed one (:mod:`multiverse.packed`), so that
both build the same universe from the same choices.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

# Momentum of the "momentum" optimizer (SGD with heavy-ball momentum) when the space has
# no ``momentum`` dimension, and the eps of adam/rmsprop without an ``eps`` one (torch's).
DEFAULT_MOMENTUM = 0.9
DEFAULT_EPS = 1e-8


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


def as_tensors(data: Mapping[str, np.ndarray], device: torch.device,
               dtype: torch.dtype | None = None) -> tuple[dict[str, torch.Tensor], tuple | None]:
    """The splits as tensors on ``device`` (the features as ``dtype`` where given: the
    equivalence tests' float64), and the images' shape (None if not recorded)."""
    shape = tuple(int(v) for v in data["shape"]) if "shape" in data else None
    t = {k: torch.as_tensor(v, device=device) for k, v in data.items() if k != "shape"}
    if dtype is not None:
        t = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in t.items()}
    return t, shape


def count_classes(t: Mapping[str, torch.Tensor]) -> int:
    """The number of classes: one more than the largest label of any split."""
    return int(max(t["y_train"].max(), t["y_val"].max(), t["y_test"].max()).item()) + 1


def budget(params: Mapping[str, Any], epochs: int, n_train: int) -> tuple[int, int]:
    """A universe's ``(optimizer steps per epoch, optimizer steps)``: ``epochs`` (or its own
    ``epochs`` dimension) of ``ceil(n_train / batch_size)`` steps, or its ``steps`` dimension."""
    per_epoch = math.ceil(n_train / int(params["batch_size"]))
    steps = int(params["steps"]) if params.get("steps") is not None else int(params.get("epochs") or epochs) * per_epoch
    return per_epoch, steps
