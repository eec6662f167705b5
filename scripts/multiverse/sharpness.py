"""Adaptive sharpness of a trained network (Andriushchenko et al. 2023, after Kwon et al.
2021 and Keskar et al. 2017).

The worst-case rise in training loss when every weight may move by at most ``rho``
times its own magnitude::

    S = max_{||delta / |w| ||_p <= rho} L(w + delta) - L(w)

estimated by ``steps`` of projected gradient ascent on ``eta = delta / |w|`` from
``eta = 0``, with step ``2 rho / steps`` (the sign of the gradient for ``p = inf``,
the normalised gradient for ``p = 2``), keeping the largest rise seen. Scaling by
``|w|`` makes it invariant to the rescalings of ReLU networks that change plain
sharpness without changing the function. Batch-norm statistics are frozen (eval mode)
and every weight and bias is perturbed, as in the paper's "all parameters" setting.

Deterministic: the data are the first ``samples`` training examples and ascent starts
at zero. The loss and its gradient are summed over passes of at most
:data:`SHARPNESS_BATCH` examples on the model's device, so memory does not grow with
``samples``; up to that many, one pass, as before.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

#: Examples per pass of the loss and its gradient: a gradient pass keeps every activation
#: (a CIFAR ResNet-18: about 7 MB per image), and the presets' 512 samples stay one pass.
SHARPNESS_BATCH = 512


def mean_loss(model: nn.Module, X: torch.Tensor, y: torch.Tensor, batch: int, backward: bool = False) -> float:
    """Mean cross-entropy of ``model`` on ``(X, y)`` in passes of at most ``batch`` rows
    (0: one) moved to the model's device; with ``backward`` its gradient is accumulated
    into the parameters' ``.grad``. Up to ``batch`` rows it is torch's mean of one pass."""
    device = next(model.parameters()).device
    n = len(y)
    if batch <= 0 or n <= batch:
        value = nn.functional.cross_entropy(model(X.to(device)), y.to(device))
        if backward:
            value.backward()
        return value.item()
    total = 0.0
    for i in range(0, n, batch):
        value = nn.functional.cross_entropy(model(X[i : i + batch].to(device)), y[i : i + batch].to(device),
                                            reduction="sum") / n
        if backward:
            value.backward()
        total += value.item()
    return total


def adaptive_sharpness(
    model: nn.Module, X: torch.Tensor, y: torch.Tensor, rho: float, norm: str, steps: int,
    batch: int = SHARPNESS_BATCH,
) -> float:
    """``S`` above for ``model`` on ``(X, y)`` (``X`` and ``y`` may stay on the CPU; passes
    of at most ``batch`` rows, see :func:`mean_loss`); the model's weights are left unchanged."""
    if norm not in ("linf", "l2"):
        raise ValueError(f"config key 'metrics.sharpness.norm': expected 'linf' or 'l2', got {norm!r}")
    model.eval()
    params = [p for p in model.parameters() if p.requires_grad]
    w0 = [p.detach().clone() for p in params]
    scale = [w.abs() for w in w0]
    eta = [torch.zeros_like(w) for w in w0]
    with torch.no_grad():
        base = mean_loss(model, X, y, batch)
    best, alpha = 0.0, 2.0 * rho / steps
    try:
        for _ in range(steps):
            with torch.no_grad():
                for p, w, s, e in zip(params, w0, scale, eta):
                    p.copy_(w + s * e)
            model.zero_grad(set_to_none=True)
            best = max(best, mean_loss(model, X, y, batch, backward=True) - base)
            with torch.no_grad():
                grads = [p.grad * s if p.grad is not None else torch.zeros_like(s) for p, s in zip(params, scale)]
                if norm == "linf":
                    for e, g in zip(eta, grads):
                        e.add_(alpha * g.sign()).clamp_(-rho, rho)
                else:
                    g_norm = torch.sqrt(sum((g**2).sum() for g in grads)).clamp_min(1e-12)
                    for e, g in zip(eta, grads):
                        e.add_(alpha * g / g_norm)
                    e_norm = torch.sqrt(sum((e**2).sum() for e in eta))
                    if e_norm > rho:
                        for e in eta:
                            e.mul_(rho / e_norm)
        with torch.no_grad():
            for p, w, s, e in zip(params, w0, scale, eta):
                p.copy_(w + s * e)
            best = max(best, mean_loss(model, X, y, batch) - base)
    finally:
        with torch.no_grad():
            for p, w in zip(params, w0):
                p.copy_(w)
        model.zero_grad(set_to_none=True)
    return best


def sharpness_metric(model: nn.Module, data: Mapping[str, torch.Tensor], settings: Mapping) -> float:
    """:func:`adaptive_sharpness` on the first ``samples`` training examples, with the
    ``metrics.sharpness`` settings (every key: the schema's defaults are filled in)."""
    n = int(settings["samples"])
    return adaptive_sharpness(model, data["X_train"][:n], data["y_train"][:n], float(settings["rho"]),
                              settings["norm"], int(settings["steps"]))
