"""Calibration of the claims on real trainings: do the report's 95% intervals hold the
truth, and how often is a confident verdict wrong?

A *grid* is a dense full-factorial multiverse of real trainings with two training seeds
per cell (:func:`svm_grid`, :func:`digits_grid`); the truth of a claim is its statistic
computed from the grid's seed means (:func:`truth`). A *draw* runs the workflow's design
on the grid's space (round 0 Sobol, then gp-ivr rounds, :func:`multiverse.design.design_round`),
snaps every chosen universe to the nearest unused grid cell, reads each universe's
outcome from one of the cell's two seeds at random, and analyses the resulting table
with the report's own code (:func:`multiverse.report_analysis.analyse`). Hundreds of draws then
cost no training.

    .venv/bin/python benchmarks/calibration.py [--grids svm digits] [--draws 50] [--out FOLDER] [--report KEY=VALUE ...]

Prints, per grid and claim, with 95% Wilson intervals for rates: the coverage of the
GP's and the observed universes' 95% intervals, the share of decided verdicts where the
truth is clear, the share of wrong confident verdicts, the median absolute error of
"share of the multiverse where it holds", and the share of the multiverse whose local
holds/fails/uncertain label disagrees with the truth's.

Grids are computed once and cached in ``results/benchmarks/calibration/<name>_<layout>.npz``
(the layout, e.g. ``C40-gamma40-seeds2``, is in the file name; a hash of the problem's
settings inside it).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import problems  # noqa: E402

CACHE_DIR = problems.CACHE_DIR / "calibration"
SEEDS = 2
#: The workflow's default design: 16 Sobol universes, then four gp-ivr rounds of 8.
ROUNDS = (16, 8, 8, 8, 8)


def report_defaults() -> dict:
    """The default study's report settings (``config/config.yaml`` with the schema's defaults)."""
    from multiverse.spec import load_config, with_defaults

    return with_defaults(load_config(problems.ROOT / "config" / "config.yaml"))["report"]


#: A truth is *clear* when it lies further than this many grid errors from the claim's threshold.
CLEAR = 2.0


# --- grids ---------------------------------------------------------------------------
@dataclass
class Grid:
    """A full-factorial multiverse of real trainings.

    ``axes`` holds each dimension's values (in the space's order); ``values[metric]``
    is an ``axis_1 x ... x axis_d x seeds`` array (NaN where a seed diverged, for
    metrics declared ``converged_only``).
    """

    name: str
    description: str
    space: dict
    axes: dict
    values: dict
    outcomes: list
    claims: list

    @property
    def dims(self) -> list[str]:
        return list(self.axes)

    def mean(self, metric: str) -> np.ndarray:
        """Each cell's mean over the seeds (NaN where any seed is NaN)."""
        return self.values[metric].mean(-1)

    def diverged(self) -> np.ndarray | None:
        """Per cell and seed, whether the run diverged (a non-finite converged-only metric)."""
        from multiverse import declaration

        only = [m for m in self.values if declaration(m)["converged_only"]]
        if not only:
            return None
        return np.any([~np.isfinite(self.values[m]) for m in only], axis=0)


def layout(axes: Mapping[str, Sequence]) -> str:
    return "-".join(f"{n}{len(v)}" for n, v in axes.items()) + f"-seeds{SEEDS}"


def cached_grid(name: str, axes: dict, settings: dict, compute: Callable[[list[dict], int], dict],
                cache_dir: Path | None = CACHE_DIR) -> dict:
    """``compute(universes, seed)`` -> {metric: values} for every seed, as ``axes x seeds``
    arrays; cached under a path naming the layout, checked against a hash of the settings."""

    universes = [dict(zip(axes, v)) for v in itertools.product(*axes.values())]
    key = hashlib.sha256(json.dumps({"name": name, "axes": axes, "settings": settings}, sort_keys=True,
                                    default=str).encode()).hexdigest()
    path = None if cache_dir is None else Path(cache_dir) / f"{name}_{layout(axes)}.npz"
    if path is not None and path.exists():
        with np.load(path, allow_pickle=False) as f:
            if str(f["key"]) == key:
                return {m: f[m].copy() for m in f.files if m != "key"}
    per_seed = [compute(universes, s) for s in range(SEEDS)]
    shape = [len(v) for v in axes.values()] + [SEEDS]
    values = {m: np.stack([p[m] for p in per_seed], -1).reshape(shape) for m in per_seed[0]}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.npz")
        np.savez(tmp, key=np.array(key), **values)
        tmp.replace(path)
    return values


