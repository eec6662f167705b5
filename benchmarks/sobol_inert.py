"""Sobol intervals of inert and active choices: cross-path indices against per-path ones.

    .venv/bin/python benchmarks/sobol_inert.py [--truths A,B,C] [--seeds 10] [--samples 64]

On the default study's 4-D space (optimizer, lr, weight decay, batch size) each truth
depends on lr and the optimizer only, with an interaction; 48 Sobol universes, noise sd
0.01, the report's Matern GP. For every data seed it checks the target of finding 6:
weight decay's and batch size's first- and total-order lower bounds below 0.01, and
lr's and optimizer's true indices (exact, from a fine lr grid times the four levels)
inside their 95% intervals. ``per-path`` is the estimator before it (Ax's indices of
each joint posterior path at one scrambling's Saltelli points, quantiles over paths);
``cross-path`` is :func:`multiverse.sensitivity.sobol_indices`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from multiverse.gp import fit_gp, joint_samples  # noqa: E402
from multiverse.sensitivity import sobol_indices  # noqa: E402
from multiverse.space import SearchSpace, scrambled_sobol  # noqa: E402

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "momentum", "adam", "rmsprop"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
})
OPTIMIZERS = ["sgd", "momentum", "adam", "rmsprop"]
TRUTHS = {  # accuracy from the optimizer and lr's position x in [0, 1]
    "A": lambda o, x: 0.9 + {"sgd": -0.03, "momentum": 0.0, "adam": 0.02, "rmsprop": 0.01}[o]
    - 0.3 * (x - {"sgd": 0.6, "momentum": 0.5, "adam": 0.3, "rmsprop": 0.35}[o]) ** 2,
    "B": lambda o, x: 0.9 + {"sgd": -0.01, "momentum": 0.0, "adam": 0.01, "rmsprop": 0.005}[o]
    - {"sgd": 0.35, "momentum": 0.3, "adam": 0.25, "rmsprop": 0.3}[o] * (x - 0.4) ** 2,
    "C": lambda o, x: 0.85 + 0.05 * {"sgd": 0.5, "momentum": 0.8, "adam": 1.0, "rmsprop": 0.9}[o] * np.sin(2.5 * x),
}
INERT = ("weight_decay", "batch_size")


def true_indices(truth) -> dict[str, tuple[float, float]]:
    grid = (np.arange(20000) + 0.5) / 20000
    F = np.array([truth(o, grid) for o in OPTIMIZERS])
    var = F.var()
    return {"optimizer": (F.mean(1).var() / var, F.var(0).mean() / var),
            "lr": (F.mean(0).var() / var, F.var(1).mean() / var), **{d: (0.0, 0.0) for d in INERT}}


def per_path_indices(sample, space, n_mc: int, n_samples: int, seed: int) -> dict[str, dict[str, float]]:
    """The estimator before finding 6: Ax's indices of each path, uncentred, one scrambling."""
    import torch
    from ax.utils.sensitivity.sobol_measures import SobolSensitivity

    k = len(space.dimensions)
    sens = SobolSensitivity(bounds=torch.stack([torch.zeros(k), torch.ones(k)]).double(), num_mc_samples=n_mc)
    u = torch.as_tensor(scrambled_sobol(n_mc, 2 * k, seed))
    sens.A, sens.B = u[:, :k], u[:, k:]
    sens.A_B_ABi = sens.generate_all_input_matrix()
    first, total = [], []
    for s in torch.as_tensor(sample(space.from_cube(sens.A_B_ABi.numpy()), n_samples, seed)):
        sens.evalute_function(s)
        first.append(sens.first_order_indices().numpy())
        total.append(sens.total_order_indices().numpy())
    first, total = np.array(first), np.array(total)
    out = {}
    for j, name in enumerate(space.cube_names()):
        (lo1, hi1), (lot, hit) = np.quantile(first[:, j], [0.025, 0.975]), np.quantile(total[:, j], [0.025, 0.975])
        out[name] = {"first": first[:, j].mean(), "first_lo": lo1, "first_hi": hi1,
                     "total": total[:, j].mean(), "total_lo": lot, "total_hi": hit}
    return out


def check(s, true) -> tuple[int, int, list[str]]:
    """(active indices inside, inert lower bounds below 0.01, what failed)."""
    inside = low = 0
    fails = []
    for name, tv in true.items():
        for which, t in zip(("first", "total"), tv):
            lo, hi = s[name][which + "_lo"], s[name][which + "_hi"]
            ok = lo < 0.01 if name in INERT else lo <= t <= hi
            inside, low = inside + (ok and name not in INERT), low + (ok and name in INERT)
            if not ok:
                fails.append(f"{name} {which} [{lo:.3f}, {hi:.3f}] true {t:.3f}")
    return inside, low, fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truths", default="A,B,C")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--samples", type=int, default=64)
    args = ap.parse_args()
    estimators = {"per-path": per_path_indices, "cross-path": sobol_indices}
    print("| truth | estimator | all met | active true inside | inert lower < 0.01 | s per call |")
    print("|---|---|---|---|---|---|")
    for t in args.truths.split(","):
        true = true_indices(TRUTHS[t])
        tally = {e: [0, 0, 0, 0.0] for e in estimators}
        for seed in range(args.seeds):
            us = SPACE.sobol(48, seed)
            x = SPACE["lr"].to_unit([u["lr"] for u in us])
            y = np.array([TRUTHS[t](u["optimizer"], xi) for u, xi in zip(us, x)])
            y = y + 0.01 * np.random.default_rng(seed).standard_normal(48)
            model = fit_gp(SPACE, us, y, seed, kernel="matern")
            for e, fn in estimators.items():
                start = time.perf_counter()
                s = fn(lambda pts, n, sd: joint_samples(model, SPACE, pts, n, sd), SPACE, 256, args.samples, seed)
                inside, low, fails = check(s, true)
                row = tally[e]
                row[0] += not fails
                row[1] += inside
                row[2] += low
                row[3] += time.perf_counter() - start
                print(f"{t} seed {seed} {e}: " + ("met" if not fails else "; ".join(fails)), file=sys.stderr)
        n = args.seeds
        for e, (met, inside, low, secs) in tally.items():
            print(f"| {t} | {e} | {met}/{n} | {inside}/{4 * n} | {low}/{4 * n} | {secs / n:.1f} |")


if __name__ == "__main__":
    main()
