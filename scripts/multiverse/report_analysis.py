"""The robust-claim report's numbers: surrogates per metric, claim verdicts, sensitivity
and surrogate diagnostics, the headline a person reads first, and the data the figures
draw.

The surrogates are :mod:`multiverse.surrogate`'s and each claim type's analysis is its
own module in :mod:`multiverse.claims`; this module computes and tabulates. The figures
are drawn by :mod:`multiverse.report_figures` (with :mod:`multiverse.plots`), and the
rule's files are written by :mod:`multiverse.report` (the page itself by :mod:`multiverse.html`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from multiverse import claims as C
from multiverse import stats
from multiverse.claims.context import Context
from multiverse.claims.contract import ClaimResult
from multiverse.claims.regions import LABEL_ORDER, describe_regions
from multiverse.claims.verdict import decide, estimate, opposite
from multiverse.gp import (
    dimension_grid,
    features,
    influence,
    loo_diagnostics,
    posterior_mean_std,
)
from multiverse.ids import derive_seed
from multiverse.runtime import fork_map
from multiverse.sensitivity import sobol_indices
from multiverse.space import SearchSpace
from multiverse.spec import claims as spec_claims
from multiverse.spec import report_metrics
from multiverse.spec.records import Claim
from multiverse.surrogate import (
    fit_divergence,
    fit_surrogates,
    per_universe,
    universes_of,
)


def divergence_summary(divergence, space: SearchSpace, reference: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Where universes diverge, by the divergence model's median probability at each
    reference point: the share and the region, in the space's own terms."""
    if divergence is None:
        return None
    p = divergence.median(reference)
    labels = np.where(p >= 0.5, "diverges", "converges")
    regions = describe_regions(space, reference, labels, exclude=set())
    return {"share": float((p >= 0.5).mean()), "regions": regions, "p": p.tolist()}


def context(df: pd.DataFrame, config: Mapping[str, Any], workers: int = 1) -> Context:
    """The claims' context: the report's seed, a surrogate per metric and the
    divergence model, fitted on the study's table ``df`` (``workers`` fits at a time)."""
    space = SearchSpace.from_config(config["space"])
    rep = config["report"]
    seed = derive_seed(config["seed"], 7)
    metrics = report_metrics(config)
    declared = config.get("declared_metrics")
    sur = fit_surrogates(df, space, metrics, seed, declared, rep["input_warping"], workers=workers)
    divergence = fit_divergence(df, space, derive_seed(seed, 400))
    return Context(space=space, df=df, surrogates=sur, divergence=divergence, samples=rep["samples"],
                          reference=rep["reference"], bootstrap=rep["bootstrap"], seed=seed,
                          universes=per_universe(df, space, metrics[0])[0], declared=declared,
                          hyperparameter_starts=rep["hyperparameter_starts"])


def judge_claim(i: int, claim: Claim, ctx: Context, infl: Mapping[str, Any],
                diag: Mapping[str, Any]) -> ClaimResult:
    """Claim ``i``'s analysis (:mod:`multiverse.claims`), with one verdict per reading
    (:func:`multiverse.claims.verdict.decide`) and the surrogate's fit and where it was
    read in its summary."""
    kind = C.kind(claim)
    ms = kind.SPEC.metrics(claim)
    res = kind.analyse(claim, ctx, i, infl[ms[0]])
    checks = res.diagnostics or {m: diag[m] for m in ms}
    poor = [m for m, d in checks.items() if d is not None and not d["ok"]]
    res.surrogate_ok = not poor
    notes = []
    if poor:
        notes.append("the model-based answer's surrogate fits poorly for " + ", ".join(
            f"{m} (LOO R^2 {checks[m]['r2']:.2f}, 95% coverage {checks[m]['coverage']:.2f})" for m in poor))
    if res.read_where:
        notes.append(res.read_where)
    rel = spec_claims.relation(claim)
    # one verdict per reading (a trend's conditions too), resting on the design-based answer
    for row in res.readings:
        row.cross_check = row.summary  # the GP beside the observed universes' bootstrap
        decided = decide(row.design, row.gp, rel, not poor)
        row.verdict, row.rests_on = decided["verdict"], decided["rests_on"]
        row.summary = "; ".join([decided["summary"], *notes])
    return res


