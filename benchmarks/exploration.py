"""How well each design strategy explores: the surrogate's error against a known truth.

    .venv/bin/python benchmarks/exploration.py [--problems svm_breast_cancer,digits_model,branin,synthetic_mixed]
        [--strategies gp-ivr,ax-qnipv,sobol,random,oracle] [--seeds 5] [--initial 8] [--q 4] [--budget 48]
        [--ax-budget 32] [--oracle-budget 24] [--oracle-refit 8] [--surrogate rbf|matern]
        [--out results/benchmarks/exploration.csv]

For every problem of ``benchmarks/problems.py`` (a multiverse whose metric is known on a
dense grid), strategy and seed, the design runs round after round as in the workflow:
round 0 is ``--initial`` universes (Sobol for gp-ivr, Ax-qNIPV and sobol, the same
points; uniform draws for random), then rounds of ``--q``. After each round the same
evaluation surrogate (a one-hot ``SingleTaskGP``; its kernel is ``--surrogate``: ``rbf``, the
design's GP, or ``matern``, the report's; on problems with a categorical dimension also the
``MixedSingleTaskGP`` kernel) is fitted to the
trials so far, and its RMSE against the truth on the grid and its mean posterior variance
there are recorded. Rows are appended to ``--out`` (a rerun skips what is done).

``oracle`` is not a design strategy but a reference for what a design could do for this
evaluation surrogate: from the same Sobol start, it adds one universe at a time, chosen
from the whole truth grid by the RMSE against the truth that the surrogate would have
with that point added (it reads the truth, which no design can). Every grid point is
scored exactly with the hyperparameters held (:func:`screened_rmse`); the
``--oracle-refit`` best are refitted and the lowest kept. It is greedy, so a design that
plans ahead could in principle beat it; it stops at ``--oracle-budget``.

The summary tables give the mean over seeds with a 95% t-interval, and for each problem
the fewest trials at which gp-ivr's (and the oracle's) mean RMSE reaches sobol's mean
RMSE at its final budget (the issue's target: at most half the trials).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

FIELDS = ["problem", "strategy", "seed", "n", "rmse", "mean_variance", "rmse_kernel", "round_seconds"]


def surrogate_error(space, universes, y, grid, truth, seed, categorical="onehot", kernel="rbf"):
    """RMSE of the GP's posterior mean against ``truth`` on ``grid``, and its mean latent variance there."""
    from multiverse.gp import features, fit_gp, posterior_mean_std

    model = fit_gp(space, universes, y, seed, categorical=categorical, kernel=kernel)
    mean, std = posterior_mean_std(model, features(space, grid, model))
    return float(np.sqrt(np.mean((mean - truth) ** 2))), float(np.mean(std**2))


def screened_rmse(model, X, truth):
    """RMSE against ``truth`` of ``model``'s posterior mean after adding, alone, each row
    of ``X`` with its true value, for every row at once (hyperparameters held).

    Adding ``x_c`` with value ``y_c`` moves the mean by ``S[:, c] (y_c - m_c) / (S_cc + noise)``
    (``S`` the posterior covariance on ``X``), so the new squared error is
    ``|r|^2 + 2 a_c (S r)_c + a_c^2 |S[:, c]|^2`` with ``r = m - truth``: one N x N
    covariance and a matrix-vector product score all N candidates; the same as
    ``model.condition_on_observations`` point by point (tested).
    """
    import torch

    from multiverse.gp import noise_variance, outcome_scale

    truth = torch.as_tensor(truth, dtype=X.dtype)
    with torch.no_grad():
        post = model.posterior(X)
        cov, mean = post.mvn.covariance_matrix, post.mean.squeeze(-1)
    noise = float(noise_variance(model).mean()) * outcome_scale(model) ** 2
    r = mean - truth
    a = (truth - mean) / (cov.diagonal() + noise)
    sq = r @ r + 2 * a * (cov @ r) + a * a * (cov * cov).sum(0)
    return sq.clamp_min(0).div(len(truth)).sqrt().numpy()