def svm_grid(cache_dir: Path | None = CACHE_DIR) -> Grid:
    """Bell et al.'s RBF SVM on breast cancer (:func:`problems.svm_breast_cancer`'s grid):
    C x gamma, 40 x 40; a seed is a fold split. Smooth, with a steep edge at large gamma."""
    p = problems.svm_breast_cancer()
    axes = {n: problems.axis(s, p.grid_sizes[n]) for n, s in p.space.items()}
    values = cached_grid("svm_breast_cancer", axes, p.settings,
                         lambda us, s: problems._SVMCV(seed=problems.SVM_SEED + s).scores(us), cache_dir)
    claims = [
        {"name": "svm_trend_C", "type": "trend", "metric": "val_acc", "dimension": "C", "direction": "increasing"},
        {"name": "svm_trend_gamma", "type": "trend", "metric": "val_acc", "dimension": "gamma", "direction": "decreasing"},
        {"name": "svm_train_vs_val", "type": "correlation", "x": "train_acc", "y": "val_acc", "relation": "positive"},
    ]
    return Grid("svm", p.description + "; 2 fold splits", p.space, axes, values, ["val_acc"], claims)


def digits_grid(cache_dir: Path | None = CACHE_DIR) -> Grid:
    """The digits MLP (:func:`problems.digits_model`'s grid): lr x weight decay x epochs x
    optimizer, 14 x 14 x 12 x 3; a seed is an initialisation and minibatch order. It has a
    cliff: every optimizer collapses to chance at large learning rates, Adam from a far
    smaller one than SGD."""
    p = problems.digits_model()
    axes = {n: problems.axis(s, p.grid_sizes.get(n, 0)) for n, s in p.space.items()}
    settings = {**p.settings, "metrics": ["val_acc", "train_loss"]}
    values = cached_grid("digits_model", axes, settings,
                         lambda us, s: problems._DigitsMLP(train_seed=s).scores(us), cache_dir)
    values["train_loss"] = as_float32_loss(values["train_loss"])
    claims = [
        {"name": "digits_adam_vs_sgd", "type": "comparison", "metric": "val_acc", "dimension": "optimizer",
         "a": ["adam"], "b": ["sgd"], "relation": ">="},
        {"name": "digits_trend_epochs", "type": "trend", "metric": "val_acc", "dimension": "epochs",
         "direction": "increasing"},
        {"name": "digits_loss_vs_acc", "type": "correlation", "x": "train_loss", "y": "val_acc", "relation": "negative"},
        {"name": "digits_expected_best", "type": "expected_best", "metric": "val_acc", "dimension": "optimizer",
         "a": ["adam"], "b": ["sgd"], "relation": ">=", "min_budget": 2},
        # harder ones: a near-tie, a trend across the cliff that fails, a small expected-best lead
        {"name": "digits_adam_vs_momentum", "type": "comparison", "metric": "val_acc", "dimension": "optimizer",
         "a": ["adam"], "b": ["momentum"], "relation": ">="},
        {"name": "digits_trend_lr", "type": "trend", "metric": "val_acc", "dimension": "lr", "direction": "increasing"},
        {"name": "digits_expected_best_momentum", "type": "expected_best", "metric": "val_acc",
         "dimension": "optimizer", "a": ["adam"], "b": ["momentum"], "relation": ">=", "min_budget": 2},
    ]
    return Grid("digits", p.description + "; 2 training seeds", p.space, axes, values, ["val_acc", "train_loss"],
                claims)


def as_float32_loss(loss: np.ndarray) -> np.ndarray:
    """A float64 grid's training loss as the workflow's float32 trainer reports it: NaN
    (diverged) where it is no longer finite in float32, i.e. beyond float32's largest value."""
    return np.where(loss > np.finfo(np.float32).max, np.nan, loss)


def cell_of(grid: Grid, row: Mapping[str, Any]) -> tuple[int, ...]:
    """The grid cell of a draw's table row (its params are grid values)."""
    return tuple(grid.axes[n].index(row[n]) for n in grid.dims)


GRIDS: dict[str, Callable[..., Grid]] = {"svm": svm_grid, "digits": digits_grid}


# --- the truth of a claim on a grid --------------------------------------------------
def positions(grid: Grid, name: str) -> np.ndarray:
    from multiverse.space import SearchSpace

    return np.asarray(SearchSpace.from_config(grid.space)[name].to_unit(grid.axes[name]), dtype=float)


