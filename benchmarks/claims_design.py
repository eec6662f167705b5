"""Claim-targeted design against exploration: how fast each design strategy settles the
claims of multiverses whose truth is known.

    .venv/bin/python benchmarks/claims_design.py                     # every multiverse, 10 seeds
    .venv/bin/python benchmarks/claims_design.py --multiverses synthetic_curved --seeds 3
    .venv/bin/python benchmarks/claims_design.py --tables            # the tables of the rows so far

Multiverses (each a :class:`calibration.Grid`: a dense grid whose cells hold two seeds'
outcomes, the truth read from their means; :mod:`calibration` draws and scores them):

- ``digits``: the calibration benchmark's digits MLP grid (real trainings, a cliff),
  claims adam >= sgd and val_acc increasing in lr: both flip inside the space;
- ``svm_kernel``: the RBF or sigmoid SVM on breast cancer (``problems._SVMCV``), kernel x
  C x gamma, 2 x 24 x 24 (a seed is a fold split), claim rbf >= sigmoid;
- ``synthetic_categorical``: two methods on [0, 1]^2 whose difference changes sign on a
  straight border (x1 = 0.4), claim a >= b;
- ``synthetic_curved``: on [0, 1]^3, val_acc rises with x3 inside a disc of (x1, x2)
  (centre (0.3, 0.3), radius 0.5) and falls outside it, claim val_acc increasing in x3.
  The synthetic grids add normal seed noise (sd 0.01).

For each multiverse, strategy (gp-claims, gp-ivr, sobol, random) and seed, one draw:
the same 16 Sobol universes, then rounds of 8 by the strategy up to 48, each universe
snapped to an unused grid cell and read from one seed (:func:`calibration.draw_table`);
at every budget the report's own code analyses the universes so far
(:func:`calibration.analyse_table`). Per claim it records the width of the GP's 95%
credible interval, whether it holds the true statistic, and the share of the reference
points whose holds / fails / uncertain label disagrees with the truth (a cell within 2
grid errors of 0 is truly uncertain). Rows are appended to
``results/benchmarks/claims_design/<multiverse>.csv`` as they come, so a run can be
resumed; the tables give means with 95% t-intervals over seeds (Wilson for coverage).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import calibration as CB  # noqa: E402
import problems  # noqa: E402

STRATEGIES = ("gp-claims", "gp-ivr", "sobol", "random")
#: Round sizes: 16 Sobol universes, then 4 rounds of 8 (budgets 16, 24, 32, 40, 48).
ROUNDS = (16, 8, 8, 8, 8)
OUT = problems.CACHE_DIR / "claims_design"
NOISE = 0.01


def digits() -> CB.Grid:
    grid = CB.digits_grid()
    keep = ("digits_adam_vs_sgd", "digits_trend_lr")
    grid.claims = [c for c in grid.claims if c["name"] in keep]
    return grid


def svm_kernel(cache_dir: Path | None = CB.CACHE_DIR) -> CB.Grid:
    p = problems.svm_breast_cancer()
    space = {"kernel": {"type": "categorical", "choices": ["rbf", "sigmoid"]}, **p.space}
    axes = {"kernel": ["rbf", "sigmoid"], **{n: problems.axis(s, 24) for n, s in p.space.items()}}
    values = CB.cached_grid("svm_kernel", axes, {**p.settings, "kernels": axes["kernel"]},
                            lambda us, s: problems._SVMCV(seed=problems.SVM_SEED + s).scores(us), cache_dir)
    claims = [{"name": "svm_rbf_vs_sigmoid", "type": "comparison", "metric": "val_acc", "dimension": "kernel",
               "a": ["rbf"], "b": ["sigmoid"], "relation": ">="}]
    return CB.Grid("svm_kernel", "SVM (sklearn SVC, RBF or sigmoid kernel) on breast cancer; kernel x C x gamma "
                   "(log), 2 x 24 x 24; mean 5-fold CV accuracy; 2 fold splits", space, axes, values, ["val_acc"], claims)


def synthetic(name: str, description: str, space: dict, axes: dict, f, claims: list, seed: int = 0) -> CB.Grid:
    """A grid of ``f(**cell)`` plus normal seed noise (sd :data:`NOISE`), two seeds."""
    import itertools

    cells = np.array([f(**dict(zip(axes, v))) for v in itertools.product(*axes.values())])
    shape = [len(v) for v in axes.values()]
    noise = NOISE * np.random.default_rng(seed).standard_normal((len(cells), CB.SEEDS))
    values = {"val_acc": (cells[:, None] + noise).reshape(shape + [CB.SEEDS])}
    return CB.Grid(name, description, space, axes, values, ["val_acc"], claims)


def synthetic_categorical() -> CB.Grid:
    unit = {"type": "float", "low": 0.0, "high": 1.0}
    space = {"method": {"type": "categorical", "choices": ["a", "b"]}, "x1": unit, "x2": unit}
    axes = {"method": ["a", "b"], "x1": list(np.linspace(0, 1, 33)), "x2": list(np.linspace(0, 1, 33))}

    def f(method, x1, x2):
        base = 0.7 + 0.08 * np.sin(3 * x2) + 0.05 * x1
        return base + (0.15 if method == "a" else -0.15) * (x1 - 0.4)

    claims = [{"name": "synthetic_a_vs_b", "type": "comparison", "metric": "val_acc", "dimension": "method",
               "a": ["a"], "b": ["b"], "relation": ">="}]
    return synthetic("synthetic_categorical", "two methods on [0, 1]^2, a - b = 0.3 (x1 - 0.4): the border "
                     "x1 = 0.4; seed noise sd 0.01", space, axes, f, claims)


def synthetic_curved() -> CB.Grid:
    unit = {"type": "float", "low": 0.0, "high": 1.0}
    space = {"x1": unit, "x2": unit, "x3": unit}
    axes = {"x1": list(np.linspace(0, 1, 21)), "x2": list(np.linspace(0, 1, 21)), "x3": list(np.linspace(0, 1, 9))}

    def f(x1, x2, x3):
        slope = 1.0 - ((x1 - 0.3) ** 2 + (x2 - 0.3) ** 2) / 0.25  # > 0 inside the disc of radius 0.5
        return 0.7 + 0.2 * slope * (x3 - 0.5) + 0.05 * x1

    claims = [{"name": "synthetic_trend_x3", "type": "trend", "metric": "val_acc", "dimension": "x3",
               "direction": "increasing"}]
    return synthetic("synthetic_curved", "on [0, 1]^3, slope in x3 = 0.2 (1 - |(x1, x2) - (0.3, 0.3)|^2 / 0.25): "
                     "rises inside a disc, falls outside; seed noise sd 0.01", space, axes, f, claims)


MULTIVERSES = {"digits": digits, "svm_kernel": svm_kernel, "synthetic_categorical": synthetic_categorical,
               "synthetic_curved": synthetic_curved}


def run(grid: CB.Grid, strategy: str, seed: int, rounds=ROUNDS) -> list[dict]:
    """One draw of ``strategy`` on ``grid``, scored at every budget."""
    design = {"strategy": strategy, "outcomes": grid.outcomes, "claims": grid.claims, "explore_share": 0.25}
    df, _ = CB.draw_table(grid, seed, rounds, design)
    rows = []
    for r in range(1, len(rounds) + 1):
        sub = df[df["round"] < r]
        for row in CB.analyse_table(grid, sub, seed):
            rows.append({"multiverse": grid.name, "strategy": strategy, "seed": seed, "budget": int(sum(rounds[:r])),
                         "width": row["gp_hi"] - row["gp_lo"], **row})
    return rows


def mean_ci(x) -> tuple[float, float, float]:
    """Mean and 95% t-interval (scipy) of the finite values of ``x``."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return (float(x.mean()) if len(x) else np.nan, np.nan, np.nan)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    return float(x.mean()), float(lo), float(hi)


