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
(``torch.manual_seed(seed)``, then :func:`multiverse.nets.make_model`), its minibatch
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
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from multiverse.errors import Preempted
from multiverse.nets import (DEFAULT_BASE_BATCH, DEFAULT_EPS, DEFAULT_MOMENTUM, as_tensors, budget, count_classes,
                             make_model, network, scaled_lr)
from multiverse.spec.config import OPTIMIZERS

#: Largest ratio of batch sizes inside one stack: the lockstep idles a universe for at
#: most 1 - 1/BATCH_RATIO of an epoch's steps (the probe of issue 32: padding everyone
#: to the largest batch gave no gain; buckets within 1.4x gave 2.8-3.2x).
BATCH_RATIO = 1.4
#: Adam's and RMSprop's fixed coefficients, torch's defaults (as make_optimizer uses them).
BETAS, ALPHA = (0.9, 0.999), 0.99


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
    """``K`` MLPs of one shape, initialised from each universe's own ``make_model``.

    All of a universe's parameters are one row of a single ``K x P`` tensor ``flat``, and
    each layer's weight (``K x out x in``) and bias (``K x out``) are views into it, so
    that the backward pass leaves every gradient in ``flat.grad`` and the optimizer's
    step is a handful of operations over one tensor, however many layers."""

    def __init__(self, models: Sequence[nn.Module]):
        super().__init__()
        linears = [[m for m in model if isinstance(m, nn.Linear)] for model in models]
        self.shapes = [(tuple(lin.weight.shape), tuple(lin.bias.shape)) for lin in linears[0]]
        rows = [torch.cat([t.detach().reshape(-1) for lin in ls for t in (lin.weight, lin.bias)]) for ls in linears]
        self.flat = nn.Parameter(torch.stack(rows))

    def layers(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each layer's ``(weight, bias)`` views of :attr:`flat`, from one ``split`` (its
        backward is one concatenation; a slice per view cost a ``K x P`` buffer each)."""
        k = self.flat.shape[0]
        sizes = [math.prod(s) for pair in self.shapes for s in pair]
        parts = self.flat.split(sizes, dim=1)
        return [(parts[2 * j].view(k, *w), parts[2 * j + 1]) for j, (w, _) in enumerate(self.shapes)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``K x B x features`` -> ``K x B x classes``."""
        layers = self.layers()
        for j, (w, b) in enumerate(layers):
            x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
            if j < len(layers) - 1:
                x = torch.relu(x)
        return x

    def state_dict_of(self, k: int) -> dict[str, torch.Tensor]:
        """Universe ``k``'s weights under the names of its sequential ``nn.Sequential``
        (``0.weight``, ``0.bias``, ``2.weight``, ...)."""
        return {name: t for j, (w, b) in enumerate(self.layers())
                for name, t in ((f"{2 * j}.weight", w[k].detach().cpu().clone()),
                                (f"{2 * j}.bias", b[k].detach().cpu().clone()))}