def analyse(df: pd.DataFrame, config: Mapping[str, Any], sensitivity: bool = True, workers: int = 1,
            alongside: Callable[[Context, Mapping[str, Any], Mapping[str, Any]], Sequence[Callable[[], Any]]]
            | None = None) -> dict[str, Any]:
    """Verdicts for every claim, and per metric its Sobol indices and LOO diagnostics.

    Returns ``{"claims", "sensitivity", "diagnostics", "influence", "surrogates",
    "divergence", "space", "context"}``. A claim whose surrogate fits poorly
    (:data:`multiverse.gp.MIN_LOO_R2`, :data:`multiverse.gp.MIN_COVERAGE`) says so in
    its summary. ``sensitivity=False`` leaves the Sobol indices out (None), as the
    calibration benchmark does.

    ``workers``: after the surrogates are fitted, each metric's Sobol indices and each
    claim's analysis are independent tasks, run that many at a time in forked processes
    (:func:`multiverse.runtime.fork_map`; the report rule's ``threads``). Every sample
    derives from its own seed, so the numbers are those of one task after another. A
    claim that reads the Sobol indices of its metrics (``reads_sensitivity``: the
    correlation) computes them in its own task. With several workers a claim's ``model``
    is left out (None): it stays in the process that fitted it. ``alongside(ctx, influence,
    diagnostics)`` may add tasks of the caller's that need no verdict (the report's
    figures of the surrogates), to run among these.
    """
    ctx = context(df, config, workers)
    space, sur, rep, seed = ctx.space, ctx.surrogates, config["report"], ctx.seed
    base_all = ctx.reference_set()
    claims = config.get("claims", [])
    # each claim metric's design-based predictors (refits on earlier rounds), once for all its claims
    on_claims = list(dict.fromkeys(m for c in claims for m in spec_claims.spec_of(c).metrics(c)))
    drawn = ctx.drawn() if on_claims else None  # built here, so that every claim's context shares it

    def import_ax() -> None:
        if workers > 1 and sensitivity and sur:
            # Ax takes seconds to import: here once, while the workers fit, not in each that computes Sobol indices
            import ax.utils.sensitivity.sobol_measures  # noqa: F401

    done = fork_map([*(lambda m=m, s=s: (influence(s.model, space, base_all), loo_diagnostics(s.model, s.warp))
                       if s else (None, None) for m, s in sur.items()),
                     *(lambda m=m: drawn.predictions(m) for m in (on_claims if workers > 1 else []))],
                    workers, meanwhile=import_ax)
    infl = {m: d[0] for m, d in zip(sur, done)}
    diag = {m: d[1] for m, d in zip(sur, done)}
    for m, predictions in zip(on_claims if workers > 1 else [], done[len(sur):]):  # one worker: on first use
        drawn.keep(m, predictions)
    order = {m: k for k, m in enumerate(sur)}

    def sobol(m: str) -> dict[str, Any] | None:
        s = sur[m]
        return sobol_indices(s.sample, space, rep["sobol_points"], min(64, rep["samples"]),
                             derive_seed(seed, 300 + order[m])) if s and sensitivity else None

    reads = {i: spec_claims.spec_of(c).metrics(c) for i, c in enumerate(claims) if spec_claims.spec_of(c).reads_sensitivity}
    in_claims = {m for ms in reads.values() for m in ms}

    def claim_task(i: int, claim: Claim) -> tuple[ClaimResult, dict[str, Any]]:
        # None per metric when left out: the correlation then reads its path signal alone
        own = {m: sobol(m) for m in reads.get(i, [])}
        res = judge_claim(i, claim, replace(ctx, sensitivity=own), infl, diag)
        if workers > 1:  # a forked task's model stays in its process (gpytorch's multitask likelihood does not pickle)
            res.model = None
        return res, own

    alone = [m for m in sur if m not in in_claims]
    # the longest first, so that the workers finish together: the claims that compute Sobol
    # indices too, the other claims, then each metric's Sobol indices, then what the caller adds
    first = sorted(range(len(claims)), key=lambda i: i not in reads)
    extra = list(alongside(ctx, infl, diag)) if alongside is not None else []
    done = fork_map([*(lambda i=i: claim_task(i, claims[i]) for i in first), *(lambda m=m: sobol(m) for m in alone),
                     *extra], workers)
    judged = dict(zip(first, done[:len(claims)]))
    sens = dict(zip(alone, done[len(claims):len(claims) + len(alone)]))
    results = []
    for i in range(len(claims)):
        res, own = judged[i]
        results.append(res)
        sens.update(own)
    sens = {m: sens[m] for m in sur}
    ctx.sensitivity = sens
    return {"claims": results, "sensitivity": sens, "diagnostics": diag, "influence": infl, "surrogates": sur,
            "divergence": divergence_summary(ctx.divergence, space, base_all), "space": space, "context": ctx}