def local_effects(grid: Grid, claim: Mapping[str, Any], values: np.ndarray) -> np.ndarray:
    """A comparison's or trend's local effect at every cell of the other dimensions
    (``values``: one array over the grid's axes): its type's ``grid_local_effects``."""
    from multiverse.claims import kind
    from multiverse.space import SearchSpace

    return kind(claim).grid_local_effects(claim, SearchSpace.from_config(grid.space), grid.axes, values)


def statistic(grid: Grid, claim: Mapping[str, Any], values: Mapping[str, np.ndarray],
              budgets: Sequence[int] = ()) -> float:
    """A claim's statistic over the whole grid, from per-cell ``values`` (``{metric: axes
    array}``; for expected best ``axes x seeds`` single-seed outcomes): its type's own
    ``grid_statistic`` (:class:`multiverse.claims.contract.ClaimType`)."""
    from multiverse.claims import kind
    from multiverse.space import SearchSpace

    return kind(claim).grid_statistic(claim, SearchSpace.from_config(grid.space), grid.axes, values, budgets)


def truth(grid: Grid, claim: Mapping[str, Any], budgets: Sequence[int] = ()) -> dict[str, float]:
    """The claim's true statistic (from the seed means; for expected best, every seed's
    outcome is a draw) and its grid error: half the difference between the statistic
    of seed 0 alone and of seed 1 alone (the standard error of a mean of two)."""
    metrics = {m for k in ("metric", "x", "y") if k in claim for m in [claim[k]]}
    if claim.get("type") == "expected_best":
        full = {m: grid.values[m] for m in metrics}
    else:
        full = {m: grid.mean(m) for m in metrics}
    per_seed = [statistic(grid, claim, {m: grid.values[m][..., s] for m in metrics}, budgets) for s in range(SEEDS)]
    return {"truth": statistic(grid, claim, full, budgets), "error": abs(per_seed[0] - per_seed[1]) / 2,
            "one_seed": float(np.mean(per_seed))}