class StackOptimizer:
    """Every universe's own optimizer over a ``K x P`` parameter (:attr:`Stack.flat`), as
    elementwise updates with per-universe coefficients (``K x 1`` columns), each
    optimizer's update over its own rows only (:func:`train_stack` orders a stack's
    universes by optimizer, so each one's rows are one slice). Follows torch's
    single-tensor implementations:

    - ``sgd``: ``p -= lr (g + wd p)``; ``momentum``: ``buf = mu buf + (g + wd p)``,
      ``p -= lr buf`` (torch's first step sets ``buf`` to the gradient: the same, as
      ``buf`` starts at 0);
    - ``adam``: L2 weight decay into the gradient, ``m = lerp(m, g, 1 - b1)``,
      ``v = b2 v + (1 - b2) g^2``, ``p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)``;
      ``adamw``: the same with decoupled decay ``p *= 1 - lr wd`` first;
    - ``rmsprop``: ``s = a s + (1 - a) g^2``, ``p -= lr g / (sqrt(s) + eps)``.

    ``step(active, lr_factor)``: only universes with ``active`` move (their state and
    step count too: their coefficients make every update an exact no-op); ``lr_factor``
    is each one's warm-up factor. Every coefficient (bias corrections, learning rates,
    ``1 - beta2``) is computed in float64 on the host and cast when applied, as torch
    casts its Python-float hyperparameters: ``1 - beta2`` computed in float32 instead
    moved Adam's weights 1e-2 from torch's in 25 steps.
    """

    def __init__(self, param: torch.Tensor, kinds: Sequence[str], lr: Sequence[float],
                 weight_decay: Sequence[float], momentum: Sequence[float], eps: Sequence[float]):
        self.param = param
        self.kinds = list(kinds)
        self.lr = np.asarray(lr, dtype=np.float64)
        self.wd = np.asarray(weight_decay, dtype=np.float64)
        self.mu = np.asarray(momentum, dtype=np.float64)
        self.eps = np.asarray(eps, dtype=np.float64)
        self.t = np.zeros(len(self.kinds), dtype=np.int64)
        self.slices: dict[str, slice] = {}
        for name in OPTIMIZERS:
            rows = [i for i, kd in enumerate(self.kinds) if kd == name]
            if rows:
                if rows != list(range(rows[0], rows[-1] + 1)):
                    raise ValueError("a stack's universes must be ordered by optimizer (each one's rows a slice)")
                self.slices[name] = slice(rows[0], rows[-1] + 1)
        self.state = {name: {key: torch.zeros_like(param[sl]) for key in STATE[name]}
                      for name, sl in self.slices.items()}

    def state_dict(self) -> dict[str, Any]:
        """Its step counts and state tensors (a stack's checkpoint, :func:`train_stack`)."""
        return {"t": torch.tensor(self.t), "state": {n: {k: v.clone() for k, v in st.items()} for n, st in self.state.items()}}

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        self.t = saved["t"].numpy().astype(np.int64)
        for name, st in saved["state"].items():
            for key, value in st.items():
                self.state[name][key].copy_(value)

    @torch.no_grad()
    def step(self, active: np.ndarray, lr_factor: np.ndarray | None = None, masked: bool = True) -> None:
        """One step of every ``active`` universe (``masked``: some inactive universe's
        gradient may be non-finite, a diverged one's, and is zeroed first; an inactive
        one's is otherwise exactly 0, its loss being left out)."""
        self.t = self.t + active
        lr = self.lr * (1.0 if lr_factor is None else lr_factor)
        b1, b2 = BETAS
        t = np.maximum(self.t, 1).astype(np.float64)
        # every coefficient as one K-row of a table, converted to the parameter's type at once
        table = {
            "on": active.astype(np.float64),
            "l2": np.where(active, self.wd, 0.0),
            "lr": np.where(active, lr, 0.0),
            "mu": np.where(active, self.mu, 1.0),
            "alpha": np.where(active, ALPHA, 1.0), "1-alpha": np.where(active, 1 - ALPHA, 0.0),
            "decay": np.where(active, 1 - lr * self.wd, 1.0),
            "1-b1": np.where(active, 1 - b1, 0.0),
            "b2": np.where(active, b2, 1.0), "1-b2": np.where(active, 1 - b2, 0.0),
            "bc2": np.sqrt(1 - b2**t), "eps": self.eps,
            "adam_lr": np.where(active, lr / (1 - b1**t), 0.0),
        }
        names = list(table)
        coef = torch.as_tensor(np.stack([table[n] for n in names]), dtype=self.param.dtype,
                               device=self.param.device).unsqueeze(-1)  # coefficients x K x 1
        c = dict(zip(names, coef))
        grad = self.param.grad
        if masked:
            grad = torch.where(c["on"].bool(), grad, 0.0)
        for name, sl in self.slices.items():
            p, g, st = self.param[sl], grad[sl], self.state[name]
            if name != "adamw" and self.wd[sl].any():
                g = g + c["l2"][sl] * p
            if name == "sgd":
                p.sub_(c["lr"][sl] * g)
            elif name == "momentum":
                st["buf"].mul_(c["mu"][sl]).add_(g)
                p.sub_(c["lr"][sl] * st["buf"])
            elif name == "rmsprop":
                st["v"].mul_(c["alpha"][sl]).add_(c["1-alpha"][sl] * g * g)
                p.sub_(c["lr"][sl] * g / (st["v"].sqrt() + c["eps"][sl]))
            else:  # adam, adamw
                if name == "adamw":
                    p.mul_(c["decay"][sl])
                st["m"].lerp_(g, c["1-b1"][sl])
                st["v"].mul_(c["b2"][sl]).add_(c["1-b2"][sl] * g * g)
                denom = st["v"].sqrt().div_(c["bc2"][sl]).add_(c["eps"][sl])
                p.sub_(c["adam_lr"][sl] * st["m"] / denom)


#: The state each optimizer keeps per parameter.
STATE = {"sgd": (), "momentum": ("buf",), "adam": ("m", "v"), "adamw": ("m", "v"), "rmsprop": ("v",)}