def fmt(m: tuple[float, float, float]) -> str:
    return "n/a" if not np.isfinite(m[0]) else f"{m[0]:.3f} [{m[1]:.3f}, {m[2]:.3f}]"


def tables(df) -> str:
    """The benchmark's tables: per multiverse and claim, each strategy's width, coverage and
    label disagreement at every budget; then gp-claims against Sobol's 48-universe figures."""
    out = []
    for (mv, claim), d in df.groupby(["multiverse", "claim"], sort=False):
        out.append(f"\n**{mv}: {claim}** (truth {d['truth'].iloc[0]:+.3f}, grid error {d['error'].iloc[0]:.3f}; "
                   f"{d['seed'].nunique()} seeds)\n")
        out.append("| strategy | budget | 95% CrI width | coverage | labels unlike the truth |\n|---|---|---|---|---|")
        for (s, b), x in d.groupby(["strategy", "budget"], sort=False):
            out.append(f"| {s} | {b} | {fmt(mean_ci(x['width']))} | {CB.rate(x['gp_covers'])} "
                       f"| {fmt(mean_ci(x['label_disagreement']))} |")
    out.append("\n**Targets**: the fewest universes at which gp-claims' mean is at or below Sobol's at 48 "
               "(target: labels at most 0.5x, width at most 0.75x)\n")
    out.append("| multiverse | claim | Sobol at 48: labels, width | gp-claims reaches labels at | gp-claims reaches width at |"
               "\n|---|---|---|---|---|")
    top = max(df["budget"])
    for (mv, claim), d in df.groupby(["multiverse", "claim"], sort=False):
        sob = d[(d["strategy"] == "sobol") & (d["budget"] == top)]
        gc = d[d["strategy"] == "gp-claims"].groupby("budget")[["label_disagreement", "width"]].mean()
        if sob.empty or gc.empty:
            continue
        cells = []
        for col in ("label_disagreement", "width"):
            target = sob[col].mean()
            hit = gc.index[gc[col] <= target]
            cells.append(f"{int(hit.min())} ({hit.min() / top:.2f}x)" if len(hit) else f"not by {top}")
        out.append(f"| {mv} | {claim} | {sob['label_disagreement'].mean():.3f}, {sob['width'].mean():.3f} "
                   f"| {cells[0]} | {cells[1]} |")
    out.append("\n**Coverage** of the 95% intervals over every seed and claim (target for gp-claims: at least 90%)\n")
    out.append("| strategy | " + " | ".join(f"at {b}" for b in sorted(df["budget"].unique())) + " |\n|---|"
               + "---|" * df["budget"].nunique())
    for s, d in df.groupby("strategy", sort=False):
        out.append(f"| {s} | " + " | ".join(CB.rate(x["gp_covers"]) for _, x in d.groupby("budget")) + " |")
    return "\n".join(out)


def main(argv) -> None:
    import pandas as pd
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--multiverses", nargs="+", default=list(MULTIVERSES), choices=list(MULTIVERSES))
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--tables", action="store_true", help="print the tables of the rows saved so far")
    args = ap.parse_args(argv)
    out = Path(args.out)
    torch.set_num_threads(1)
    if not args.tables:
        out.mkdir(parents=True, exist_ok=True)
        for name in args.multiverses:
            grid = MULTIVERSES[name]()
            path = out / f"{name}.csv"
            done = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=["strategy", "seed"])
            have = set(zip(done["strategy"], done["seed"]))
            for seed in range(args.seeds):
                for strategy in args.strategies:
                    if (strategy, seed) in have:
                        continue
                    t0 = time.perf_counter()
                    rows = pd.DataFrame(run(grid, strategy, seed))
                    rows.to_csv(path, mode="a", header=not path.exists(), index=False)
                    print(f"  {name} {strategy} seed {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                          flush=True)
    frames = [pd.read_csv(p) for p in sorted(out.glob("*.csv")) if p.stem in args.multiverses]
    if frames:
        print(tables(pd.concat(frames, ignore_index=True)))


if __name__ == "__main__":
    main(sys.argv[1:])
