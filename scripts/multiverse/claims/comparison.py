"""Comparison: a metric under levels ``a`` versus ``b`` of one categorical dimension,
integrated over the rest of the multiverse.

Effect: ``mean(metric | a) - mean(metric | b)``. The GP's answer integrates over a
Sobol reference set of the other dimensions; it also gives the share of the multiverse
where the claim holds and, in the space's own terms, where it holds, fails or is
uncertain by the verdict's own thresholds (:func:`multiverse.claims.regions.describe_regions`).
The observed answer is a bootstrap stratified by group.
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

SPEC = spec_claims.COMPARISON


def comparison_universes(claim: Claim, base: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Every base universe under every level of ``a`` then ``b``: ``(len(a)+len(b)) * len(base)``."""
    levels = list(claim["a"]) + list(claim["b"])
    return [{**u, claim["dimension"]: lv} for lv in levels for u in base]


def local_effects(f, claim: Claim, n_base: int):
    """``samples x n_base`` local effects from samples at :func:`comparison_universes`."""
    na, nb = len(claim["a"]), len(claim["b"])
    f = f.reshape(len(f), na + nb, n_base)
    return f[:, :na].mean(1) - f[:, na:].mean(1)


def design_target(space, claim: Claim, n: int, seed: int, mean_at) -> list[context.DesignTarget]:
    """What the claim-targeted design reduces (:class:`.context.DesignTarget`): the effect,
    a weighted sum of the metric at :func:`comparison_universes` of a reference set of
    ``n`` points per level combination, and each reference point's local effect."""
    base = context.reference_universes(space, n, seed, fix=claim["dimension"])
    points = comparison_universes(claim, base)
    local = local_effects(np.eye(len(points)), claim, len(base))  # linear: row i is point i's weights
    return [context.DesignTarget(claim["name"], claim["metric"], points, local.mean(1), local, claim["relation"],
                                spec_claims.margin(claim))]


def gp_answer(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], n_samples: int,
              seed: int) -> dict[str, Any]:
    """The GP's answer from joint posterior samples of surrogate ``sur`` at
    :func:`comparison_universes` of a reference set ``base`` covering the other
    dimensions (the claim's own dimension is overwritten): the effect, the share of the
    multiverse where the claim holds, each with a 95% credible interval, and the regions
    labelled by local verdicts."""
    f = sur.sample(comparison_universes(claim, base), n_samples, seed)
    local = local_effects(f, claim, len(base))
    effects = stats.reference_mean(local, seed)
    out = regions.with_fraction(stats.summarise(effects, claim["relation"], spec_claims.margin(claim)), local, claim)
    out["regions"] = regions.describe_regions(space, base, regions.local_summary(local, claim)["labels"],
                                             exclude={claim["dimension"]})
    return out


def observed_answer(values, groups: Sequence[Any], claim: Claim, n_boot: int, seed: int) -> dict[str, Any]:
    """Model-free answer: a bootstrap stratified by group.

    Args:
        values: ``n`` observed metric values (non-finite ones are dropped).
        groups: ``n`` levels of the claim's dimension.
    """
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=object)
    ok = np.isfinite(values)
    a = values[ok & np.isin(groups, list(claim["a"]))]
    b = values[ok & np.isin(groups, list(claim["b"]))]
    out: dict[str, Any] = {"n_a": int(len(a)), "n_b": int(len(b))}
    if len(a) < 2 or len(b) < 2:
        return stats.too_few(**out)
    boot = stats.bootstrap(lambda x, y: x.mean(1) - y.mean(1), [a, b], n_boot, seed)
    return {**out, **stats.summarise(boot, claim["relation"], spec_claims.margin(claim)), "effect": float(a.mean() - b.mean())}


def design_components(claim: Claim):
    """The components of a difference of group means over the universes where the
    metric is defined, and the statistic of them (:func:`multiverse.estimators.ratio_difference`)."""
    dim, a, b, metric = claim["dimension"], list(claim["a"]), list(claim["b"]), claim["metric"]

    def h(universes, values):
        ok, y = common.defined(values[metric])
        ga = np.array([u[dim] in a for u in universes], dtype=float)
        gb = np.array([u[dim] in b for u in universes], dtype=float)
        return np.c_[y * ga, ok * ga, y * gb, ok * gb]

    return h, estimators.ratio_difference


def design_answer(claim: Claim, ctx) -> dict[str, Any]:
    """The design-based answer: the difference of the two groups' means over the
    multiverse (each group's levels uniform, the other choices as declared), from the
    universes drawn with known probability (:mod:`multiverse.estimators`)."""
    return common.design_based(ctx, [claim["metric"]], design_components(claim), claim["relation"],
                               spec_claims.margin(claim))


def figure_data(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], influence, seed: int,
                n_samples: int = 128) -> dict[str, Any]:
    """What the claim's figures draw: each group's partial dependence (mean, 95% band)
    along each numeric dimension, and a map of the local P(holds) over the two most
    influential ones."""
    sub = list(base[:32])
    pd_ = {}
    for j, d in enumerate([d for d in space.numeric if d.when is None][:4]):
        grid = dimension_grid(space, d.name, 15)
        curves = {}
        for k, side in enumerate(("a", "b")):
            pts = [{**u, d.name: v, claim["dimension"]: lv} for v in grid for lv in claim[side] for u in sub]
            f = sur.sample(pts, n_samples, derive_seed(seed, j, k)).reshape(n_samples, len(grid), -1).mean(-1)
            curves[side] = stats.band(f)
        pd_[d.name] = {"values": [float(v) for v in grid], **curves}
    return {"partial_dependence": pd_, "where": holds_map(sur, space, claim, base, influence, derive_seed(seed, 99))}


