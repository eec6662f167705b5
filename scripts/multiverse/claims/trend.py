"""Trend: a metric rises (``increasing``) or falls with a numeric dimension.

Effect: the least-squares slope of the metric against the dimension's position in its
range (0 at ``low``, 1 at ``high``, on its own log scale), i.e. the change across the
range. The GP's version is the slope of its partial dependence; ``given`` adds the trend
at fixed values of other dimensions, and ``scaled`` along a path where another dimension
moves with it (``lr`` proportional to ``batch_size^power``: the linear or square-root
scaling rule). Every condition is read from one set of joint posterior samples, so the
family's P(holds at every condition) stands beside each condition's own P.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from multiverse import estimators, stats
from multiverse.claims import common, context, regions, verdict
from multiverse.claims.contract import ClaimResult
from multiverse.gp import dimension_grid
from multiverse.ids import derive_seed
from multiverse.spec import claims as spec_claims
from multiverse.spec.records import Claim

SPEC = spec_claims.TREND
#: Positions (in the unit range) of a numeric ``given`` dimension at which a trend is
#: also measured, and the observed universes' bins around them (thirds of the range).
GIVEN_POSITIONS = (1 / 6, 1 / 2, 5 / 6)


def positions(space, name: str, values: Sequence[Any]):
    """Each value's position in the dimension's range: 0 at ``low``, 1 at ``high`` (log scale if log)."""
    return space[name].to_unit(values)


def conditions(space, claim: Claim) -> list[dict[str, Any]]:
    """The trend's variants: marginal, at fixed values of each ``given`` dimension, and
    along the ``scaled`` path. Each has a label, ``fixed`` ({dim: value} for the GP
    and a predicate for the observed universes) and ``scaled``."""
    out = [{"label": "marginal", "fixed": {}, "select": None, "scaled": None}]
    for name in claim.get("given", []):
        d = space[name]
        if d.is_categorical:
            trend_dim = space[claim["dimension"]]
            for lv in d.choices:
                if trend_dim.when is not None and trend_dim.when[0] == name and lv not in trend_dim.when[1]:
                    continue  # the trend's dimension is inactive at this level: nothing to read
                out.append({"label": f"at {name} = {lv}", "fixed": {name: lv},
                            "select": (lambda u, n=name, v=lv: u[n] == v), "scaled": None})
        else:
            for i, p in enumerate(GIVEN_POSITIONS):
                v = d.from_unit(np.array([p]))[0]
                lo, hi = i / 3, (i + 1) / 3
                out.append({"label": f"at {name} = {v:.3g}", "fixed": {name: v},
                            "select": (lambda u, n=name, a=lo, b=hi: a <= float(space[n].to_unit([u[n]])[0]) <= b),
                            "scaled": None})
    if claim.get("scaled"):
        s = claim["scaled"]
        out.append({"label": f"with {s['dimension']} scaled as {claim['dimension']}^{s['power']:g}", "fixed": {},
                    "select": None, "scaled": s})
    return out


def scaled_coordinate(space, claim: Claim, universes: Sequence[Mapping[str, Any]]):
    """The coupled dimension's value at the trend dimension's ``low`` end, as a position
    in its range: ``log(lr) - power * (log(batch) - log(batch_low))`` for a log-scaled lr."""
    s = claim["scaled"]
    d, c = space[claim["dimension"]], space[s["dimension"]]
    x = np.log10([u[d.name] for u in universes]) - np.log10(d.low)
    z = np.log10([u[c.name] for u in universes]) - s["power"] * x
    return (z - np.log10(c.low)) / (np.log10(c.high) - np.log10(c.low))


def trend_grid(space, claim: Claim) -> list:
    return dimension_grid(space, claim["dimension"], common.TREND_GRID)


def trend_universes(space, claim: Claim, base: Sequence[Mapping[str, Any]], condition) -> tuple[list, Any, list]:
    """``grid x base`` universes for a trend: the claim's dimension on its grid, the
    condition's fixed values, and on a scaled path the coupled dimension moving with it.
    Base points whose scaled path leaves the coupled dimension's range are dropped.

    Returns the universes (grid-major), the grid's positions and the base kept.
    """
    name = claim["dimension"]
    d = space[name]
    values = trend_grid(space, claim)
    t = positions(space, name, values)
    base = [{**u, **condition["fixed"]} for u in base]
    base = [u for u in base if d.is_active({**u, name: values[0]})]
    s = condition["scaled"]
    if s:
        c = space[s["dimension"]]
        ratio = np.asarray(values, dtype=float) / d.low
        base = [u for u in base if c.low <= u[c.name] * ratio.min() ** s["power"] and
                u[c.name] * ratio.max() ** s["power"] <= c.high]
        grid = [{**u, name: v, c.name: float(u[c.name] * (v / d.low) ** s["power"])} for v in values for u in base]
    else:
        grid = [{**u, name: v} for v in values for u in base]
    return grid, t, base


def design_target(space, claim: Claim, n: int, seed: int, mean_at) -> list[context.DesignTarget]:
    """What the claim-targeted design reduces (:class:`.context.DesignTarget`): the
    marginal trend's slope, a weighted sum of the metric on :func:`trend_universes` of a
    reference set of ``n`` points shared out over the level combinations, and each
    reference point's own slope."""
    grid, t, kept = trend_universes(space, claim, context.reference_universes(space, n, seed, per_level=True),
                                    conditions(space, claim)[0])
    if len(kept) < 2:
        return []
    eye = np.eye(len(grid)).reshape(len(grid), len(t), len(kept))
    local = stats.slope(t, eye, axis=1)  # linear: row i is point i's weights
    return [context.DesignTarget(claim["name"], claim["metric"], grid, local.mean(1), local, spec_claims.relation(claim),
                                spec_claims.margin(claim))]


