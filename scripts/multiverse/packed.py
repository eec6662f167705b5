"""Packed training: many small MLP universes trained as one stacked ensemble.

A multiverse is many small trainings that differ only in their choices. Trained one at a
time, a small MLP's optimizer step is fixed overhead (about 1 ms of Python and kernel
launches for a few microseconds of arithmetic), on a CPU and even more on a GPU. Here
the universes of a *stack* keep their own parameters with a leading universe dimension
(``K x out x in``); one batched matmul (:func:`torch.baddbmm`) runs every universe's
layer at once, and each optimizer step is a few elementwise operations over the whole
stack, with every choice still per universe: optimizer (``sgd``, ``momentum``, ``adam``,
``adamw``, ``rmsprop``, as :func:`multiverse.train.make_optimizer` builds them in
torch), lr (with its ``lr_scaling`` and linear warm-up), weight decay, momentum, eps,
batch size, its budget in epochs or steps, and its seed. This is the horizontal fusion
of HFTA (Wang et al., MLSys 2021), written for our trainer; ``torch.func``'s
``stack_module_state``/``vmap`` would give the forward pass but not the per-universe
optimizers, whose update this module writes from torch's own formulas (``torch.optim``
docs: SGD, Adam, AdamW, RMSprop), so that in float64 a packed universe's weights equal
its sequential twin's (:func:`multiverse.train.train_universe`) to rounding.

What stays exactly as in the sequential trainer: each universe's initial weights
(``torch.manual_seed(seed)``, then :func:`multiverse.train.make_model`), its minibatch
order (a generator seeded with its seed, one ``randperm`` per epoch), its per-epoch
history and its divergence rule (a non-finite minibatch loss stops it before the
update; so does a non-finite validation loss). Divergence stops one universe, not its
stack: its parameters and optimizer state are frozen from that step on.

Batch sizes: universes of a stack step in lockstep. Each epoch has as many lockstep
steps as its universe with the most minibatches; a universe with fewer (a larger batch)
is masked for the rest of the epoch, and a minibatch smaller than the stack's largest
is padded and masked out of its loss. :func:`stacks` therefore groups universes whose
batch sizes lie within :data:`BATCH_RATIO` of each other (and that share width and
depth), so that little of the lockstep is idle.

The per-universe bookkeeping (Adam's bias corrections, the warm-up factor) is computed
in float64 on the host and cast only when applied: a float32 bias correction was
measured to move Adam's weights by 0.1 (issue 32).

Not here: dropout (its masks come from torch's global generator, which a stack cannot
share with the sequential order), the CNN and ResNet architectures, checkpoints inside
a stack. :func:`packable` says which universes qualify; the rest train sequentially.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from multiverse.train import (DEFAULT_BASE_BATCH, DEFAULT_EPS, DEFAULT_MOMENTUM, as_tensors, budget, make_model,
                              network, scaled_lr)

#: Largest ratio of batch sizes inside one stack: the lockstep idles a universe for at
#: most 1 - 1/BATCH_RATIO of an epoch's steps (the probe of issue 32: padding everyone
#: to the largest batch gave no gain; buckets within 1.4x gave 2.8-3.2x).
BATCH_RATIO = 1.4
#: Adam's and RMSprop's fixed coefficients, torch's defaults (as make_optimizer uses them).
BETAS, ALPHA = (0.9, 0.999), 0.99
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "rmsprop")


def packable(params: Mapping[str, Any], arch: str) -> bool:
    """Whether a universe can train in a stack: an MLP without dropout, with one of
    :data:`OPTIMIZERS`."""
    return arch == "mlp" and params.get("dropout") is None and params.get("optimizer") in OPTIMIZERS


def stacks(universes: Sequence[Mapping[str, Any]], width: int, depth: int, max_size: int = 64) -> list[list[int]]:
    """Indices of ``universes`` (each ``{"params": ...}``) grouped into stacks: the same
    network (width, depth) and batch sizes within :data:`BATCH_RATIO`, at most
    ``max_size`` each, in order of batch size (so neighbours share a stack)."""
    by_net: dict[tuple, list[int]] = {}
    for i, u in enumerate(universes):
        w, d, _ = network(u["params"], width, depth)
        by_net.setdefault((w, d), []).append(i)
    out = []
    for idx in by_net.values():
        idx = sorted(idx, key=lambda i: (int(universes[i]["params"]["batch_size"]), i))
        cur: list[int] = []
        for i in idx:
            bs = int(universes[i]["params"]["batch_size"])
            if cur and (bs > BATCH_RATIO * int(universes[cur[0]]["params"]["batch_size"]) or len(cur) == max_size):
                out.append(cur)
                cur = []
            cur.append(i)
        if cur:
            out.append(cur)
    return out


class Stack(nn.Module):
    """``K`` MLPs of one shape as stacked parameters: ``weights[l]`` is ``K x out x in``,
    ``biases[l]`` ``K x out``, initialised from each universe's own ``make_model``."""

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        linears = [[m for m in model if isinstance(m, nn.Linear)] for model in models]
        self.weights = nn.ParameterList([nn.Parameter(torch.stack([ls[j].weight.detach() for ls in linears]))
                                         for j in range(len(linears[0]))])
        self.biases = nn.ParameterList([nn.Parameter(torch.stack([ls[j].bias.detach() for ls in linears]))
                                        for j in range(len(linears[0]))])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``K x B x features`` -> ``K x B x classes``."""
        last = len(self.weights) - 1
        for j, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
            if j < last:
                x = torch.relu(x)
        return x

    def state_dict_of(self, k: int) -> dict[str, torch.Tensor]:
        """Universe ``k``'s weights under the names of its sequential ``nn.Sequential``
        (``0.weight``, ``0.bias``, ``2.weight``, ...)."""
        return {name: t for j, (w, b) in enumerate(zip(self.weights, self.biases))
                for name, t in ((f"{2 * j}.weight", w[k].detach().cpu().clone()),
                                (f"{2 * j}.bias", b[k].detach().cpu().clone()))}


class StackOptimizer:
    """Every universe's own optimizer over a :class:`Stack`'s parameters, as elementwise
    updates with per-universe coefficients (each a ``K``-vector broadcast over a
    parameter's other dimensions). Follows torch's single-tensor implementations:

    - ``sgd``: ``p -= lr (g + wd p)``; ``momentum``: ``buf = mu buf + (g + wd p)``,
      ``p -= lr buf`` (torch's first step sets ``buf`` to the gradient: the same, as
      ``buf`` starts at 0);
    - ``adam``: L2 weight decay into the gradient, ``m = lerp(m, g, 1 - b1)``,
      ``v = b2 v + (1 - b2) g^2``, ``p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)``;
      ``adamw``: the same with decoupled decay ``p *= 1 - lr wd`` first;
    - ``rmsprop``: ``s = a s + (1 - a) g^2``, ``p -= lr g / (sqrt(s) + eps)``.

    ``step(active, lr_factor)``: only universes with ``active`` move (their step counts
    too); ``lr_factor`` is each one's warm-up factor. Bias corrections and learning rates
    are float64 on the host, cast when applied.
    """

    def __init__(self, params: Sequence[torch.Tensor], kinds: Sequence[str], lr: Sequence[float],
                 weight_decay: Sequence[float], momentum: Sequence[float], eps: Sequence[float]):
        self.params = list(params)
        self.kinds = list(kinds)
        k = len(self.kinds)
        self.lr = np.asarray(lr, dtype=np.float64)
        wd = np.asarray(weight_decay, dtype=np.float64)
        is_ = {name: np.array([kd == name for kd in self.kinds]) for name in OPTIMIZERS}
        self.adaptive = is_["adam"] | is_["adamw"]
        self.rms = is_["rmsprop"]
        self.heavy = is_["momentum"]
        self.decoupled_wd = np.where(is_["adamw"], wd, 0.0)
        self.l2 = np.where(is_["adamw"], 0.0, wd)
        self.mu = np.where(self.heavy, np.asarray(momentum, dtype=np.float64), 0.0)
        self.eps = np.asarray(eps, dtype=np.float64)
        self.t = np.zeros(k, dtype=np.int64)
        self.state = [{"buf": torch.zeros_like(p) if self.heavy.any() else None,
                       "m": torch.zeros_like(p) if self.adaptive.any() else None,
                       "v": torch.zeros_like(p) if (self.adaptive | self.rms).any() else None} for p in self.params]

    def _vec(self, x: np.ndarray, like: torch.Tensor) -> torch.Tensor:
        """A ``K``-vector as a tensor broadcasting over ``like``'s trailing dimensions."""
        return torch.as_tensor(x, dtype=like.dtype, device=like.device).view(-1, *([1] * (like.dim() - 1)))

    @torch.no_grad()
    def step(self, active: np.ndarray, lr_factor: np.ndarray | None = None) -> None:
        self.t = self.t + active
        t = np.maximum(self.t, 1).astype(np.float64)
        lr = self.lr * (1.0 if lr_factor is None else lr_factor)
        b1, b2 = BETAS
        bc1, bc2_sqrt = 1 - b1**t, np.sqrt(1 - b2**t)
        # the update's per-universe coefficients (float64 here; cast when applied)
        adapt_scale = np.where(self.adaptive, lr / bc1, 0.0)
        plain_scale = np.where(self.adaptive | self.rms, 0.0, lr)
        rms_scale = np.where(self.rms, lr, 0.0)
        decay = 1 - lr * self.decoupled_wd
        for p, st in zip(self.params, self.state):
            on = self._vec(active.astype(np.float64), p).bool()
            g = p.grad
            g = torch.where(on, g, torch.zeros_like(g))  # a masked universe's gradient may be NaN
            if self.l2.any():
                g = g + self._vec(self.l2, p) * p
            new = p * self._vec(decay, p) if self.decoupled_wd.any() else p.clone()
            if st["buf"] is not None:
                buf = self._vec(self.mu, p) * st["buf"] + g
                st["buf"] = torch.where(on, buf, st["buf"])
                direction = torch.where(self._vec(self.heavy, p).bool(), st["buf"], g)
            else:
                direction = g
            new = new - self._vec(plain_scale, p) * direction
            if st["m"] is not None:
                st["m"] = torch.where(on, torch.lerp(st["m"], g, 1 - b1), st["m"])
            if st["v"] is not None:  # both coefficients from float64, as torch's value=1 - beta2
                a = np.where(self.rms, ALPHA, b2)
                st["v"] = torch.where(on, st["v"] * self._vec(a, p) + self._vec(1 - a, p) * g * g, st["v"])
            if self.adaptive.any():
                denom = st["v"].sqrt() / self._vec(bc2_sqrt, p) + self._vec(self.eps, p)
                new = new - self._vec(adapt_scale, p) * st["m"] / denom
            if self.rms.any():
                new = new - self._vec(rms_scale, p) * g / (st["v"].sqrt() + self._vec(self.eps, p))
            p.copy_(torch.where(on, new, p))