def oracle_round(space, universes, y, n, seed, n_refit, grid, truth, kernel="rbf"):
    """``n`` universes, one at a time, from the whole truth grid: every grid point not yet
    in the trials is scored by :func:`screened_rmse` (the surrogate fitted to the trials,
    hyperparameters held); the ``n_refit`` best are each added with their true value and
    the surrogate refitted, and the one whose refitted RMSE is lowest is kept (a
    reference, not a design: it reads the truth)."""
    from multiverse.ids import derive_seed
    from multiverse.gp import features, fit_gp

    universes, y, new = list(universes), list(y), []
    for _ in range(n):
        done = {space.key(u) for u in universes}
        model = fit_gp(space, universes, y, derive_seed(seed, 99), kernel=kernel)
        score = screened_rmse(model, features(space, grid, model), truth)
        score[[i for i, g in enumerate(grid) if space.key(g) in done]] = np.inf
        top = [int(i) for i in np.argsort(score, kind="stable")[:n_refit] if np.isfinite(score[i])]
        cand, values = [grid[i] for i in top], truth[top]  # grid points: the truth is their value
        rmse = [surrogate_error(space, universes + [c], y + [float(v)], grid, truth, derive_seed(seed, 99),
                                kernel=kernel)[0]
                for c, v in zip(cand, values)]
        best = int(np.argmin(rmse))
        universes.append(cand[best])
        y.append(float(values[best]))
        new.append(cand[best])
    return new


def run_one(problem, strategy, seed, args, writer, done):
    """One strategy on one problem under one seed: rounds until the budget, one row per round."""
    from multiverse.spec import load_config, with_defaults
    from multiverse.design import design_round
    from multiverse.ids import derive_seed
    from multiverse.space import SearchSpace

    space = SearchSpace.from_config(problem.space)
    grid, truth = problem.grid()
    budget = {"ax-qnipv": min(args.budget, args.ax_budget),
              "oracle": min(args.budget, args.oracle_budget)}.get(strategy, args.budget)
    sizes = [args.initial] + [args.q] * math.ceil((budget - args.initial) / args.q)
    has_cat = bool(space.categorical)
    # the design section as a design job gets it: these settings, the schema's defaults for the rest
    config = load_config(ROOT / "config" / "config.yaml")
    config["design"] = {**{k: config["design"][k] for k in ("initial", "rounds", "batch")}, "outcomes": ["y"],
                        "strategy": "gp-ivr" if strategy in ("ax-qnipv", "oracle") else strategy,
                        "candidates": args.candidates, "reference": args.reference}
    design = with_defaults(config)["design"]
    records, universes, y = [], [], []
    for r in range(len(sizes)):
        start = time.perf_counter()
        if strategy == "ax-qnipv" and r > 0:
            from ax_qnipv import ax_qnipv_round

            new = ax_qnipv_round(problem.space, universes, y, sizes[r], derive_seed(seed, r))
        elif strategy == "oracle" and r > 0:
            new = oracle_round(space, universes, y, sizes[r], derive_seed(seed, 7, r),
                               args.oracle_refit, grid, truth, args.surrogate)
        else:
            new, _, _ = design_round(r, sizes[: r + 1], space, design, seed, records)
        seconds = time.perf_counter() - start
        values = problem.evaluate(new)
        for i, (u, v) in enumerate(zip(new, values)):
            records.append({"id": f"r{r}u{i:03d}", "params": u, "metrics": {"y": float(v)}})
            universes.append(u)
            y.append(float(v))
        n = len(universes)
        if (problem.name, strategy, seed, n) in done:
            continue
        rmse, var = surrogate_error(space, universes, y, grid, truth, derive_seed(seed, 99), kernel=args.surrogate)
        rmse_k = surrogate_error(space, universes, y, grid, truth, derive_seed(seed, 99), "kernel")[0] if has_cat else ""
        writer.writerow({"problem": problem.name, "strategy": strategy, "seed": seed, "n": n, "rmse": rmse,
                         "mean_variance": var, "rmse_kernel": rmse_k, "round_seconds": seconds})
        print(f"{problem.name:18s} {strategy:9s} seed {seed} n={n:3d} rmse={rmse:.4f} var={var:.5f} "
              f"({seconds:.1f} s)", flush=True)


