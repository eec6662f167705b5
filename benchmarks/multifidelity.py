"""Multi-fidelity universes on real trainings at equal training compute: do more universes
at a low fidelity, a random subset continued to full fidelity (:mod:`multiverse.fidelity`),
decide more claims than today's design, with intervals that still hold?

The grids are the calibration benchmark's (:mod:`calibration`), each cell also measured at
a low fidelity (:func:`fidelity_grid`):

- digits: a universe of ``E`` epochs at the low fidelity is its first ``ceil(q E)`` epochs
  of the same trajectory (:func:`multiverse.fidelity.low_epochs`). Cost in
  epoch-equivalents: ``E`` at full fidelity, ``ceil(q E)`` at the low one, ``E - ceil(q E)``
  more when continued (it resumes).
- svm: the low fidelity trains each fold on a seeded, stratified fraction ``q`` of its
  training part. Cost: 1 at full fidelity, ``q`` at the low one (a linear cost model; an
  SVM's real cost grows faster with the training set, so it flatters the low fidelity's
  saving less than it might), and 1 more when continued (an SVM does not resume: the
  continued universe is fitted again on its whole training part).

Each cell is also measured at the low fidelity's half-way point (epoch ``ceil(ceil(q E) / 2)``;
fraction ``q / 2``), which the active design's score reads (:func:`multiverse.fidelity.active_score`).

A draw compares three designs at one training budget, today's design's compute in the same
draw (times ``--factors``):

- ``today``: the calibration benchmark's Sobol design (rounds 16, 8, 8, 8, 8: 48 universes at
  full fidelity) and its design-based answer;
- ``mf-uniform``: ``N`` Sobol universes at the low fidelity, each continued with one
  probability, chosen so that the expected compute is the budget;
- ``mf-active``: the same ``N`` universes, continued with probabilities proportional to how
  much the low fidelity's ``val_acc`` moved over its second half, at least ``--floor``
  times the uniform probability (default half: the workflow's default,
  :func:`multiverse.fidelity.default_floor`)
  (:func:`multiverse.fidelity.continuation_probabilities`), the expected compute again the
  budget (each universe's own continuation cost: :func:`budget_probabilities`).

A universe whose low fidelity is final (no epochs left, or diverged: a diverged run stays
diverged) is continued with probability 1 at no cost. The continuation draw is the
workflow's (:func:`multiverse.fidelity.continuation_draw`, ids ``r{round}u{index}``), and the
table is the one the workflow's ``aggregate`` writes for a multi-fidelity study, which the
report's own code analyses (:func:`calibration.analyse_table`).

    .venv/bin/python benchmarks/multifidelity.py [--grids svm digits] [--draws 50] [--configs 0.25:96 ...] \\
        [--factors 1 0.75 0.5] [--out FOLDER]

Prints, per grid, design and claim, with 95% Wilson intervals for rates: the coverage of the
design-based 95% interval (of :func:`calibration.design_truth`), the share decided where the
truth is clear, the share of wrong confident verdicts, the median interval width and the mean
compute per draw; per design the number of clear claims decided in >= 60% of draws; and per
multi-fidelity design and budget factor, that number and the compute it took.

Per-draw rows are appended to ``<out>/draws.csv`` as they are scored; a rerun with the same
``--out`` skips the draws already there.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import calibration as K  # noqa: E402
import problems  # noqa: E402
from multiverse.fidelity import UNIFORM_SHARE  # noqa: E402

OUT_DIR = K.CACHE_DIR / "multifidelity"
#: The low fidelity (a share of the epochs, or of the training data), and the floor of the
#: active design's probabilities as a share of the uniform probability (the workflow's default).
Q, FLOOR = 0.25, UNIFORM_SHARE
#: The metric whose low-fidelity movement the active design's score reads.
ACTIVE_METRIC = "val_acc"
DESIGNS = ("today", "mf-uniform", "mf-active")
#: A claim is decided "often" when in at least this share of draws.
OFTEN = 0.6


# --- grids with a low fidelity ------------------------------------------------------
@dataclass
class FidelityGrid:
    """A calibration grid (:class:`calibration.Grid`) with every cell also measured at a
    low fidelity ``q``: ``low[metric]`` and ``half[metric]`` are ``axes x seeds`` arrays
    like ``grid.values`` (``half``: at the low fidelity's half-way point). Costs, in
    epoch-equivalents, are ``axes`` arrays: a universe at full fidelity, at the low one,
    and continued from the low one to full."""

    grid: K.Grid
    q: float
    low: dict
    half: dict
    full_cost: np.ndarray
    low_cost: np.ndarray
    continue_cost: np.ndarray
    #: per cell, whether its low fidelity is its full fidelity (no epochs left)
    complete: np.ndarray
    cost_model: str

    def diverged_low(self) -> np.ndarray | None:
        """Per cell and seed, whether the low fidelity diverged (a non-finite converged-only metric)."""
        from multiverse import declaration

        only = [m for m in self.low if declaration(m)["converged_only"]]
        if not only:
            return None
        return np.any([~np.isfinite(self.low[m]) for m in only], axis=0)

    def final(self) -> np.ndarray:
        """Per cell and seed, whether the low fidelity is already final: no epochs left, or
        diverged (its first epochs are the full run's, so the full run diverges too)."""
        out = np.broadcast_to(self.complete[..., None], self.complete.shape + (K.SEEDS,)).copy()
        d = self.diverged_low()
        return out if d is None else out | d


def digits_fidelity(q: float = Q, cache_dir: Path | None = K.CACHE_DIR, grid: K.Grid | None = None) -> FidelityGrid:
    """The digits grid at the low fidelity ``ceil(q E)`` epochs of each universe's own
    trajectory (:class:`problems._DigitsMLP` trains a trajectory once for every epoch a
    call wants), and at ``ceil(ceil(q E) / 2)`` epochs."""
    from multiverse.fidelity import low_epochs

    grid = grid or K.digits_grid(cache_dir)
    p = problems.digits_model()
    settings = {**p.settings, "metrics": ["val_acc", "train_loss"], "q": q, "half": "ceil(low / 2)"}

    def epochs(u):
        low = low_epochs({"fraction": q}, int(u["epochs"]))
        return low, math.ceil(low / 2)

    def compute(universes, seed):
        at = [epochs(u) for u in universes]
        both = [{**u, "epochs": e[k]} for k in (0, 1) for u, e in zip(universes, at)]
        got = problems._DigitsMLP(train_seed=seed).scores(both)
        n = len(universes)
        return {f"{k}_{m}": v[a:a + n] for m, v in got.items() for k, a in (("low", 0), ("half", n))}

    values = K.cached_grid(f"digits_model_low-q{q:g}", grid.axes, settings, compute, cache_dir)
    low = {m: values[f"low_{m}"] for m in grid.values}
    half = {m: values[f"half_{m}"] for m in grid.values}
    for d in (low, half):
        d["train_loss"] = K.as_float32_loss(d["train_loss"])
    shape = [len(v) for v in grid.axes.values()]
    E = np.broadcast_to(np.array(grid.axes["epochs"], dtype=float).reshape(
        [-1 if n == "epochs" else 1 for n in grid.dims]), shape)
    low_e = np.vectorize(lambda e: float(low_epochs({"fraction": q}, int(e))))(E)
    complete = low_e >= E
    # where the low fidelity is the full run, its values are the grid's, bit for bit
    for m in grid.values:
        a, b = low[m][complete], grid.values[m][complete]
        assert np.array_equal(a, b, equal_nan=True), f"digits low fidelity of {m} differs from the full run"
    return FidelityGrid(grid, q, low, half, E.copy(), low_e, E - low_e, complete,
                        f"epochs: E at full fidelity, ceil({q:g} E) at the low one, E - ceil({q:g} E) to continue")


def svm_fraction_scores(cv: problems._SVMCV, universes: Sequence[Mapping[str, Any]], fractions: Sequence[float],
                        seed: int) -> dict[float, dict[str, np.ndarray]]:
    """Per fraction, the mean validation (``val_acc``) and training (``train_acc``, on the
    rows it trained on) accuracy over ``cv``'s folds of ``SVC(C, gamma)`` trained on that
    fraction of each fold's training part: a seeded stratified subset, nested (a smaller
    fraction's rows are among a larger one's). Features keep the fold's standardisation."""
    from sklearn.svm import SVC

    rng = np.random.default_rng(seed)
    subsets = []
    for a, b, _, _ in cv.folds:
        order = {c: rng.permutation(np.flatnonzero(b == c)) for c in np.unique(b)}
        subsets.append({f: np.sort(np.concatenate([o[:max(2, math.ceil(f * len(o)))] for o in order.values()]))
                        for f in fractions})
    out = {f: np.zeros((len(universes), 2)) for f in fractions}
    for i, u in enumerate(universes):
        for (a, b, c, d), sub in zip(cv.folds, subsets):
            for f in fractions:
                idx = sub[f]
                m = SVC(C=u["C"], gamma=u["gamma"], kernel=u.get("kernel", "rbf")).fit(a[idx], b[idx])
                out[f][i] += (m.score(c, d), m.score(a[idx], b[idx]))
    return {f: {"val_acc": v[:, 0] / len(cv.folds), "train_acc": v[:, 1] / len(cv.folds)} for f, v in out.items()}


def svm_fidelity(q: float = Q, cache_dir: Path | None = K.CACHE_DIR, grid: K.Grid | None = None) -> FidelityGrid:
    """The SVM grid with each fold trained on a fraction ``q`` (and ``q / 2``) of its
    training part; a seed is a fold split, and its subsets are seeded by it."""
    grid = grid or K.svm_grid(cache_dir)
    p = problems.svm_breast_cancer()
    settings = {**p.settings, "q": q, "subset": "stratified, nested, seeded by the fold split"}

    def compute(universes, seed):
        got = svm_fraction_scores(problems._SVMCV(seed=problems.SVM_SEED + seed), universes, (q, q / 2),
                                  problems.SVM_SEED + 1000 + seed)
        return {f"{k}_{m}": v for k, f in (("low", q), ("half", q / 2)) for m, v in got[f].items()}

    values = K.cached_grid(f"svm_breast_cancer_low-q{q:g}", grid.axes, settings, compute, cache_dir)
    shape = tuple(len(v) for v in grid.axes.values())
    return FidelityGrid(grid, q, {m: values[f"low_{m}"] for m in grid.values},
                        {m: values[f"half_{m}"] for m in grid.values}, np.ones(shape), np.full(shape, q),
                        np.ones(shape), np.zeros(shape, dtype=bool),
                        f"linear in the data: 1 at full fidelity, {q:g} at the low one, 1 more to continue (refit)")


FIDELITY_GRIDS = {"svm": svm_fidelity, "digits": digits_fidelity}


# --- the continuation at a budget ----------------------------------------------------
def budget_probabilities(score: np.ndarray, cost: np.ndarray, budget: float, floor: float = 0.1,
                         tol: float = 1e-9) -> np.ndarray:
    """Continuation probabilities (:func:`multiverse.fidelity.continuation_probabilities`:
    proportional to ``score``, at least ``floor``, at most 1) whose expected continuation
    compute ``sum_i p_i cost_i`` is ``budget``: a bisection on their expected count. Where
    the floor alone would overspend, the floor falls to the uniform share
    ``budget / sum(cost)``; where everything continued costs less, every p is 1."""
    from multiverse.fidelity import continuation_probabilities

    cost = np.asarray(cost, dtype=float)
    n = len(cost)
    if n == 0:
        return np.zeros(0)
    if budget <= 0:
        raise ValueError(f"no compute left to continue any universe (budget {budget:.3g})")
    if budget >= cost.sum():
        return np.ones(n)
    floor = min(floor, budget / cost.sum())
    spend = lambda e: float(continuation_probabilities(score, e, floor) @ cost)  # noqa: E731
    lo, hi = floor * n, float(n)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if spend(mid) < budget else (lo, mid)
        if hi - lo < tol:
            break
    return continuation_probabilities(score, (lo + hi) / 2, floor)


def rounds_of(n: int) -> tuple[int, ...]:
    """Today's round layout (16, 8, 8, 8, 8) scaled to ``n`` universes."""
    rounds = [max(1, round(r * n / sum(K.ROUNDS))) for r in K.ROUNDS]
    rounds[0] += n - sum(rounds)
    return tuple(rounds)


SOBOL = {"strategy": "sobol"}


def today_table(fg: FidelityGrid, seed: int):
    """Today's design on the grid (:func:`calibration.draw_table`, Sobol throughout) and
    its training compute."""
    df, _ = K.draw_table(fg.grid, seed, K.ROUNDS, SOBOL)
    cells = [K.cell_of(fg.grid, r) for r in df.to_dict("records")]
    return df, float(sum(fg.full_cost[c] for c in cells))


def fidelity_table(fg: FidelityGrid, seed: int, n: int, probability: str, budget: float, floor: float = FLOOR):
    """One multi-fidelity draw: ``n`` Sobol universes (today's rounds scaled,
    :func:`rounds_of`) snapped to the grid, each read from one seed at random at the low
    fidelity, and continued with probabilities (``uniform`` or ``active``) whose expected
    compute is ``budget``; ``floor``: the active probabilities' floor as a share of the
    uniform probability (``rest / sum(cost)``). Returns the study table as the workflow's
    ``aggregate`` writes it for a multi-fidelity study (``low_<metric>``; ``<metric>`` NaN where not continued;
    ``continued``, ``continuation_probability``, ``fidelity_trained``; status
    ``not_continued`` where not continued) and the draw's accounting."""
    from multiverse.fidelity import NOT_CONTINUED, continuation_draw

    df, _ = K.draw_table(fg.grid, seed, rounds_of(n), SOBOL)
    rows = df.to_dict("records")
    cells = [K.cell_of(fg.grid, r) for r in rows]
    at = [c + (int(r["seed"]),) for c, r in zip(cells, rows)]
    final = np.array([fg.final()[a] for a in at], dtype=bool)
    low_cost = np.array([fg.low_cost[c] for c in cells])
    cont_cost = np.where(final, 0.0, np.array([fg.continue_cost[c] for c in cells]))
    rest = budget - low_cost.sum()
    p = np.ones(len(rows))
    if (~final).any():
        if probability == "uniform":
            score = np.ones(int((~final).sum()))
        elif probability == "active":
            score = np.array([abs(fg.low[ACTIVE_METRIC][a] - fg.half[ACTIVE_METRIC][a]) for a in at])[~final]
        else:
            raise ValueError(f"unknown continuation probability {probability!r}")
        uniform = rest / cont_cost[~final].sum() if cont_cost[~final].sum() > 0 else 1.0
        p[~final] = budget_probabilities(score, cont_cost[~final], rest, floor * min(uniform, 1.0))
    continued = final | continuation_draw(seed, df["universe"].tolist(), p)
    diverged_low = fg.diverged_low()
    for m in fg.grid.values:
        df["low_" + m] = [float(fg.low[m][a]) for a in at]
        df[m] = np.where(continued, df[m].to_numpy(dtype=float), np.nan)
    if diverged_low is not None:
        # a run diverged at the low fidelity is diverged at full fidelity (the same first epochs)
        df.loc[np.array([bool(diverged_low[a]) for a in at]), "status"] = "diverged"
    df.loc[~continued, "status"] = NOT_CONTINUED
    df["continued"], df["continuation_probability"] = continued, p
    df["fidelity_trained"] = continued & ~final
    info = {"budget": float(budget), "low_compute": float(low_cost.sum()),
            "expected_compute": float(low_cost.sum() + p @ cont_cost),
            "compute": float(low_cost.sum() + cont_cost[continued].sum()),
            "continued": int(continued.sum()), "final": int(final.sum()),
            "share": float(p[~final].mean()) if (~final).any() else 1.0}
    return df, info


# --- the benchmark ------------------------------------------------------------------
def label(design: str, q: float, n: int) -> str:
    return design if design == "today" else f"{design} (q={q:g}, N={n})"


def run_designs(fidelity: Mapping[float, FidelityGrid], seed: int, configs: Sequence[tuple[float, int]],
                factors: Sequence[float] = (1.0,), report: Mapping[str, Any] | None = None, floor: float = FLOOR,
                designs: Sequence[str] = DESIGNS, skip: frozenset = frozenset()) -> list[dict[str, Any]]:
    """One draw seed: today's design, then each multi-fidelity design per ``(q, N)`` config
    (``fidelity``: the grid at each ``q``) and budget factor ``f``, with ``round(f N)``
    universes (at least :data:`multiverse.estimators.MIN_DRAWN`) at ``f`` times today's
    compute; every claim scored (:func:`calibration.analyse_table`). ``skip``: the
    ``(label, factor, seed)`` already scored."""
    from multiverse.estimators import MIN_DRAWN

    fg = next(iter(fidelity.values()))
    df, budget = today_table(fg, seed)
    rows = []
    if "today" in designs and (label("today", 1, len(df)), 1.0, seed) not in skip:
        t0 = time.perf_counter()
        scored = K.analyse_table(fg.grid, df, seed, report)
        for r in scored:
            rows.append({"design": "today", "label": label("today", 1, len(df)), "q": 1.0, "N": len(df),
                         "factor": 1.0, "today_compute": budget, "budget": budget, "low_compute": 0.0,
                         "expected_compute": budget, "compute": budget, "continued": len(df), "final": 0,
                         "share": 1.0, **r, "seconds": time.perf_counter() - t0})
    for q, n in configs:
        for factor in factors:
            for design in designs:
                if design == "today" or (label(design, q, n), factor, seed) in skip:
                    continue
                t0 = time.perf_counter()
                table, info = fidelity_table(fidelity[q], seed, max(MIN_DRAWN, round(n * factor)),
                                             design.removeprefix("mf-"), factor * budget, floor)
                scored = K.analyse_table(fg.grid, table, seed, report)
                for r in scored:
                    rows.append({"design": design, "label": label(design, q, n), "q": q, "N": n, "factor": factor,
                                 "today_compute": budget, **info, **r, "seconds": time.perf_counter() - t0})
    return rows


# --- tables -------------------------------------------------------------------------
def claims_table(df, factor: float = 1.0):
    """Per grid, claim and design at one budget ``factor`` (today's design beside it): the
    design-based answer's coverage, decided where clear, wrong confident verdicts, median
    width and mean compute per draw."""
    import pandas as pd

    out = []
    d1 = df[(df["factor"] == factor) | (df["design"] == "today")]
    for (g, c), dc in d1.groupby(["grid", "claim"], sort=False):
        for lab, d in dc.groupby("label", sort=False):
            clear = d[d["clear"]]
            out.append({"grid": g, "claim": c, "design": lab, "draws": len(d),
                        "coverage": K.rate(d["design_covers"]),
                        "decided where clear": K.rate(clear["design_decided"]) if len(clear) else "truth not clear",
                        "wrong confident": K.rate(d["design_wrong"]),
                        "median width": f"{(d['design_hi'] - d['design_lo']).median():.3f}",
                        "mean compute": f"{d['compute'].mean():.1f}"})
    return pd.DataFrame(out)


def decided_often(d) -> tuple[int, int]:
    """Of the clear claims (grid and claim), how many are decided in >= OFTEN of draws, and how many there are."""
    clear = d[d["clear"]].groupby(["grid", "claim"])["design_decided"].mean()
    return int((clear >= OFTEN).sum()), len(clear)


def designs_table(df):
    """Per design and budget factor: clear claims decided in >= 60% of draws, the lowest
    coverage and highest wrong-confident rate of any claim, and the mean compute per draw
    (per grid, and as a share of today's)."""
    import pandas as pd

    today = df[df["design"] == "today"]
    base = today.groupby("grid")["compute"].mean()
    k_today, _ = decided_often(today)
    out = []
    for (lab, f), d in df.groupby(["label", "factor"], sort=False):
        k, n = decided_often(d)
        cov = d.groupby(["grid", "claim"])["design_covers"].mean()
        wr = d.groupby(["grid", "claim"])["design_wrong"].mean()
        comp = d.groupby("grid")["compute"].mean()
        out.append({"design": lab, "budget factor": f, "draws": int(d.groupby("grid")["draw"].nunique().min()),
                    f"clear claims decided in >= {OFTEN:.0%} of draws": f"{k} of {n}",
                    "lowest coverage": f"{cov.min():.2f} ({cov.idxmin()[1]})",
                    "highest wrong confident": f"{wr.max():.2f}",
                    "mean compute per draw": ", ".join(f"{g} {comp[g]:.1f} ({comp[g] / base[g]:.2f}x)"
                                                       for g in comp.index),
                    "matches today's decided count": "-" if lab == "today" else ("yes" if k >= k_today else "no")})
    return pd.DataFrame(out)


def compute_to_match(df):
    """Per multi-fidelity design: the smallest budget factor (and its compute) whose count
    of often-decided clear claims is today's or more."""
    import pandas as pd

    k_today, _ = decided_often(df[df["design"] == "today"])
    out = []
    for lab, d in df[df["design"] != "today"].groupby("label", sort=False):
        ok = [f for f, dd in d.groupby("factor") if decided_often(dd)[0] >= k_today]
        out.append({"design": lab, "today's count": k_today, "factors tried": ", ".join(f"{f:g}" for f in
                                                                                      sorted(d["factor"].unique())),
                    "smallest factor matching it": f"{min(ok):g}" if ok else "none tried"})
    return pd.DataFrame(out)


def read_done(path: Path) -> frozenset:
    """The ``(grid, label, factor, draw)`` already scored in a per-draw rows file."""
    import pandas as pd

    if not path.exists():
        return frozenset()
    df = pd.read_csv(path)
    return frozenset(zip(df["grid"], df["label"], df["factor"].astype(float), df["draw"].astype(int)))


def main(argv: Sequence[str]) -> None:
    import pandas as pd
    import torch
    import yaml

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grids", nargs="+", default=list(FIDELITY_GRIDS), choices=list(FIDELITY_GRIDS))
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--first", type=int, default=0, help="seed of the first draw")
    ap.add_argument("--configs", nargs="+", default=[f"{Q:g}:96"], metavar="Q:N",
                    help="multi-fidelity designs: the low fidelity q and the universes N")
    ap.add_argument("--factors", nargs="+", type=float, default=[1.0],
                    help="budgets, as factors of today's compute (N scales with them)")
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--floor", type=float, default=FLOOR,
                    help="mf-active's floor, as a share of the uniform probability")
    ap.add_argument("--out", default=str(OUT_DIR), help="folder for the per-draw rows (draws.csv)")
    ap.add_argument("--report", nargs="*", default=[], metavar="KEY=VALUE",
                    help="report settings that differ from the defaults")
    args = ap.parse_args(argv)
    report = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.report)}
    configs = [(float(q), int(n)) for q, n in (c.split(":") for c in args.configs)]
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "draws.csv"
    skip = read_done(path)
    for name in args.grids:
        start = time.perf_counter()
        grid = K.GRIDS[name]()
        fidelity = {q: FIDELITY_GRIDS[name](q, grid=grid) for q in sorted({q for q, _ in configs})}
        print(f"# {name}: {grid.description} (grids ready in {time.perf_counter() - start:.0f} s); cost model: "
              + "; ".join(f"q={q:g}: {fg.cost_model}" for q, fg in fidelity.items()), flush=True)
        own = frozenset((lab, f, s) for g, lab, f, s in skip if g == name)
        for s in range(args.first, args.first + args.draws):
            t0 = time.perf_counter()
            rows = [{"grid": name, **r} for r in run_designs(fidelity, s, configs, args.factors, report, args.floor,
                                                              args.designs, own)]
            if rows:
                pd.DataFrame(rows).to_csv(path, mode="a", header=not path.exists(), index=False)
            print(f"  draw {s}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    df = pd.read_csv(path)
    df = df[df["grid"].isin(args.grids) & df["draw"].between(args.first, args.first + args.draws - 1)]
    keep = {"today"} | {label(d, q, n) for d in args.designs for q, n in configs}
    df = df[df["label"].isin(keep) & (df["factor"].isin(args.factors) | (df["design"] == "today"))]
    for f in sorted(set(args.factors), reverse=True):
        print(f"Budget factor {f:g}:")
        print(claims_table(df, f).to_markdown(index=False))
        print()
    print(designs_table(df).to_markdown(index=False))
    print()
    print(compute_to_match(df).to_markdown(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
