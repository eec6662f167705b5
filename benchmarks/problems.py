"""Benchmark multiverses whose ground truth is known on a dense grid.

Each problem has a ``space`` in the config's format, an ``evaluate`` that gives the
metric at any universes of that space (deterministic: a point always gets the same
value), and a ``grid`` of universes with the metric there, the ground truth against
which a design strategy's surrogate is scored (RMSE as a function of the trials).

    .venv/bin/python benchmarks/problems.py [NAME ...]    # compute (or load) the grids

The truth of a grid is cached in ``results/benchmarks/<name>_truth.npz`` and reused
while the grid and the problem's settings match.

- ``svm_breast_cancer``: RBF SVM on breast cancer, C x gamma, 5-fold CV accuracy
  (the illustrative example of Bell et al. 2022, "Modeling the ML multiverse").
- ``digits_model``: one-hidden-layer MLP on digits, lr x weight decay x epochs x
  optimizer, held-out accuracy; every configuration of a call trains at once as one
  batched tensor computation, from the same initialisation and minibatch order.
- ``branin``: the rescaled Branin function on the unit square.
- ``synthetic_mixed``: a smooth function of a log and a linear dimension whose three
  levels of a categorical shift and scale (one flips) it; a third dimension is irrelevant.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / "results" / "benchmarks"


# --- the common interface -------------------------------------------------------------
def axis(spec: Mapping[str, Any], n: int) -> list:
    """``n`` grid values along one dimension: evenly spaced (in log space when ``log``);
    an int dimension's values are the distinct rounded ones; a categorical's are its levels."""
    if spec["type"] == "categorical":
        return list(spec["choices"])
    lo, hi = float(spec["low"]), float(spec["high"])
    v = np.logspace(math.log10(lo), math.log10(hi), n) if spec.get("log") else np.linspace(lo, hi, n)
    v = np.clip(v, lo, hi)
    v[0], v[-1] = lo, hi  # exact endpoints (logspace rounds them)
    if spec["type"] == "int":
        return sorted({int(x) for x in np.rint(v)})
    return [float(x) for x in v]


@dataclass
class Problem:
    """A multiverse with a known response surface.

    ``fn`` maps a list of (checked) universes to their metric; ``grid_sizes`` gives the
    number of grid points per numeric dimension (categoricals use all their levels);
    ``settings`` is whatever besides the grid decides the truth (part of the cache key).
    """

    name: str
    description: str
    space: dict
    fn: Callable[[list[dict]], np.ndarray]
    grid_sizes: dict
    metric: str = "accuracy"
    maximize: bool = True
    settings: dict = field(default_factory=dict)

    def check(self, universe: Mapping[str, Any]) -> dict:
        """The universe with the space's dimensions (ints as int), or ``ValueError``."""
        if set(universe) != set(self.space):
            raise ValueError(f"{self.name}: universe has dimensions {sorted(universe)}, expected {sorted(self.space)}")
        out = {}
        for name, spec in self.space.items():
            v = universe[name]
            if spec["type"] == "categorical":
                if v not in spec["choices"]:
                    raise ValueError(f"{self.name}: {name}={v!r} is not one of {spec['choices']}")
            else:
                if spec["type"] == "int":
                    if float(v) != int(round(float(v))):
                        raise ValueError(f"{self.name}: {name}={v!r} is not an integer")
                    v = int(round(float(v)))
                else:
                    v = float(v)
                if not spec["low"] <= v <= spec["high"]:
                    raise ValueError(f"{self.name}: {name}={v!r} outside [{spec['low']}, {spec['high']}]")
            out[name] = v
        return out

    def evaluate(self, universes: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The metric at each universe, as a float array."""
        universes = [self.check(u) for u in universes]
        if not universes:
            return np.zeros(0)
        return np.asarray(self.fn(universes), dtype=float).reshape(len(universes))

    def grid_universes(self) -> list[dict]:
        axes = {n: axis(s, self.grid_sizes.get(n, 0)) for n, s in self.space.items()}
        names = list(axes)
        return [dict(zip(names, vals)) for vals in itertools.product(*(axes[n] for n in names))]

    def cache_key(self, universes: list[dict]) -> str:
        blob = json.dumps({"name": self.name, "space": self.space, "settings": self.settings, "grid": universes},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def grid(self, cache_dir: str | Path | None = CACHE_DIR, refresh: bool = False) -> tuple[list[dict], np.ndarray]:
        """The dense grid and the truth there; read from / written to ``cache_dir`` (``None``: no cache)."""
        universes = self.grid_universes()
        key = self.cache_key(universes)
        path = Path(cache_dir) / f"{self.name}_truth.npz" if cache_dir is not None else None
        if path is not None and path.exists() and not refresh:
            with np.load(path, allow_pickle=False) as f:
                if str(f["key"]) == key and f["truth"].shape == (len(universes),):
                    return universes, f["truth"].copy()
        truth = self.evaluate(universes)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.stem + ".tmp.npz")
            np.savez(tmp, truth=truth, key=np.array(key), names=np.array(list(self.space)),
                     universes=np.array(json.dumps(universes)))
            tmp.replace(path)
        return universes, truth


# --- (a) RBF SVM on breast cancer ------------------------------------------------------
SVM_FOLDS, SVM_SEED = 5, 0


class _SVMCV:
    """Mean validation accuracy of ``SVC(C, gamma)`` (the universe's ``kernel``, RBF where
    it has none) over a fixed stratified K-fold; features standardised within each
    training fold."""

    def __init__(self, folds: int = SVM_FOLDS, seed: int = SVM_SEED):
        from sklearn.datasets import load_breast_cancer
        from sklearn.model_selection import StratifiedKFold
        from sklearn.preprocessing import StandardScaler

        X, y = load_breast_cancer(return_X_y=True)
        self.folds = []
        for tr, va in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
            sc = StandardScaler().fit(X[tr])
            self.folds.append((sc.transform(X[tr]), y[tr], sc.transform(X[va]), y[va]))

    def __call__(self, universes: list[dict]) -> np.ndarray:
        return self.scores(universes)["val_acc"]

    def scores(self, universes: list[dict]) -> dict[str, np.ndarray]:
        """Mean validation (``val_acc``) and training (``train_acc``) accuracy over the folds."""
        from sklearn.svm import SVC

        out = np.zeros((len(universes), 2))
        for i, u in enumerate(universes):
            for a, b, c, d in self.folds:
                m = SVC(C=u["C"], gamma=u["gamma"], kernel=u.get("kernel", "rbf")).fit(a, b)
                out[i] += (m.score(c, d), m.score(a, b))
        out /= len(self.folds)
        return {"val_acc": out[:, 0], "train_acc": out[:, 1]}


def svm_breast_cancer() -> Problem:
    return Problem(
        name="svm_breast_cancer",
        description="RBF SVM (sklearn SVC) on breast cancer (569x30, standardised); C, gamma (log); "
                    f"mean {SVM_FOLDS}-fold stratified CV accuracy",
        space={"C": {"type": "float", "low": 1e-2, "high": 1e3, "log": True},
               "gamma": {"type": "float", "low": 1e-5, "high": 1e1, "log": True}},
        fn=_SVMCV(),
        grid_sizes={"C": 40, "gamma": 40},
        settings={"folds": SVM_FOLDS, "seed": SVM_SEED, "version": 1},
    )


# --- (b) MLP on digits, trained in one batch ------------------------------------------
DIGITS = {"hidden": 32, "batch_size": 64, "test_size": 0.3, "seed": 0, "momentum": 0.9,
          "betas": (0.9, 0.999), "eps": 1e-8, "version": 1}
OPTIMIZERS = ("sgd", "momentum", "adam")


class _DigitsMLP:
    """A 64-32-10 ReLU MLP, softmax cross-entropy, minibatch training with coupled L2.

    Every configuration starts from the same seeded initialisation and sees the same
    seeded minibatches, so the held-out accuracy after ``epochs`` epochs is a function of
    the hyperparameters alone. All configurations of a call train together (float64,
    batched matmuls, one thread, so a configuration's result does not depend on its
    batch mates; checked bit for bit); a diverged network's non-finite logits count as 0.
    """

    def __init__(self, **settings):
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        self.s = {**DIGITS, **settings}
        X, y = load_digits(return_X_y=True)
        Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=self.s["test_size"], stratify=y,
                                              random_state=self.s["seed"])
        self.data = Xtr, Xte, ytr, yte

    chunk = 1024  # trajectories trained together at most

    def __call__(self, universes: list[dict]) -> np.ndarray:
        return self.scores(universes)["val_acc"]

    def scores(self, universes: list[dict]) -> dict[str, np.ndarray]:
        """Held-out accuracy (``val_acc``) and the full training set's cross-entropy after
        the last epoch (``train_loss``, NaN when it is not finite: a diverged network).
        Universes that differ only in ``epochs`` share one training trajectory."""
        import torch

        keys = [(float(u["lr"]), float(u["weight_decay"]), u["optimizer"]) for u in universes]
        unique = list(dict.fromkeys(keys))
        row = {k: i for i, k in enumerate(unique)}
        wanted = [set() for _ in unique]
        for k, u in zip(keys, universes):
            wanted[row[k]].add(int(u["epochs"]))
        configs = [{"lr": k[0], "weight_decay": k[1], "optimizer": k[2]} for k in unique]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                curves: dict = {}
                for a in range(0, len(configs), self.chunk):
                    for j, c in enumerate(self._run(configs[a:a + self.chunk], wanted[a:a + self.chunk], torch)):
                        curves[a + j] = c
        finally:
            torch.set_num_threads(threads)
        got = np.array([curves[row[k]][int(u["epochs"])] for k, u in zip(keys, universes)]).reshape(-1, 2)
        return {"val_acc": got[:, 0], "train_loss": got[:, 1]}

    def _run(self, universes: list[dict], wanted: list[set], torch) -> list[dict]:
        """Train the configurations together; per configuration {epoch: (held-out
        accuracy, training loss)} at the epochs it wants. The split comes from ``seed``,
        the initialisation and minibatch order from ``train_seed`` (default: ``seed``)."""
        s, f64 = self.s, torch.float64
        Xtr, Xte, ytr, yte = (torch.as_tensor(a) for a in self.data)
        Xtr, Xte = Xtr.to(f64), Xte.to(f64)
        Y = torch.nn.functional.one_hot(ytr, 10).to(f64)
        B, H, n, d = len(universes), s["hidden"], len(Xtr), Xtr.shape[1]
        col = lambda key: torch.tensor([float(u[key]) for u in universes], dtype=f64).view(B, 1, 1)  # noqa: E731
        lr, wd = col("lr"), col("weight_decay")
        opt = torch.tensor([OPTIMIZERS.index(u["optimizer"]) for u in universes]).view(B, 1, 1)
        last = max(max(w) for w in wanted)

        g = torch.Generator().manual_seed(s.get("train_seed", s["seed"]))
        W1 = ((torch.rand(d, H, generator=g, dtype=f64) * 2 - 1) * math.sqrt(6 / d)).expand(B, d, H).clone()
        W2 = ((torch.rand(H, 10, generator=g, dtype=f64) * 2 - 1) * math.sqrt(6 / (H + 10))).expand(B, H, 10).clone()
        params = [W1, torch.zeros(B, 1, H, dtype=f64), W2, torch.zeros(B, 1, 10, dtype=f64)]
        m1 = [torch.zeros_like(p) for p in params]
        m2 = [torch.zeros_like(p) for p in params]
        mom, (b1, b2), eps = s["momentum"], s["betas"], s["eps"]
        is_sgd, is_mom, is_adam = opt == 0, opt == 1, opt == 2

        curves, t = [{} for _ in universes], 0
        for epoch in range(1, last + 1):
            perm = torch.randperm(n, generator=g)
            for start in range(0, n, s["batch_size"]):
                idx = perm[start:start + s["batch_size"]]
                x, y = Xtr[idx], Y[idx]
                W1, c1, W2, c2 = params
                h = torch.relu(x @ W1 + c1)
                gz = (torch.softmax(h @ W2 + c2, -1) - y) / len(idx)
                dh = (gz @ W2.transpose(1, 2)) * (h > 0)
                grads = [x.T @ dh + wd * W1, dh.sum(1, keepdim=True), h.transpose(1, 2) @ gz + wd * W2,
                         gz.sum(1, keepdim=True)]
                t += 1
                for i, (p, gr) in enumerate(zip(params, grads)):
                    m1[i] = torch.where(is_mom, mom * m1[i] + gr, torch.where(is_adam, b1 * m1[i] + (1 - b1) * gr, m1[i]))
                    m2[i] = torch.where(is_adam, b2 * m2[i] + (1 - b2) * gr * gr, m2[i])
                    adam = (m1[i] / (1 - b1**t)) / ((m2[i] / (1 - b2**t)).sqrt() + eps)
                    p -= lr * torch.where(is_sgd, gr, torch.where(is_mom, m1[i], adam))
            due = [i for i, w in enumerate(wanted) if epoch in w]
            if due:
                W1, c1, W2, c2 = (p[due] for p in params)
                z = torch.nan_to_num(torch.relu(Xte @ W1 + c1) @ W2 + c2, nan=0.0)
                acc = (z.argmax(-1) == yte).to(f64).mean(1).tolist()
                logits = torch.relu(Xtr @ W1 + c1) @ W2 + c2
                loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ytr.expand(len(due), -1),
                                                         reduction="none").mean(1)
                loss = torch.where(torch.isfinite(loss), loss, torch.nan).tolist()
                for i, a, lo in zip(due, acc, loss):
                    curves[i][epoch] = (a, lo)
        return curves


def digits_model() -> Problem:
    return Problem(
        name="digits_model",
        description="64-32-10 ReLU MLP on sklearn digits (1797x64, 70/30 stratified split); lr, weight_decay (log), "
                    "epochs (int), optimizer (sgd/momentum/adam); held-out accuracy",
        space={"lr": {"type": "float", "low": 1e-4, "high": 1e1, "log": True},
               "weight_decay": {"type": "float", "low": 1e-5, "high": 3e-1, "log": True},
               "epochs": {"type": "int", "low": 1, "high": 24},
               "optimizer": {"type": "categorical", "choices": list(OPTIMIZERS)}},
        fn=_DigitsMLP(),
        grid_sizes={"lr": 14, "weight_decay": 14, "epochs": 12},
        settings={k: list(v) if isinstance(v, tuple) else v for k, v in DIGITS.items()},
    )


# --- (c) synthetic functions -------------------------------------------------------------
def _branin(universes: list[dict]) -> np.ndarray:
    """Rescaled Branin (Picheny et al. 2013) on [0, 1]^2: mean ~0, std ~1; minima -1.047."""
    x1 = 15 * np.array([u["x1"] for u in universes]) - 5
    x2 = 15 * np.array([u["x2"] for u in universes])
    f = (x2 - 5.1 * x1**2 / (4 * math.pi**2) + 5 * x1 / math.pi - 6) ** 2 + (10 - 10 / (8 * math.pi)) * np.cos(x1)
    return (f - 44.81) / 51.95


def branin() -> Problem:
    return Problem(
        name="branin",
        description="rescaled Branin function; x1, x2 in [0, 1] (linear); closed form, minimise",
        space={"x1": {"type": "float", "low": 0.0, "high": 1.0}, "x2": {"type": "float", "low": 0.0, "high": 1.0}},
        fn=_branin, grid_sizes={"x1": 40, "x2": 40}, metric="value", maximize=False,
        settings={"version": 1},
    )


MIXED_LEVELS = {"a": (1.0, 0.0), "b": (0.5, 0.5), "c": (-1.0, 0.25)}  # level -> (scale, shift)


def _mixed(universes: list[dict]) -> np.ndarray:
    """``scale[level] * g(t, x2) + shift[level]`` with ``t`` = x1 in log space mapped to [0, 1];
    ``x3`` has no effect."""
    t = (np.log10([u["x1"] for u in universes]) + 3) / 3
    x2 = np.array([u["x2"] for u in universes])
    g = np.exp(-((t - 0.3) ** 2 + (x2 - 0.7) ** 2) / 0.08) + 0.5 * np.sin(3 * math.pi * t) * x2 - 0.3 * x2**2
    scale, shift = np.array([MIXED_LEVELS[u["level"]] for u in universes]).T
    return scale * g + shift


def synthetic_mixed() -> Problem:
    return Problem(
        name="synthetic_mixed",
        description="closed-form smooth function of x1 (log, 1e-3..1) and x2 (0..1), x3 (0..1) irrelevant, "
                    "categorical level a/b/c scaling (c flips) and shifting it; maximise",
        space={"x1": {"type": "float", "low": 1e-3, "high": 1.0, "log": True},
               "x2": {"type": "float", "low": 0.0, "high": 1.0},
               "x3": {"type": "float", "low": 0.0, "high": 1.0},
               "level": {"type": "categorical", "choices": list(MIXED_LEVELS)}},
        fn=_mixed, grid_sizes={"x1": 12, "x2": 12, "x3": 12}, metric="value",
        settings={"levels": {k: list(v) for k, v in MIXED_LEVELS.items()}, "version": 1},
    )


PROBLEMS: dict[str, Callable[[], Problem]] = {
    "svm_breast_cancer": svm_breast_cancer,
    "digits_model": digits_model,
    "branin": branin,
    "synthetic_mixed": synthetic_mixed,
}


def get_problem(name: str) -> Problem:
    try:
        return PROBLEMS[name]()
    except KeyError:
        raise KeyError(f"unknown benchmark problem {name!r}; known: {sorted(PROBLEMS)}") from None


def main(argv: Sequence[str]) -> None:
    import torch

    torch.set_num_threads(1)
    for name in argv or PROBLEMS:
        start = time.perf_counter()
        p = get_problem(name)
        universes, truth = p.grid()
        print(f"{name}: {len(universes)} points, {time.perf_counter() - start:.1f} s, "
              f"truth min {truth.min():.4f} max {truth.max():.4f} mean {truth.mean():.4f} std {truth.std():.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