def gp_family(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], conds: Sequence[Mapping],
              n_samples: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each condition's answer from sampled partial-dependence curves of the GP, all
    from one set of joint posterior samples; and the family's P(holds at every
    condition) from the same samples.

    A condition's effect is the slope of its partial dependence (the mean over
    ``base``), its share that of base points whose own curve has the claimed slope.
    """
    rel, m = spec_claims.relation(claim), spec_claims.margin(claim)
    parts = [trend_universes(space, claim, base, c) for c in conds]
    points = [p for grid, _, kept in parts if len(kept) >= 2 for p in grid]
    f = sur.sample(points, n_samples, seed) if points else np.zeros((n_samples, 0))
    answers, slopes, start = [], [], 0
    for cond, (grid, t, kept) in zip(conds, parts):
        if len(kept) < 2:
            answers.append(stats.too_few(n_reference=len(kept)))
            continue
        fc = f[:, start:start + len(grid)].reshape(n_samples, len(t), len(kept))
        start += len(grid)
        local = stats.slope(t, fc, axis=1)  # samples x base
        slopes.append(stats.reference_mean(local, seed + len(slopes)))
        out = regions.with_fraction(stats.summarise(slopes[-1], rel, m), local, claim)
        out["n_reference"] = len(kept)
        out["curve"] = {"values": [float(u[claim["dimension"]]) for u in grid[:: len(kept)]], **stats.band(fc.mean(2))}
        if cond["label"] == "marginal":
            out["regions"] = regions.describe_regions(space, kept, regions.local_summary(local, claim)["labels"],
                                                     exclude={claim["dimension"]})
        answers.append(out)
    family = {"conditions": len(slopes), "p_all": float("nan")}
    if slopes:
        family["p_all"] = float(np.mean(np.all([stats.holds_mask(s, rel, m) for s in slopes], axis=0)))
    return answers, family


def gp_answer(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], n_samples: int, seed: int,
              condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One condition's answer (the marginal trend by default)."""
    return gp_family(sur, space, claim, base, [condition or conditions(space, claim)[0]], n_samples, seed)[0][0]