def holds_map(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], influence, seed: int,
              n_base: int = 8, n_samples: int = 128) -> dict[str, Any]:
    """Local P(holds) over a grid of the two most influential numeric dimensions (the
    others averaged over ``n_base`` reference points)."""
    dims = regions.map_dimensions(space, influence, exclude=[claim["dimension"]])
    if not dims:
        return {"message": f"No numeric choice besides {claim['dimension']} to map the claim over"}
    gx, gy, cells = regions.map_cells(space, dims)
    sub = list(base[:n_base])
    pts = [p for cell in cells for p in comparison_universes(claim, [{**u, **cell} for u in sub])]
    f = sur.sample(pts, n_samples, seed, batch=len(cells)).reshape(n_samples, len(cells), -1)
    local = np.stack([local_effects(f[:, i], claim, len(sub)).mean(1) for i in range(len(cells))], 1)
    return {"dims": dims, "x": gx, "y": gy, **_probabilities(regions.local_summary(local, claim))}


def _probabilities(s: Mapping[str, Any]) -> dict[str, Any]:
    return {"p_holds": s["p_holds"].tolist(),
            "p_equivalent": None if s["p_equivalent"] is None else s["p_equivalent"].tolist()}


def prepare(claim: Claim, ctx, i: int, observed) -> tuple[int, Any, Any, list[dict], dict[str, Any]]:
    """What a claim between two groups of levels starts from (a comparison, an expected
    best): its GP seed, the observed universes' values, the surrogate, the reference set
    where the claim is read (converging under every compared level) and the observed
    answer (``observed(values, groups, claim, n_boot, seed)``) with where it is read
    (``observed``, ``read_where``, ``converged_share``)."""
    s_gp, s_obs = derive_seed(ctx.seed, 100 + i), derive_seed(ctx.seed, 200 + i)
    metric, dim = claim["metric"], claim["dimension"]
    y = ctx.values(metric)
    obs = observed(y, [u[dim] for u in ctx.universes], claim, ctx.bootstrap, s_obs)
    base, share = ctx.converging([metric], ctx.reference_set(fix=dim),
                                 [{dim: lv} for lv in list(claim["a"]) + list(claim["b"])])
    out = {"observed": obs, "read_where": context.where_read(share), "converged_share": share}
    return s_gp, y, ctx.surrogates.get(metric), base, out


def analyse(claim: Claim, ctx, i: int, influence) -> ClaimResult:
    s_gp, y, sur, base, out = prepare(claim, ctx, i, observed_answer)
    design, figures = design_answer(claim, ctx), None
    if sur is None or len(base) < 2:
        gp = common.no_surrogate(int(np.isfinite(y).sum()))
    else:
        gp = gp_answer(sur, ctx.space, claim, base, ctx.samples, s_gp)
        figures = figure_data(sur, ctx.space, claim, base, influence, derive_seed(s_gp, 1))
    first = verdict.reading(gp, out["observed"], design, claim["relation"])
    return common.result(claim, SPEC.name, SPEC.statement(claim), [first], read_where=out["read_where"],
                         converged_share=out["converged_share"], figures=figures)
relevance = common.group_relevance
table_cells = verdict.estimate_cells


def grid_local_effects(claim: Claim, space, axes: Mapping[str, Sequence[Any]], values):
    """The local effect at every cell of the other dimensions of a full-factorial grid
    (``axes``: each dimension's values, in the space's order; ``values``: one array over
    them): the mean over ``a``'s levels less ``b``'s."""
    v = np.moveaxis(values, list(axes).index(claim["dimension"]), -1)
    levels = list(axes[claim["dimension"]])
    return (v[..., [levels.index(lv) for lv in claim["a"]]].mean(-1)
            - v[..., [levels.index(lv) for lv in claim["b"]]].mean(-1))


grid_statistic = common.mean_grid_statistic(grid_local_effects)


# --- its figures (drawn by :mod:`multiverse.plots`' helpers) ----------------------
def figure(c: ClaimResult, space, df, path: str) -> None:
    """Each group's partial dependence along each numeric choice, with the universes."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("whitegrid")
    claim = c.claim
    pd_ = c.figures["partial_dependence"]
    fig, axes = P.plt.subplots(1, max(1, len(pd_)), figsize=(4.2 * max(1, len(pd_)), 3.6), squeeze=False)
    for ax, (name, data) in zip(axes[0], pd_.items()):
        for k, (group, levels) in enumerate(P.groups(claim)):
            P.band(ax, data["values"], data["ab"[k]], f"C{k}", group)
            obs = df[df[claim["dimension"]].isin(levels)]
            ax.scatter(obs[name], obs[claim["metric"]], s=14, color=f"C{k}", edgecolor="k", lw=0.3,
                       label=f"{group} universes")
        P.log_axis(ax, space[name])
        ax.set_xlabel(P.label(name))
        ax.set_ylabel(P.label(claim["metric"]))
    axes[0, 0].legend(fontsize=7)
    P.title(fig, c, "partial dependence of each group along each choice (averaged over the others)")
    fig.tight_layout()
    P.save(fig, path)


where_figure = common.holds_where_figure