def t_interval(x: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% t-interval over seeds."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    m = float(x.mean())
    if len(x) < 2:
        return m, math.nan, math.nan
    h = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return m, m - h, m + h


def summarise(path: Path, problems=None) -> str:
    """Markdown tables of RMSE and mean posterior variance by budget, and the target check."""
    import pandas as pd

    df = pd.read_csv(path)
    if problems:
        df = df[df["problem"].isin(problems)]
    out = []
    for prob, d in df.groupby("problem", sort=False):
        strategies = list(dict.fromkeys(d["strategy"]))
        for col, what in (("rmse", "surrogate RMSE against the truth"), ("mean_variance", "mean posterior variance on the grid")):
            out.append(f"\n{prob}: {what} (mean over {d['seed'].nunique()} seeds [95% t-interval])\n")
            out.append("| trials | " + " | ".join(strategies) + " |")
            out.append("|---|" + "---|" * len(strategies))
            for n in sorted(d["n"].unique()):
                cells = []
                for s in strategies:
                    x = d[(d["strategy"] == s) & (d["n"] == n)][col]
                    if len(x) == 0:
                        cells.append("")
                        continue
                    m, lo, hi = t_interval(x)
                    cells.append(f"{m:.4f} [{lo:.4f}, {hi:.4f}]" if col == "rmse" else f"{m:.2e} [{lo:.1e}, {hi:.1e}]")
                out.append(f"| {n} | " + " | ".join(cells) + " |")
        if {"gp-ivr", "sobol"} <= set(strategies):
            curve = lambda s: d[d["strategy"] == s].groupby("n")["rmse"].mean()  # noqa: E731
            ivr, sob = curve("gp-ivr"), curve("sobol")
            final_n, final = int(sob.index.max()), float(sob.iloc[-1])
            reach = ivr[ivr <= final]
            n_ivr = int(reach.index.min()) if len(reach) else None
            ratio = f"{n_ivr / final_n:.2f}x" if n_ivr else f"not reached within {int(ivr.index.max())}"
            out.append(f"\n{prob}: sobol's mean RMSE at {final_n} trials is {final:.4f}; gp-ivr reaches it at "
                       f"{n_ivr if n_ivr else '-'} trials ({ratio} the trials; target <= 0.5x)")
            if "oracle" in strategies:
                orc = curve("oracle")
                reach = orc[orc <= final]
                out.append(f"{prob}: the oracle (greedy with the truth, {d[d['strategy'] == 'oracle']['seed'].nunique()}"
                           f" seeds) reaches it at " + (f"{int(reach.index.min())} trials ({reach.index.min() / final_n:.2f}x)"
                           if len(reach) else f"- trials (not within {int(orc.index.max())}; "
                           f"its mean RMSE there is {float(orc.iloc[-1]):.4f})"))
        if d["rmse_kernel"].notna().any():
            k = d.dropna(subset=["rmse_kernel"])
            for s, g in k.groupby("strategy", sort=False):
                final = g[g["n"] == g["n"].max()]
                a, b = t_interval(final["rmse"]), t_interval(final["rmse_kernel"])
                out.append(f"{prob} / {s} at {int(g['n'].max())} trials: RMSE one-hot {a[0]:.4f} [{a[1]:.4f}, {a[2]:.4f}]"
                           f" vs categorical kernel {b[0]:.4f} [{b[1]:.4f}, {b[2]:.4f}]")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="svm_breast_cancer,digits_model,branin,synthetic_mixed")
    ap.add_argument("--strategies", default="gp-ivr,ax-qnipv,sobol,random")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--initial", type=int, default=8)
    ap.add_argument("--q", type=int, default=4)
    ap.add_argument("--budget", type=int, default=48)
    ap.add_argument("--ax-budget", type=int, default=32, help="Ax-qNIPV stops here (its rounds take minutes)")
    ap.add_argument("--oracle-budget", type=int, default=24, help="the oracle stops here (each pick screens the whole grid)")
    ap.add_argument("--oracle-refit", type=int, default=8,
                    help="grid points the oracle refits the surrogate for, per pick (the best by the screen)")
    ap.add_argument("--surrogate", choices=("rbf", "matern"), default="rbf",
                    help="kernel of the evaluation GP: rbf (the design's GP) or matern (the report's)")
    ap.add_argument("--candidates", type=int, default=512)
    ap.add_argument("--reference", type=int, default=256)
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "exploration.csv"))
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from problems import get_problem

    out = Path(args.out)
    problems = args.problems.split(",")
    if not args.summary_only:
        out.parent.mkdir(parents=True, exist_ok=True)
        done = set()
        if out.exists():
            with open(out) as fh:
                done = {(r["problem"], r["strategy"], int(r["seed"]), int(r["n"])) for r in csv.DictReader(fh)}
        new_file = not out.exists()
        with open(out, "a", newline="") as fh:
            writer = csv.DictWriter(fh, FIELDS)
            if new_file:
                writer.writeheader()
            for name in problems:
                problem = get_problem(name)
                for strategy in args.strategies.split(","):
                    for seed in range(args.seeds):
                        run_one(problem, strategy, seed, args, writer, done)
                        fh.flush()
    print(summarise(out, problems))


if __name__ == "__main__":
    main()
