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
at zero.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn

def adaptive_sharpness(model: nn.Module, X: torch.Tensor, y: torch.Tensor, rho: float, norm: str, steps: int) -> float:
    """``S`` above for ``model`` on ``(X, y)``; the model's weights are left unchanged."""
    if norm not in ("linf", "l2"):
        raise ValueError(f"config key 'metrics.sharpness.norm': expected 'linf' or 'l2', got {norm!r}")
    model.eval()
    params = [p for p in model.parameters() if p.requires_grad]
    w0 = [p.detach().clone() for p in params]
    scale = [w.abs() for w in w0]
    eta = [torch.zeros_like(w) for w in w0]
    loss = nn.functional.cross_entropy
    with torch.no_grad():
        base = loss(model(X), y).item()
    best, alpha = 0.0, 2.0 * rho / steps
    try:
        for _ in range(steps):
            with torch.no_grad():
                for p, w, s, e in zip(params, w0, scale, eta):
                    p.copy_(w + s * e)
            model.zero_grad(set_to_none=True)
            value = loss(model(X), y)
            best = max(best, value.item() - base)
            value.backward()
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
            best = max(best, loss(model(X), y).item() - base)
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