#: An answer's estimate with its 95% interval (``n/a`` without one).
fmt = estimate


def _p(x: Mapping[str, Any], key: str = "p_holds") -> float:
    v = x.get(key, np.nan)
    return round(v, 3) if v is not None and np.isfinite(v) else np.nan


def claims_table(claims: Sequence[ClaimResult]) -> pd.DataFrame:
    """The summary table: one row per claim (and per condition of a trend), every
    estimate with its 95% interval."""

    def row(c: ClaimResult, r) -> dict:
        g, o, d = r.gp, r.observed, r.design or {}
        share = (f"{g['fraction_holds']:.2f} [{g['fraction_holds_lo']:.2f}, {g['fraction_holds_hi']:.2f}]"
                 if np.isfinite(g.get("fraction_holds", np.nan)) else "n/a")
        gp_est, obs_est = C.TYPES[c.type].table_cells(g, o)
        family = c.family or {}
        return {
            "claim": c.statement + ("" if r.label == "marginal" else f" ({r.label})"),
            "type": c.type,
            "statistic": spec_claims.SPECS[c.type].statistic,
            "margin": c.claim.get("margin") or np.nan,
            "verdict": r.summary,
            "design-based estimate [95% CI]": fmt(d) if d else "n/a",
            "design-based P(holds)": _p(d) if d else np.nan,
            "GP P(holds)": _p(g),
            "GP P(equivalent)": _p(g, "p_equivalent"),
            "GP P(holds at every condition)": (round(family["p_all"], 3) if r.label == "marginal"
                                               and family.get("conditions", 0) > 1 else np.nan),
            "GP estimate [95% CrI]": gp_est,
            "GP share of multiverse where it holds [surely, possibly]": share,
            "observed P(holds), bootstrap": _p(o),
            "observed estimate [95% CI]": obs_est,
            "where it holds, fails or is uncertain (GP)": (g.get("regions") or {}).get("text", ""),
        }

    return pd.DataFrame([row(c, r) for c in claims for r in c.readings])


#: The headline's badges: a claim's one verdict (:func:`multiverse.claims.verdict.decide`).
BADGES = ("holds", "fails", "equivalent", "uncertain", "too few universes")