def observed_answer(space, universes: Sequence[Mapping[str, Any]], values, claim: Claim,
                    n_boot: int, seed: int, condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Model-free trend: the least-squares slope of the metric on the dimension's
    position, bootstrapped over universes. On a scaled path the regression also has
    the coupled dimension's scaled coordinate (so the slope is taken along the path);
    with a fixed value, only universes in its third of the range (or of its level) count."""
    condition = condition or conditions(space, claim)[0]
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values) & np.array([space[claim["dimension"]].is_active(u) for u in universes], dtype=bool)
    if condition["select"] is not None:
        keep &= np.array([bool(condition["select"](u)) for u in universes], dtype=bool)
    us = [u for u, k in zip(universes, keep) if k]
    y = values[keep]
    if len(y) < 4:
        return stats.too_few(n=int(len(y)))
    cols = [np.ones(len(y)), positions(space, claim["dimension"], [u[claim["dimension"]] for u in us])]
    if condition["scaled"]:
        cols.append(scaled_coordinate(space, claim, us))
    X = np.column_stack(cols)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        return stats.too_few(n=int(len(y)))
    rows = np.column_stack([y, X])
    boot = stats.bootstrap(lambda r: stats.regression_coefficients(r[..., 1:], r[..., 0])[..., 1], [rows], n_boot, seed)
    point = stats.regression_coefficients(X, y)[1]
    return {**stats.summarise(boot, spec_claims.relation(claim), spec_claims.margin(claim)), "effect": float(point), "n": int(len(y))}


def design_components(space, claim: Claim, condition: Mapping[str, Any]):
    """A condition's least-squares slope of the metric on the dimension's position over
    the multiverse, as moments of the universes where the metric is defined and the
    dimension active (within the condition's level or third of a ``given`` range; on a
    scaled path with the coupled dimension's scaled coordinate as a second regressor):
    the components and the statistic (:func:`multiverse.estimators.ols_slope`)."""
    name, metric = claim["dimension"], claim["metric"]
    p = 3 if condition["scaled"] else 2

    def h(universes, values):
        ok, y = common.defined(values[metric])
        ok = ok & np.array([space[name].is_active(u) for u in universes], dtype=bool)
        if condition["select"] is not None:
            ok &= np.array([bool(condition["select"](u)) for u in universes], dtype=bool)
        t = np.zeros(len(universes))
        if ok.any():
            t[ok] = positions(space, name, [u[name] for u, k in zip(universes, ok) if k])
        cols = [np.ones(len(universes)), t]
        if condition["scaled"]:
            s = np.zeros(len(universes))
            if ok.any():
                s[ok] = scaled_coordinate(space, claim, [u for u, k in zip(universes, ok) if k])
            cols.append(s)
        return estimators.ols_components(np.column_stack(cols), y, ok)

    return h, estimators.ols_slope(p)


def design_answer(space, claim: Claim, ctx, condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The design-based answer of one condition (the marginal trend by default)."""
    condition = condition or conditions(space, claim)[0]
    return common.design_based(ctx, [claim["metric"]], design_components(space, claim, condition),
                               spec_claims.relation(claim), spec_claims.margin(claim))


def holds_map(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], influence, seed: int,
              n_base: int = 8, n_samples: int = 128) -> dict[str, Any]:
    """Local P(holds) of the marginal trend over a grid of the two most influential other
    numeric dimensions (the rest averaged over ``n_base`` reference points where the
    trend's dimension is active)."""
    dims = regions.map_dimensions(space, influence, exclude=[claim["dimension"]])
    if not dims:
        return {"message": f"No numeric choice besides {claim['dimension']} to map the claim over"}
    sub = [u for u in base if space[claim["dimension"]].is_active(u)][:n_base]
    if not sub:
        return {"message": f"No reference universe where {claim['dimension']} is active"}
    gx, gy, cells = regions.map_cells(space, dims)
    marginal = conditions(space, claim)[0]
    pts = [p for cell in cells for p in trend_universes(space, claim, [{**u, **cell} for u in sub], marginal)[0]]
    t = positions(space, claim["dimension"], trend_grid(space, claim))
    f = sur.sample(pts, n_samples, seed, batch=len(cells)).reshape(n_samples, len(cells), len(t), -1)

    local = stats.slope(t, f, axis=2).mean(-1)
    s = regions.local_summary(local, claim)
    return {"dims": dims, "x": gx, "y": gy, "p_holds": s["p_holds"].tolist(),
            "p_equivalent": None if s["p_equivalent"] is None else s["p_equivalent"].tolist()}


def reference(ctx, claim: Claim) -> tuple[list[dict], float]:
    """The reference universes a trend is read over (those converging all along its
    grid, for a metric declared ``converged_only``) and their share of the multiverse."""
    return ctx.converging([claim["metric"]], ctx.reference_set(per_level=True),
                          [{claim["dimension"]: v} for v in trend_grid(ctx.space, claim)])


def analyse(claim: Claim, ctx, i: int, influence) -> ClaimResult:
    s_gp, s_obs = derive_seed(ctx.seed, 100 + i), derive_seed(ctx.seed, 200 + i)
    metric, space = claim["metric"], ctx.space
    y = ctx.values(metric)
    sur = ctx.surrogates.get(metric)
    conds = conditions(space, claim)
    base, share = reference(ctx, claim)
    if sur is None:
        gps, family = [common.no_surrogate(int(np.isfinite(y).sum())) for _ in conds], {"conditions": 0, "p_all": float("nan")}
    else:
        gps, family = gp_family(sur, space, claim, base, conds, ctx.samples, s_gp)
    readings = []
    for j, (cond, g) in enumerate(zip(conds, gps)):
        o = observed_answer(space, ctx.universes, y, claim, ctx.bootstrap, derive_seed(s_obs, j), cond)
        d = design_answer(space, claim, ctx, cond)
        readings.append(verdict.reading(g, o, d, spec_claims.relation(claim), cond["label"]))
    figures = None
    if sur is not None:
        figures = {"where": holds_map(sur, space, claim, base, influence, derive_seed(s_gp, 99))}
    return common.result(claim, SPEC.name, SPEC.statement(claim), readings, family=family, read_where=context.where_read(share),
                         converged_share=share, figures=figures)


def relevance(space, claim: Claim, universes: Sequence[Mapping[str, Any]]):
    """How much each universe's residual weighs in a slope, up to a constant
    (:func:`multiverse.design_gp.claim_relevance`): its distance from the middle of the
    dimension (0 where the dimension is inactive)."""
    d = space[claim["dimension"]]
    return np.array([abs(float(d.to_unit([u[d.name]])[0]) - 0.5) * 2 if d.is_active(u) else 0.0 for u in universes])


table_cells = verdict.estimate_cells


def grid_local_effects(claim: Claim, space, axes: Mapping[str, Sequence[Any]], values):
    """The local slope at every cell of the other dimensions of a full-factorial grid
    (``axes``: each dimension's values, in the space's order; ``values``: one array over
    them): least squares along the dimension's positions on the unit scale."""
    v = np.moveaxis(values, list(axes).index(claim["dimension"]), -1)
    t = np.asarray(space[claim["dimension"]].to_unit(axes[claim["dimension"]]), dtype=float)
    return stats.slope(t, v)


grid_statistic = common.mean_grid_statistic(grid_local_effects)


# --- its figures (drawn by :mod:`multiverse.plots`' helpers) ----------------------
def figure(c: ClaimResult, space, df, path: str) -> None:
    """The trend's partial dependence at each of its conditions."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("whitegrid")
    claim = c.claim
    d = space[claim["dimension"]]
    conds = c.readings
    # at most 3 panels a row, so that each stays legible at the page's width
    ncols = min(3, len(conds))
    nrows = -(-len(conds) // ncols)
    fig, axes = P.plt.subplots(nrows, ncols, figsize=(4.8 * ncols, 4.0 * nrows), squeeze=False, sharey=True)
    for ax in axes.flat[len(conds):]:
        ax.set_visible(False)
    for ax, cond in zip(axes.flat, conds):
        g = cond.gp
        if "curve" in g:
            P.band(ax, g["curve"]["values"], g["curve"], "C0", "GP partial dependence")
        if cond.label == "marginal":
            ax.scatter(df[d.name], df[claim["metric"]], s=12, color="C1", edgecolor="k", lw=0.3, label="universes")
        P.log_axis(ax, d)
        P.value_axis(ax, df[claim["metric"]])
        ax.set_xlabel(P.label(d.name))
        ax.set_ylabel(P.label(claim["metric"]))
        est = f"slope {g['effect']:+.3g} [{g['effect_lo']:+.3g}, {g['effect_hi']:+.3g}]" if np.isfinite(g["effect"]) else "n/a"
        ax.set_title(f"{cond.label}\n{est}, P(holds) {g['p_holds']:.2f}", fontsize=11)
    axes[0, 0].legend(fontsize=9)
    P.title(fig, c, f"partial dependence of {P.label(claim['metric'])} on {P.label(d.name)}")
    fig.tight_layout()
    P.save(fig, path)


where_figure = common.holds_where_figure