def design_truth(grid: Grid, claim: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
    """What the design-based answer estimates: the claim's statistic over the grid, of
    the outcomes as one training run reports them. For a statistic linear in the
    outcomes (a comparison, a trend) that is the truth of the seed means; Kendall's tau
    reads each universe's one outcome, seed noise included, so its truth is the mean of
    the per-seed taus (an expected best reads single draws already)."""
    from multiverse.spec import spec_of

    t = truth(grid, claim, budgets)
    return t["one_seed"] if spec_of(claim).design_reads_one_run else t["truth"]


def holds(effect: float, claim: Mapping[str, Any]) -> bool:
    """Whether a (true) statistic satisfies the claim (:func:`multiverse.stats.holds_mask`)."""
    from multiverse import stats
    from multiverse.spec import claims as spec_claims

    return bool(stats.holds_mask(np.array([effect]), spec_claims.relation(claim), spec_claims.margin(claim))[0])


def true_labels(grid: Grid, claim: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """A comparison's or trend's local effects at every cell of the other dimensions and
    their true labels: holds or fails beyond ``CLEAR`` grid errors of 0 (the root mean
    square of the per-cell seed-half-differences), else uncertain."""
    m = grid.mean(claim["metric"])
    local = local_effects(grid, claim, m)
    halves = [local_effects(grid, claim, grid.values[claim["metric"]][..., s]) for s in range(SEEDS)]
    err = float(np.sqrt(np.nanmean(((halves[0] - halves[1]) / 2) ** 2)))
    from multiverse import stats
    from multiverse.spec import claims as spec_claims

    sign = stats.SIGN[spec_claims.relation(claim)]
    labels = np.where(sign * local > CLEAR * err, "holds", np.where(sign * local < -CLEAR * err, "fails", "uncertain"))
    return local, labels


# --- a draw -----------------------------------------------------------------------
def snap(grid: Grid, space, universe: Mapping[str, Any], used: set) -> tuple[int, ...]:
    """The grid cell nearest ``universe`` (in the space's unit coordinates) that no
    universe of the draw holds yet, with the same categorical levels; searched among
    the 4 nearest values of each numeric axis first (a dense grid has one free there),
    then among all."""
    best, best_d = None, math.inf
    cats = {n: grid.axes[n].index(universe[n]) for n in grid.dims if space[n].is_categorical}
    numeric = [n for n in grid.dims if not space[n].is_categorical]
    # per numeric dimension, its axis' positions sorted by distance to the universe's
    dist = {n: (positions(grid, n) - float(space[n].to_unit([universe[n]])[0])) ** 2 for n in numeric}
    order = {n: np.argsort(dist[n], kind="stable") for n in numeric}
    for width in (4, max(len(a) for a in grid.axes.values())):
        for combo in itertools.product(*(order[n][:width] for n in numeric)):
            idx = dict(zip(numeric, (int(i) for i in combo)), **cats)
            cell = tuple(idx[n] for n in grid.dims)
            if cell in used:
                continue
            d = sum(dist[n][idx[n]] for n in numeric)
            if d < best_d:
                best, best_d = cell, d
        if best is not None:
            return best
    raise ValueError("no unused grid cell left")


def draw_table(grid: Grid, seed: int, rounds: Sequence[int] = ROUNDS, design: Mapping[str, Any] | None = None,
               seeds_read: int = 1):
    """One draw: the workflow's design rounds on the grid's space, each universe snapped
    to a grid cell and read from one of its seeds at random. Returns the study table (as
    the workflow's ``aggregate`` writes it: one row per universe and seed) and the cells.

    ``seeds_read=2``: the table holds both of every universe's seeds (as a study with
    ``training.seeds: 2`` trains them), so that the report fits each universe's own seed
    noise; the design still reads the one seed drawn at random, so the universes are
    those of the ``seeds_read=1`` draw."""
    import pandas as pd

    from multiverse.design import design_round, sampling_record
    from multiverse.ids import derive_seed, universe_id
    from multiverse.space import SearchSpace

    space = SearchSpace.from_config(grid.space)
    design = {"strategy": "gp-ivr", "outcomes": grid.outcomes, "candidates": 512, "reference": 256,
              "replicates": 1, "categorical": "onehot", "sampling": "greedy", "uniform_share": 0.5, **(design or {})}
    rng = np.random.default_rng(derive_seed(seed, 1))
    diverged = grid.diverged()
    records, rows, used = [], [], set()
    for r in range(len(rounds)):
        # round 0 is Sobol for every strategy (random included), so strategies start alike
        settings = design if r else {**design, "strategy": "sobol"}
        new, _, info = design_round(r, list(rounds), space, settings, derive_seed(seed, 2), records)
        drawn = sampling_record(r, info["strategy"], info, len(new))
        for i, u in enumerate(new):
            cell = snap(grid, space, u, used)
            used.add(cell)
            s = int(rng.integers(SEEDS))
            params = {n: grid.axes[n][j] for n, j in zip(grid.dims, cell)}
            metrics = {m: float(v[cell + (s,)]) for m, v in grid.values.items()}
            status = "diverged" if diverged is not None and diverged[cell + (s,)] else "ok"
            uid = universe_id(r, i)
            records.append({"id": uid, "params": params, "status": status, "metrics": metrics})
            for k in range(seeds_read) if seeds_read > 1 else [s]:
                metrics = {m: float(v[cell + (k,)]) for m, v in grid.values.items()}
                status = "diverged" if diverged is not None and diverged[cell + (k,)] else "ok"
                rows.append({"universe": uid, "round": r, "strategy": info["strategy"], "seed": k, "status": status,
                             **params, **metrics,
                             "design_weight": drawn[i]["weight"], "design_draws": drawn[i]["draws"]})
    df = pd.DataFrame(rows)
    for col in ("design_weight", "design_draws"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df, used


def study_config(grid: Grid, seed: int, report: Mapping[str, Any] | None = None) -> dict:
    return {"seed": seed, "space": grid.space, "claims": grid.claims, "report": {**report_defaults(), **(report or {})},
            "design": {"strategy": "gp-ivr", "outcomes": grid.outcomes}}


# --- scoring ------------------------------------------------------------------------
DECIDED = ("holds", "fails", "equivalent")


def covers(answer: Mapping[str, Any], value: float) -> float:
    """1 if ``answer``'s 95% interval holds ``value``, 0 if not, NaN without an interval."""
    lo, hi = answer.get("effect_lo", np.nan), answer.get("effect_hi", np.nan)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return np.nan
    return float(lo <= value <= hi)


def wrong(verdict: str, true_holds: bool) -> bool:
    """A confident verdict on the wrong side of the truth."""
    return (verdict == "holds" and not true_holds) or (verdict == "fails" and true_holds)


def score(grid: Grid, result, labels_truth=None, cells=None) -> dict[str, Any]:
    """One claim's result of one draw (:class:`multiverse.claims.contract.ClaimResult`)
    against the grid's truth."""
    claim = result.claim
    gp, obs = result.gp, result.observed
    # an expected-best answer with too few universes in a group has no budgets: its truth is
    # then read at the claim's smallest budget (the draw counts as undecided, not as a crash)
    budgets = gp.get("budgets") or ([claim.get("min_budget", 1)] if claim.get("type") == "expected_best" else ())
    t = truth(grid, claim, budgets)
    out = {"claim": claim["name"], "type": result.type, "truth": t["truth"], "error": t["error"],
           "clear": abs(t["truth"]) > CLEAR * t["error"], "true_holds": holds(t["truth"], claim),
           "gp_effect": gp.get("effect", np.nan), "gp_lo": gp.get("effect_lo", np.nan),
           "gp_hi": gp.get("effect_hi", np.nan), "gp_verdict": gp["verdict"], "gp_covers": covers(gp, t["truth"]),
           "obs_verdict": obs["verdict"]}
    if claim.get("type") == "expected_best":
        ot = truth(grid, claim, obs.get("budgets_observed") or ())["truth"] if obs.get("budgets_observed") else np.nan
        out["obs_covers"] = covers(obs, ot) if np.isfinite(ot) else np.nan
    else:
        out["obs_covers"] = covers(obs, t["truth"])
    des = result.design or {"verdict": "too few universes"}
    out["design_effect"], out["design_lo"], out["design_hi"] = (des.get("effect", np.nan), des.get("effect_lo", np.nan),
                                                                 des.get("effect_hi", np.nan))
    out["design_truth"] = design_truth(grid, claim, budgets)
    out["design_verdict"], out["design_covers"] = des["verdict"], covers(des, out["design_truth"])
    out["design_decided"] = des["verdict"] in DECIDED
    out["design_wrong"] = wrong(des["verdict"], out["true_holds"])
    out["gp_decided"] = gp["verdict"] in DECIDED
    out["gp_wrong"] = wrong(gp["verdict"], out["true_holds"])
    out["obs_decided"] = obs["verdict"] in DECIDED
    out["obs_wrong"] = wrong(obs["verdict"], out["true_holds"])
    out["share_error"], out["label_disagreement"] = np.nan, np.nan
    if labels_truth is not None and np.isfinite(gp.get("fraction_holds", np.nan)):
        local, true_lab = labels_truth
        out["share_error"] = float(gp["fraction_holds"] - np.mean([holds(v, claim) for v in local.ravel()]))
        if cells is not None and (gp.get("regions") or {}).get("labels") is not None:
            lab = np.asarray(gp["regions"]["labels"], dtype=object)
            out["label_disagreement"] = float(np.mean(lab != np.array([true_lab[c] for c in cells], dtype=object)))
    return out


def reference_cells(grid: Grid, ctx, claim: Mapping[str, Any]) -> list[tuple]:
    """The grid cell (of the dimensions other than the claim's) nearest each reference
    universe where the report labels a comparison or trend locally."""
    from multiverse.claims import comparison, trend

    space = ctx.space
    if claim.get("type", "comparison") == "trend":
        base, _ = trend.reference(ctx, claim)
        base = trend.trend_universes(space, claim, base, trend.conditions(space, claim)[0])[2]
    else:
        base = comparison.prepare(claim, ctx, 0, comparison.observed_answer)[3]
    others = [n for n in grid.dims if n != claim["dimension"]]
    out = []
    for u in base:
        idx = []
        for n in others:
            if space[n].is_categorical:
                idx.append(grid.axes[n].index(u[n]))
            else:
                idx.append(int(np.argmin(np.abs(positions(grid, n) - float(space[n].to_unit([u[n]])[0])))))
        out.append(tuple(idx))
    return out


def run_draw(grid: Grid, seed: int, report: Mapping[str, Any] | None = None,
             rounds: Sequence[int] = ROUNDS, seeds_read: int = 1, design: Mapping[str, Any] | None = None,
             ) -> list[dict[str, Any]]:
    """Analyse one draw (:func:`draw_table`; ``design``: design settings that differ from
    gp-ivr's greedy rounds) with the report's code (``report``: settings that differ from
    the defaults) and score every claim."""
    df, _ = draw_table(grid, seed, rounds, design, seeds_read=seeds_read)
    return analyse_table(grid, df, seed, report)


def analyse_table(grid: Grid, df, seed: int, report: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Analyse a study table ``df`` on ``grid``'s space with the report's code and score
    every claim of ``grid`` against the grid's truth."""
    from multiverse import report_analysis as R

    config = study_config(grid, seed, report)
    result = R.analyse(df, config, sensitivity=False)
    scored = []
    for res in result["claims"]:
        claim = res.claim
        labels_truth, cells = None, None
        if res.type in ("comparison", "trend"):
            labels_truth = true_labels(grid, claim)
            cells = reference_cells(grid, result["context"], claim)
        scored.append({"draw": seed, "n": int(df["universe"].nunique()), **score(grid, res, labels_truth, cells)})
    return scored


# --- tables -------------------------------------------------------------------------
def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a rate ``k / n`` (scipy)."""
    from scipy.stats import binomtest

    if n == 0:
        return (np.nan, np.nan)
    ci = binomtest(int(k), int(n)).proportion_ci(0.95, method="wilson")
    return float(ci.low), float(ci.high)


def rate(x) -> str:
    """``k/n = rate [lo, hi]`` of a boolean series (NaN left out)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return "n/a"
    k, n = int(x.sum()), len(x)
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {k / n:.2f} [{lo:.2f}, {hi:.2f}]"


def summary(rows: Sequence[Mapping[str, Any]]):
    """One row per grid and claim: the benchmark's table."""
    import pandas as pd

    df = pd.DataFrame(rows)
    out = []
    for (g, c), d in df.groupby(["grid", "claim"], sort=False):
        clear = d[d["clear"]]
        share = d["share_error"].abs().dropna()
        lab = d["label_disagreement"].dropna()
        out.append({
            "grid": g, "claim": c, "type": d["type"].iloc[0], "draws": len(d),
            "truth": f"{d['truth'].mean():+.3f} (grid error {d['error'].mean():.3f})",
            "GP coverage": rate(d["gp_covers"]), "observed coverage": rate(d["obs_covers"]),
            "GP decided where clear": rate(clear["gp_decided"]) if len(clear) else "truth not clear",
            "GP wrong confident": rate(d["gp_wrong"]), "observed wrong confident": rate(d["obs_wrong"]),
            "GP width": f"{(d['gp_hi'] - d['gp_lo']).mean():.3f}",
            "design coverage": rate(d["design_covers"]),
            "design decided where clear": rate(clear["design_decided"]) if len(clear) else "truth not clear",
            "design wrong confident": rate(d["design_wrong"]),
            "design width": f"{(d['design_hi'] - d['design_lo']).mean():.3f}",
            "median abs error of share where it holds": f"{share.median():.3f}" if len(share) else "n/a",
            "label disagreement (mean share)": f"{lab.mean():.3f}" if len(lab) else "n/a",
        })
    return pd.DataFrame(out)


def main(argv: Sequence[str]) -> None:
    import pandas as pd
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grids", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--first", type=int, default=0, help="seed of the first draw")
    ap.add_argument("--out", default=str(CACHE_DIR), help="folder for the per-draw rows (draws.csv)")
    ap.add_argument("--seeds-read", type=int, default=1, choices=(1, SEEDS),
                    help=f"{SEEDS}: every universe's {SEEDS} seeds in the table, so the report fits their noise")
    ap.add_argument("--design", nargs="*", default=[], metavar="KEY=VALUE",
                    help="design settings that differ from gp-ivr's greedy rounds, e.g. sampling=randomised or "
                         "strategy=sobol")
    ap.add_argument("--report", nargs="*", default=[], metavar="KEY=VALUE",
                    help="report settings that differ from the defaults, e.g. input_warping=true")
    args = ap.parse_args(argv)
    import yaml

    report = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.report)}
    design = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.design)}
    torch.set_num_threads(1)
    rows = []
    for name in args.grids:
        start = time.perf_counter()
        grid = GRIDS[name]()
        print(f"# {name}: {grid.description} (grid ready in {time.perf_counter() - start:.0f} s)", flush=True)
        for s in range(args.first, args.first + args.draws):
            t0 = time.perf_counter()
            for r in run_draw(grid, s, report, seeds_read=args.seeds_read, design=design):
                rows.append({"grid": name, **r})
            print(f"  draw {s}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out / "draws.csv", index=False)
    print(summary(rows).to_markdown(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