def headline(c: ClaimResult) -> dict[str, str]:
    """One claim's badge and plain sentence for the top of the report.

    The badge is the claim's one verdict (:func:`multiverse.claims.verdict.decide`): the
    design-based answer's, whose interval holds whatever the surrogate; the sentence
    gives that answer, then the model-based (GP) answer and where the model finds the
    claim holds, fails or is uncertain, labelled as the model's.
    """
    g, d = c.gp, c.design or {}
    badge = c.verdict or g["verdict"]
    stat = spec_claims.SPECS[c.type].statistic
    if c.rests_on == "design":
        text = (f"{c.statement}: {badge} (design-based: {stat} {fmt(d)}, P(holds) {d['p_holds']:.2f}, "
                f"from {d.get('n', 0)} universes drawn with known probability)")
        if np.isfinite(g.get("effect", np.nan)):
            text += f"; model-based (GP): {g['verdict']}, {fmt(g)}"
    elif np.isfinite(g.get("effect", np.nan)):
        text = f"{c.statement}: {badge} (model-based only, GP: {stat} {fmt(g)}, P(holds) {g['p_holds']:.2f})"
    else:
        return {"badge": badge, "text": f"{c.statement}: too few universes to say."}
    if "p_equivalent" in (d if c.rests_on == "design" else g):
        text += f", P(equivalent within {c.claim['margin']:g}) {(d if c.rests_on == 'design' else g)['p_equivalent']:.2f}"
    regions = g.get("regions") or {}
    shares = regions.get("shares", {})
    if shares:
        order = sorted(shares, key=lambda lb: LABEL_ORDER.index(lb) if lb in LABEL_ORDER else 9)
        text += "; the model finds it " + ", ".join(f"{lb} on {shares[lb]:.0%}" for lb in order) + " of the multiverse"
        fails = [leaf for leaf in regions.get("leaves", []) if leaf["label"] == "fails"]
        if fails:
            text += " (fails for " + "; or ".join(leaf["rule"] for leaf in fails) + ")"
    family = c.family or {}
    if family.get("conditions", 0) > 1:
        text += f"; model-based P(holds at every one of its {family['conditions']} conditions) {family['p_all']:.2f}"
    if c.rests_on == "design" and g.get("verdict") not in (None, stats.TOO_FEW):
        disjoint = g["effect_hi"] < d["effect_lo"] or d["effect_hi"] < g["effect_lo"]
        if opposite(badge, g["verdict"], spec_claims.relation(c.claim)) or disjoint:
            text += "; the two answers disagree: the verdict rests on the design-based one"
    if not c.surrogate_ok:
        text += "; the model's surrogate fits poorly"
    if c.read_where:
        text += "; " + c.read_where
    return {"badge": badge, "text": text + "."}


def sensitivity_table(sens: Mapping[str, Mapping[str, Mapping[str, float]] | None]) -> pd.DataFrame:
    rows = []
    for m, s in sens.items():
        for d, v in (s or {}).items():
            rows.append({"metric": m, "dimension": d,
                         "first-order [95% CrI]": f"{v['first']:.3f} [{v['first_lo']:.3f}, {v['first_hi']:.3f}]",
                         "total-order [95% CrI]": f"{v['total']:.3f} [{v['total_lo']:.3f}, {v['total_hi']:.3f}]"})
    return pd.DataFrame(rows)


def diagnostics_table(diag: Mapping[str, Mapping[str, Any] | None]) -> pd.DataFrame:
    rows = []
    for m, d in diag.items():
        if d is None:
            rows.append({"metric": m, "universes": 0, "LOO RMSE [95% CI]": "n/a", "LOO R^2 [95% CI]": "n/a",
                         "coverage of 95% intervals [95% CI]": "n/a", "fit": "no surrogate"})
            continue
        rows.append({"metric": m, "universes": d["n"],
                     "LOO RMSE [95% CI]": f"{d['rmse']:.4f} [{d['rmse_lo']:.4f}, {d['rmse_hi']:.4f}]",
                     "LOO R^2 [95% CI]": f"{d['r2']:.2f} [{d['r2_lo']:.2f}, {d['r2_hi']:.2f}]",
                     "coverage of 95% intervals [95% CI]":
                         f"{d['coverage']:.2f} [{d['coverage_lo']:.2f}, {d['coverage_hi']:.2f}]",
                     "fit": "ok" if d["ok"] else "poor: verdicts flagged"})
    return pd.DataFrame(rows)


def posterior_map_data(sur, space: SearchSpace, dims: Sequence[str], base: Sequence[Mapping[str, Any]],
                       n: int = 25) -> dict[str, Any]:
    """The posterior median and 95% band width of a metric over two dimensions, averaged
    over ``base`` for the others."""
    gx, gy = dimension_grid(space, dims[0], n), dimension_grid(space, dims[1], n)
    grid = [{**u, dims[0]: x, dims[1]: y} for y in gy for x in gx for u in base]
    shape = (len(gy), len(gx), len(base))
    median = sur.median(grid).reshape(shape).mean(-1)
    lo, hi = sur.quantiles(grid)
    return {"dims": list(dims), "x": gx, "y": gy, "median": median, "width": (hi - lo).reshape(shape).mean(-1)}