def _warmup_factor(step: np.ndarray, warmup: np.ndarray) -> np.ndarray:
    """torch's ``LinearLR(start_factor=1/warmup, end_factor=1, total_iters=warmup)``
    after ``step`` steps of a universe, in closed form (float64): ``1/w + (1 - 1/w) s/w``
    for ``s < w``, else 1."""
    w = np.maximum(warmup, 1).astype(np.float64)
    s = np.minimum(step, w)
    return np.where(warmup > 0, 1 / w + (1 - 1 / w) * s / w, 1.0)


def train_stack(
    data: Mapping[str, np.ndarray],
    params: Sequence[Mapping[str, Any]],
    seeds: Sequence[int],
    *,
    epochs: int,
    width: int,
    depth: int,
    device: str | torch.device = "cpu",
    base_batch: int = DEFAULT_BASE_BATCH,
    dtype: torch.dtype | None = None,
) -> list[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
    """Train universes ``params`` (with ``seeds``; each :func:`packable`, one network
    shape) as one stack and return each one's ``(state_dict, record)`` as
    :func:`multiverse.train.train_universe` does (``dtype``: the weights' and data's
    floating type, float32 by default, float64 in the equivalence tests).

    The record holds the same fields as a sequential one, plus ``pack_size`` (the
    stack's universes); ``train_seconds`` is the stack's time divided among them.
    """
    dev = torch.device(device)
    k = len(params)
    t, shape = as_tensors(data, dev)
    if dtype is not None:
        t = {name: (v.to(dtype) if v.is_floating_point() else v) for name, v in t.items()}
    n_classes = int(max(t["y_train"].max(), t["y_val"].max(), t["y_test"].max()).item()) + 1
    nets = {network(p, width, depth) for p in params}
    if len(nets) != 1:
        raise ValueError(f"a stack shares one network (width, depth, dropout), got {sorted(nets, key=str)}")
    (w, d, _), = nets
    models = []
    for seed in seeds:  # each universe's own initial weights, as train_universe draws them
        torch.manual_seed(int(seed))
        models.append(make_model(t["X_train"].shape[1], n_classes, w, d, "mlp", shape, None))
    stack = Stack(models).to(dev)
    if dtype is not None:
        stack = stack.to(dtype)
    n = len(t["y_train"])
    bs = np.array([int(p["batch_size"]) for p in params])
    lrs = [scaled_lr(p["lr"], int(p["batch_size"]), p.get("lr_scaling"), base_batch) for p in params]
    opt = StackOptimizer(
        list(stack.parameters()), [p["optimizer"] for p in params], lrs, [float(p["weight_decay"]) for p in params],
        [DEFAULT_MOMENTUM if p.get("momentum") is None else float(p["momentum"]) for p in params],
        [DEFAULT_EPS if p.get("eps") is None else float(p["eps"]) for p in params])
    plans = [budget(p, epochs, n) for p in params]
    per_epoch = np.array([pe for pe, _ in plans])
    total = np.array([s for _, s in plans])
    warmup = np.array([round(float(p.get("warmup_epochs") or 0) * pe) for p, (pe, _) in zip(params, plans)])
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    step = np.zeros(k, dtype=np.int64)
    alive = np.ones(k, dtype=bool)
    diverged_epoch: list[int | None] = [None] * k
    history: list[list[dict[str, float]]] = [[] for _ in range(k)]
    bmax = int(bs.max())
    rows = torch.arange(bmax, device=dev)
    start = time.perf_counter()
    for epoch in range(1, int(np.ceil(total / per_epoch).max()) + 1):
        running = alive & (step < total)
        if not running.any():
            break
        orders = [torch.randperm(n, generator=g).to(dev) if r else None for g, r in zip(gens, running)]
        loss_sum = torch.zeros(k, dtype=torch.float64, device=dev)
        correct = torch.zeros(k, dtype=torch.float64, device=dev)
        seen = np.zeros(k, dtype=np.int64)
        for j in range(int(per_epoch[running].max())):
            active = running & alive & (j < per_epoch) & (step < total)
            if not active.any():
                break
            idx = torch.zeros(k, bmax, dtype=torch.long, device=dev)
            sizes = np.zeros(k, dtype=np.int64)
            for u in np.flatnonzero(active):
                part = orders[u][j * bs[u]: (j + 1) * bs[u]]
                idx[u, : len(part)] = part
                sizes[u] = len(part)
            size_t = torch.as_tensor(sizes, device=dev)
            mask = rows.unsqueeze(0) < size_t.unsqueeze(1)  # K x B: each universe's own rows
            xb, yb = t["X_train"][idx], t["y_train"][idx]
            logits = stack(xb)
            per_row = nn.functional.cross_entropy(logits.reshape(-1, n_classes), yb.reshape(-1), reduction="none")
            per_row = torch.where(mask, per_row.view(k, bmax), 0.0)  # a padded row's NaN stays out
            loss = per_row.sum(1) / size_t.clamp(min=1)
            finite = torch.isfinite(loss).cpu().numpy()
            for u in np.flatnonzero(active & ~finite):  # diverged: stop it before the update, as sequentially
                alive[u], diverged_epoch[u] = False, epoch
            active = active & finite
            stack.zero_grad(set_to_none=True)
            on = torch.as_tensor(active, device=dev)
            torch.where(on, loss, torch.zeros_like(loss)).sum().backward()
            opt.step(active, _warmup_factor(step, warmup))
            step = step + active
            with torch.no_grad():
                loss_sum += torch.where(on, loss.double() * size_t, 0.0)
                hits = ((logits.argmax(2) == yb) & mask).sum(1).double()
                correct += torch.where(on, hits, 0.0)
            seen += np.where(active, sizes, 0)
        evaluated = running & alive
        with torch.no_grad():
            val_logits = stack(t["X_val"].unsqueeze(0).expand(k, -1, -1))
            n_val = len(t["y_val"])
            y_val = t["y_val"].unsqueeze(0).expand(k, -1)
            val_loss = nn.functional.cross_entropy(val_logits.reshape(-1, n_classes), y_val.reshape(-1),
                                                   reduction="none").view(k, n_val).mean(1).cpu().numpy()
            val_acc = (val_logits.argmax(2) == y_val).double().mean(1).cpu().numpy()
        ls, cs = loss_sum.cpu().numpy(), correct.cpu().numpy()
        now = round(time.perf_counter() - start, 3)
        for u in np.flatnonzero(evaluated):
            history[u].append({"epoch": epoch, "train_loss": float(ls[u] / seen[u]), "train_acc": float(cs[u] / seen[u]),
                               "val_loss": float(val_loss[u]), "val_acc": float(val_acc[u]), "seconds": now})
            if not math.isfinite(float(val_loss[u])):
                alive[u], diverged_epoch[u] = False, epoch
    seconds = time.perf_counter() - start
    out = []
    for u, p in enumerate(params):
        lr_final = lrs[u] * float(_warmup_factor(step[u:u + 1], warmup[u:u + 1])[0])
        record = {"status": "ok" if diverged_epoch[u] is None else "diverged", "diverged_epoch": diverged_epoch[u],
                  "epochs_run": len(history[u]), "steps_run": int(step[u]), "lr_effective": lrs[u],
                  "lr_final": lr_final, "n_classes": n_classes, "history": history[u],
                  "train_seconds": seconds / k, "device": str(dev), "pack_size": k}
        out.append((stack.state_dict_of(u), record))
    return out