def _warmup_factor(step: np.ndarray, warmup: np.ndarray) -> np.ndarray:
    """torch's ``LinearLR(start_factor=1/warmup, end_factor=1, total_iters=warmup)``
    after ``step`` steps of a universe, in closed form (float64): ``1/w + (1 - 1/w) s/w``
    for ``s < w``, else 1."""
    w = np.maximum(warmup, 1).astype(np.float64)
    s = np.minimum(step, w)
    return np.where(warmup > 0, 1 / w + (1 - 1 / w) * s / w, 1.0)


def epoch_batches(orders: Sequence[torch.Tensor | None], bs: np.ndarray, steps: int, bmax: int) -> torch.Tensor:
    """``K x steps x bmax`` row indices of one epoch's minibatches (-1: padding): universe
    ``k``'s ``j``-th minibatch is ``orders[k][j bs_k : (j + 1) bs_k]``, as the sequential
    loop slices it (None: a universe that does not train this epoch)."""
    out = []
    for order, b in zip(orders, bs):
        full = torch.full((steps * bmax,), -1, dtype=torch.long)
        if order is not None:
            n = len(order)
            per = -(-n // int(b))
            padded = torch.full((per * int(b),), -1, dtype=torch.long)
            padded[:n] = order.cpu()
            grid = torch.full((steps, bmax), -1, dtype=torch.long)
            grid[:per, : int(b)] = padded.view(per, int(b))
            full = grid.view(-1)
        out.append(full.view(steps, bmax))
    return torch.stack(out)


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
    progress: Callable[[int, dict[str, float]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    save: Callable[[dict[str, Any]], None] | None = None,
    checkpoint_every: int = 1,
    resume: Mapping[str, Any] | None = None,
) -> list[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
    """Train universes ``params`` (with ``seeds``; each :func:`packable`, one network
    shape) as one stack and return each one's ``(state_dict, record)`` as
    :func:`multiverse.train.train_universe` does (``dtype``: the weights' and data's
    floating type, float32 by default, float64 in the equivalence tests).

    The record holds the same fields as a sequential one, plus ``pack_size`` (the
    stack's universes); ``train_seconds`` is the stack's time divided among them.
    ``progress(k, entry)`` is called with universe ``k``'s history entry after each of
    its epochs. ``should_stop()`` is asked before each epoch (not within one: a stacked
    epoch must end inside the guard's 60 s grace after SIGTERM, or the stack resumes
    from its last checkpoint); when it says so, the stack's state is saved (``save``)
    and :class:`multiverse.errors.Preempted` is raised.

    Checkpoints: ``save(state)`` is called with the whole stack's training state (its
    weights, every universe's optimizer state, step count, minibatch-order generator,
    divergence and history) after every ``checkpoint_every``-th epoch (0: only when
    stopped), and ``resume`` (such a state) continues from the epoch after it. On the CPU
    a resumed stack ends bitwise where an uninterrupted one does
    (``tests/test_packed.py``). Saving and reading the file is the caller's
    (:func:`multiverse.train.train_stacks`).
    """
    dev = torch.device(device)
    k = len(params)
    # rows ordered by optimizer (StackOptimizer updates each optimizer's rows as one slice)
    perm = sorted(range(k), key=lambda i: OPTIMIZERS.index(params[i]["optimizer"]))
    if perm != list(range(k)):
        out = train_stack(data, [params[i] for i in perm], [seeds[i] for i in perm], epochs=epochs, width=width,
                          depth=depth, device=device, base_batch=base_batch, dtype=dtype,
                          progress=None if progress is None else (lambda u, entry: progress(perm[u], entry)),
                          should_stop=should_stop, save=save, checkpoint_every=checkpoint_every, resume=resume)
        back = {i: r for i, r in zip(perm, out)}
        return [back[i] for i in range(k)]
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    t, shape = as_tensors(data, dev, dtype)
    n_classes = count_classes(t)
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
        stack.flat, [p["optimizer"] for p in params], lrs, [float(p["weight_decay"]) for p in params],
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
    X, y = t["X_train"], t["y_train"]
    first, before = 1, 0.0
    if resume is not None:
        with torch.no_grad():
            stack.flat.copy_(resume["flat"])
        opt.load_state_dict(resume["optimizer"])
        for g, state in zip(gens, resume["generators"]):
            g.set_state(state)
        step, alive = resume["step"].numpy().astype(np.int64), resume["alive"].numpy().astype(bool)
        diverged_epoch = [None if e < 0 else int(e) for e in resume["diverged_epoch"].tolist()]
        history = [list(h) for h in resume["history"]]
        first, before = int(resume["epoch"]) + 1, float(resume["seconds"])
    start = time.perf_counter() - before

    def state(epoch: int) -> dict[str, Any]:
        """The stack's training state after ``epoch`` (what ``resume`` takes)."""
        return {"epoch": epoch, "flat": stack.flat.detach().clone(), "optimizer": opt.state_dict(),
                "generators": [g.get_state() for g in gens], "step": torch.tensor(step),
                "alive": torch.tensor(alive), "history": [[dict(e) for e in h] for h in history],
                "diverged_epoch": torch.tensor([-1 if e is None else e for e in diverged_epoch]),
                "seconds": time.perf_counter() - start}

    for epoch in range(first, int(np.ceil(total / per_epoch).max()) + 1):
        running = alive & (step < total)
        if not running.any():
            break
        if should_stop is not None and should_stop():
            saved = "it trains afresh"
            if save is not None:
                try:
                    save(state(epoch - 1))
                    saved = "saved"
                except Exception as err:  # noqa: BLE001  (the stop comes first: the job is being preempted)
                    saved = f"not saved ({type(err).__name__}: {err}): it trains afresh"
            raise Preempted(f"stopped before epoch {epoch} of a stack of {k} universes ({saved})")
        orders = [torch.randperm(n, generator=g) if r else None for g, r in zip(gens, running)]
        lock = int(per_epoch[running].max())
        batches = epoch_batches(orders, bs, lock, bmax).to(dev)
        masks = batches >= 0
        sizes_all = masks.sum(2)  # K x steps
        sizes_host = sizes_all.cpu().numpy()
        batches = batches.clamp(min=0)
        loss_sum = torch.zeros(k, dtype=torch.float64, device=dev)
        correct = torch.zeros(k, dtype=torch.float64, device=dev)
        seen = np.zeros(k, dtype=np.int64)
        for j in range(lock):
            active = running & alive & (j < per_epoch) & (step < total)
            if not active.any():
                break
            idx, mask, size = batches[:, j], masks[:, j], sizes_all[:, j]
            yb = y[idx]
            logits = stack(X[idx])
            per_row = nn.functional.cross_entropy(logits.reshape(-1, n_classes), yb.reshape(-1), reduction="none")
            per_row = torch.where(mask, per_row.view(k, bmax), 0.0)  # a padded row's NaN stays out
            loss = per_row.sum(1) / size.clamp(min=1)
            finite = torch.isfinite(loss).cpu().numpy()
            for u in np.flatnonzero(active & ~finite):  # diverged: stop it before the update, as sequentially
                alive[u], diverged_epoch[u] = False, epoch
            active = active & finite
            on = torch.as_tensor(active, device=dev)
            stack.flat.grad = None
            torch.where(on, loss, 0.0).sum().backward()
            opt.step(active, _warmup_factor(step, warmup), masked=not alive.all())
            step = step + active
            with torch.no_grad():
                loss_sum += torch.where(on, loss.double() * size, 0.0)
                correct += torch.where(on, ((logits.argmax(2) == yb) & mask).sum(1).double(), 0.0)
            seen += np.where(active, sizes_host[:, j], 0)
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
            if progress is not None:
                progress(u, history[u][-1])
            if not math.isfinite(float(val_loss[u])):
                alive[u], diverged_epoch[u] = False, epoch
        if save is not None and checkpoint_every > 0 and epoch % checkpoint_every == 0 and (alive & (step < total)).any():
            save(state(epoch))
    seconds = time.perf_counter() - start
    out = []
    for u, p in enumerate(params):
        lr_final = lrs[u] * float(_warmup_factor(step[u:u + 1], warmup[u:u + 1])[0])
        record = {"status": "ok" if diverged_epoch[u] is None else "diverged", "diverged_epoch": diverged_epoch[u],
                  "epochs_run": len(history[u]), "steps_run": int(step[u]), "lr_effective": lrs[u],
                  "lr_final": lr_final, "n_classes": n_classes, "history": history[u],
                  "train_seconds": seconds / k, "device": str(dev), "pack_size": k,
                  # the whole stack's peak, which its universes share (as train_universe records one's own)
                  **({"peak_gpu_mb": torch.cuda.max_memory_allocated(dev) / 2**20} if dev.type == "cuda" else {})}
        out.append((stack.state_dict_of(u), record))
    return out