#: Above this many universes the specification curve draws quantile bands over bins of the
#: ranking, and its strip the share of each choice per bin, in place of one mark a universe.
CURVE_POINTS = 300
#: Bins of the ranking above :data:`CURVE_POINTS`.
CURVE_BINS = 100


def specification_data(sur, space: SearchSpace, df: pd.DataFrame, metric: str,
                       claims: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What the specification curve of ``metric`` draws (:func:`multiverse.plots.specification_curve`).

    ``table``: one row per universe with a finite mean over its seeds, ranked by it, with
    its seeds' range (``seed_lo``, ``seed_hi``; equal to the mean with one seed) and, where a
    surrogate is given, the GP's 95% predictive interval (``gp_lo``, ``gp_hi``; one seed's
    noise added on the GP's scale); ``missing``: universes without a value, counted by why
    (failed, diverged, not continued: ``status``), their rows beside; ``strip``: one row per
    dimension level (a categorical's levels, a numeric's thirds) marking each ranked
    universe's choice; ``claims``: the claims on ``metric`` drawn on it (a comparison's or
    expected best's two groups, their rows in the strip and each group's mean as a line);
    ``bins``: above :data:`CURVE_POINTS` universes, the ranking cut into :data:`CURVE_BINS`."""
    by = df.groupby("universe", sort=False)
    first = by.head(1).set_index("universe")
    values = by[metric].agg(["mean", "min", "max", "count"])
    d = first.join(values)
    ok = np.isfinite(d["mean"].to_numpy(dtype=float))
    ranked = d[ok].sort_values("mean", kind="stable").reset_index()
    missing = d[~ok].reset_index()
    table = ranked.rename(columns={"mean": "value", "min": "seed_lo", "max": "seed_hi", "count": "seeds"})
    if sur is not None and len(table):
        m, s = posterior_mean_std(sur.model, features(space, universes_of(table, space), sur.model))
        sd = np.sqrt(s**2 + sur.latent_noise_sd**2)
        z = norm.ppf(0.975)
        table["gp_lo"], table["gp_hi"] = sur.warp.inverse(m - z * sd), sur.warp.inverse(m + z * sd)
    both = pd.concat([table, missing], ignore_index=True)
    strip: list[tuple[str, np.ndarray]] = []
    for dim in space.dimensions:
        if dim.is_categorical:
            strip += [(f"{dim.name} = {c}", (both[dim.name] == c).to_numpy()) for c in dim.choices]
        else:
            u = dim.to_unit(both[dim.name].to_numpy(dtype=float))  # NaN where the dimension is inactive
            third = np.where(np.isfinite(u), np.minimum(np.nan_to_num(u) * 3, 2), -1).astype(int)
            strip += [(f"{dim.name}: {t} third", third == k) for k, t in enumerate(("low", "mid", "high"))]
    drawn = []
    for c in claims:
        if metric not in spec_claims.spec_of(c).metrics(c) or "a" not in c or "dimension" not in c:
            continue
        groups = []
        for side in ("a", "b"):
            mask = both[c["dimension"]].isin(list(c[side])).to_numpy()
            strip.append((f"{c['name']}: {side} = {', '.join(map(str, c[side]))}", mask))
            vals = table["value"].to_numpy()[mask[: len(table)]]
            groups.append({"side": side, "levels": list(c[side]), "mean": float(vals.mean()) if len(vals) else np.nan})
        drawn.append({"name": c["name"], "relation": c.get("relation"), "groups": groups})
    n = len(table)
    bins = None if n <= CURVE_POINTS else np.minimum(np.arange(n) * CURVE_BINS // n, CURVE_BINS - 1)
    counts = missing["status"].fillna("failed").astype(str).value_counts().to_dict() if len(missing) else {}
    return {"table": table, "missing": missing, "missing_counts": {k: int(v) for k, v in counts.items()},
            "strip": strip, "claims": drawn, "bins": bins, "metric": metric}


