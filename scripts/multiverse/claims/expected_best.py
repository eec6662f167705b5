"""Expected best: the expected best ``metric`` of ``k`` random universes of group ``a``
against group ``b``, for every budget ``k`` from ``min_budget`` on (Dodge et al. 2019),
by the unbiased estimator of Tang et al. 2020 (:func:`multiverse.stats.mean_max`).

Effect: the difference ``a - b`` at the budget least favourable to the claim; the claim
holds in a sample when it holds at every budget. The effect interval's end on the
claim's side reaches at least the nearest of the budgets' own: the per-sample minimum
over near-tied budgets is pulled against the claim by its noise (a winner's curse),
which put the GP's interval below the truth in the calibration test (docs/benchmarks.md,
"Measured choices").

Both answers are on one noise basis: the observed side maximises over universes' means
over their seeds, and the GP side adds the noise of such a mean (one seed's noise over
the square root of the seeds per universe) to its posterior samples, the same draw for
both groups at each reference point (common random numbers, so that noise alone never
makes a tie look like a difference), on the metric's warped scale so that no draw
leaves its range. Each GP sample's curve also carries the reference set's sampling
error, by half-sampling (:func:`gp_answer`).

Observed side. The target is ``E[max of k]`` of independent draws from the group's
population of universes (for a continuous population, with or without replacement are
the same; :func:`multiverse.stats.mean_max` is unbiased for it for ``k <= n``). No
data-driven interval sees above the sample maximum, so near ``k = n`` none covers: with
``n`` = 12 from one normal population, the percentile bootstrap of the difference held
the truth 0.912, 0.867 and 0.831 of the time at ``k`` = 2, 6 and 12 (a group's own
curve 0.867, 0.658 and 0.454), :func:`expanded_hull` 0.966, 0.930 and 0.915 (0.942,
0.905, 0.845), over 1000 draws. The observed answer is therefore read only at the
budgets ``budgets_observed``, ``k <= sqrt(n)`` (``n`` the smaller group), where
:func:`expanded_hull` held the difference at least 0.93 and a group's curve at least
0.91 of the time for normal and beta populations with ``n`` from 12 to 96 (400 to 1000
draws each; mostly 0.94-0.98). Its curves' points cover every budget; their bands are
NaN beyond ``budgets_observed``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import norm, t

from multiverse import estimators, stats
from multiverse.claims import common, comparison, context, verdict
from multiverse.claims.contract import ClaimResult
from multiverse.spec import claims as spec_claims
from multiverse.spec.records import Claim
from multiverse.surrogate import per_universe

SPEC = spec_claims.EXPECTED_BEST


def budgets(claim: Claim, n_a: int, n_b: int) -> list[int]:
    top = min(n_a, n_b, claim.get("max_budget") or min(n_a, n_b))
    return list(range(claim.get("min_budget", 1), top + 1))


def design_target(space, claim: Claim, n: int, seed: int, mean_at) -> list[context.DesignTarget]:
    """What the claim-targeted design reduces (:class:`.context.DesignTarget`): the
    difference at the least favourable budget, linearised where the GP's posterior mean
    ``mean_at(metric, points)`` puts it: with each group's points in the order of their
    mean, the estimator is a weighted sum of the sorted values
    (:func:`multiverse.stats.mean_max_weights`), and the budget is the one whose
    difference of means is least favourable to the claim. Over :func:`comparison.comparison_universes`
    of a reference set of ``n`` points per level combination."""
    base = context.reference_universes(space, n, seed, fix=claim["dimension"])
    points = comparison.comparison_universes(claim, base)
    mu = np.asarray(mean_at(claim["metric"], points), dtype=float)
    n_a = len(claim["a"]) * len(base)
    groups = (np.arange(n_a), np.arange(n_a, len(points)))
    ks = budgets(claim, n_a, len(points) - n_a)
    if not ks:
        return []
    weights = []
    for k in ks:
        w = np.zeros(len(points))
        for sign, idx in zip((1.0, -1.0), groups):
            w[idx[np.argsort(mu[idx], kind="stable")]] = sign * stats.mean_max_weights(len(idx), k)
        weights.append(w)
    worst = int(np.argmin(stats.SIGN[claim["relation"]] * (np.array(weights) @ mu)))
    return [context.DesignTarget(claim["name"], claim["metric"], points, weights[worst], relation=claim["relation"],
                                margin=spec_claims.margin(claim))]


def observed_budgets(ks: Sequence[int], n: int) -> list[int]:
    """The budgets where the observed side's interval is calibrated: ``k <= sqrt(n)`` for
    ``n`` universes in the smaller group (see the module's docstring)."""
    return [k for k in ks if k * k <= n]


def expanded_hull(point, boot, n: int, level: float = 0.95):
    """A bootstrap interval for an expected maximum: ``point +- d``, ``d`` the longer of
    the bootstrap distribution's two tails from ``point`` at Hesterberg's (2015) expanded
    percentile levels (those at which a normal interval is as wide as a ``t`` interval
    with ``n - 1`` degrees of freedom and the ``n / (n - 1)`` variance correction).

    ``point``: ``budgets``; ``boot``: ``replicates x budgets``; returns ``(lo, hi)``.
    The bootstrap of a maximum cannot see above the sample maximum (the percentile
    interval's upper tail is too short) and is skewed (the reflected, basic interval's
    lower one is): taking the longer tail on both sides covers either way.
    A pure statistic kept here because only this claim type uses it."""
    point, boot = np.asarray(point, dtype=float), np.asarray(boot, dtype=float)
    a = norm.sf(np.sqrt(n / (n - 1)) * t.ppf(1 - (1 - level) / 2, n - 1)) if n > 1 else 0.0
    lo, hi = np.quantile(boot, [a, 1 - a], axis=0)
    d = np.maximum(point - lo, hi - point)
    return point - d, point + d


def calibrated_replicates(point, boot, n: int):
    """``2 replicates x budgets``: the bootstrap deviations from ``point`` and their
    mirror images, scaled at each budget so that their central 95% is the
    :func:`expanded_hull` interval (a budget whose deviations are nearly all zero keeps
    the point). Monotone per budget, so the dependence across budgets, which the
    least-favourable-budget minimum and P(holds) read, is the bootstrap's."""
    point, boot = np.asarray(point, dtype=float), np.asarray(boot, dtype=float)
    dev = np.concatenate([boot - point, point - boot])
    q = np.quantile(dev, 0.975, axis=0)
    d = expanded_hull(point, boot, n)[1] - point
    scale = np.divide(d, q, out=np.zeros_like(d), where=q > 0)
    return point + dev * scale


def summarise_budgets(diff, claim: Claim, ks: Sequence[int]) -> dict[str, Any]:
    """Summary of ``samples x budgets`` differences: the claim holds in a sample when the
    difference satisfies it at every budget; the effect is the difference at the
    budget least favourable to the claim. The interval's end on the claim's side reaches
    at least the nearest of the budgets' own (the least favourable budget's effect is no
    larger than any budget's, and the per-sample minimum of near-tied budgets is biased
    against the claim)."""
    rel = claim["relation"]
    sign = stats.SIGN[rel]
    diff = np.asarray(diff, dtype=float)
    worst = np.take_along_axis(diff, np.argmin(sign * diff, axis=1)[:, None], 1)[:, 0]
    out = {**stats.summarise(worst, rel, spec_claims.margin(claim)), "budgets": list(ks)}
    if np.isfinite(out["effect"]):
        far = sign * float(np.min(stats.interval(sign * diff, axis=0)[1]))
        if sign > 0:
            out["effect_hi"] = max(out["effect_hi"], far)
        else:
            out["effect_lo"] = min(out["effect_lo"], far)
    return out


def groups_of(values, groups: Sequence[Any], claim: Claim):
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=object)
    ok = np.isfinite(values)
    return values[ok & np.isin(groups, list(claim["a"]))], values[ok & np.isin(groups, list(claim["b"]))]


def observed_curve(point, boot, n: int, read: int, bounds: tuple = (None, None)) -> dict[str, list]:
    """One group's expected-best curve: the MeanMax point (also as ``mean``) and the
    :func:`expanded_hull` band, within the metric's declared range ``bounds``, at the
    first ``read`` budgets (NaN beyond: not calibrated)."""
    low, high = bounds
    lo, hi = (np.clip(x, low, high) if low is not None or high is not None else x
              for x in expanded_hull(point, boot, n))
    lo[read:], hi[read:] = np.nan, np.nan
    return {"mean": point.tolist(), "lo": lo.tolist(), "hi": hi.tolist(), "point": point.tolist()}


def observed_answer(values, groups: Sequence[Any], claim: Claim, n_boot: int, seed: int,
                    bounds: tuple = (None, None)) -> dict[str, Any]:
    """Expected-best curves of groups ``a`` and ``b`` from the observed universes, with a
    stratified bootstrap over universes; the verdict and effect at ``budgets_observed``
    only (:func:`observed_budgets`), by the :func:`calibrated_replicates` of the
    difference. ``budgets`` (every budget of the claim) is what the GP side reads;
    ``bounds``: the metric's declared range."""
    a, b = groups_of(values, groups, claim)
    ks = budgets(claim, len(a), len(b))
    if not ks or len(a) < 2 or len(b) < 2:
        return stats.too_few(n_a=int(len(a)), n_b=int(len(b)), budgets=[], budgets_observed=[])
    n = min(len(a), len(b))
    read = observed_budgets(ks, n)
    boot = stats.bootstrap(lambda x, y: np.stack([stats.mean_max(x, ks), stats.mean_max(y, ks)]), [a, b], n_boot, seed)
    pa, pb = stats.mean_max(a, ks), stats.mean_max(b, ks)
    curves = {"n_a": int(len(a)), "n_b": int(len(b)), "curve_a": observed_curve(pa, boot[0], len(a), len(read), bounds),
              "curve_b": observed_curve(pb, boot[1], len(b), len(read), bounds)}
    if not read:
        note = f"no budget from {ks[0]} is read from {n} observed universes (k <= sqrt(n))"
        return {**stats.too_few(budgets=ks, budgets_observed=[], note=note), **curves}
    r = len(read)
    point = (pa - pb)[:r]
    out = summarise_budgets(calibrated_replicates(point, (boot[0] - boot[1])[:, :r], n), claim, read)
    out["effect"] = float(point[np.argmin(stats.SIGN[claim["relation"]] * point)])
    return {**out, "budgets": ks, "budgets_observed": read, **curves}


def gp_answer(sur, space, claim: Claim, base: Sequence[Mapping[str, Any]], n_samples: int, seed: int,
              ks: Sequence[int], noise: float = 1.0) -> dict[str, Any]:
    """Expected-best curves of the surrogate: for each posterior sample plus observation
    noise (``noise`` times one seed's), the expected best of ``k`` universes drawn at
    random from each group's part of the reference set ``base``.

    The reference set is a finite sample of the multiverse, so each posterior sample
    reads its own random half of it (the same points for every level; more than half
    where a budget needs them): half-sampling, whose spread about the whole set's answer
    is about the whole set's own sampling error, as the comparison's integral carries it
    (:func:`multiverse.stats.reference_mean`); MeanMax of a subset drawn without
    replacement is unbiased for the whole set's."""
    if not ks:
        return stats.too_few(budgets=[])
    na, nb, m = len(claim["a"]), len(claim["b"]), len(base)
    f = sur.latent(comparison.comparison_universes(claim, base), n_samples, seed).reshape(n_samples, na + nb, m)
    rng = np.random.default_rng(seed)
    eps = rng.standard_normal((n_samples, 1, m))  # the same draw for every level
    f = sur.warp.inverse(f + noise * sur.latent_noise_sd * eps)
    size = min(m, max(-(-m // 2), -(-max(ks) // min(na, nb))))
    half = np.argsort(rng.random((n_samples, m)), axis=1)[:, None, :size]
    f = np.take_along_axis(f, half, 2)
    ea = stats.mean_max(f[:, :na].reshape(n_samples, -1), ks)
    eb = stats.mean_max(f[:, na:].reshape(n_samples, -1), ks)
    out = summarise_budgets(ea - eb, claim, ks)
    return {**out, "curve_a": stats.band(ea), "curve_b": stats.band(eb), "noise_sd": float(noise * sur.latent_noise_sd),
            "reference_read": int(size)}


#: Thresholds of a design-based CDF besides the drawn universes' own values.
CDF_GRID = 256


def design_components(claim: Claim, drawn, ks: Sequence[int], bounds: tuple = (None, None)):
    """Each group's distribution of the metric over the multiverse as a CDF at a grid of
    thresholds (the drawn universes' values, and quantiles of every prediction), as
    means of ``1{y <= v}`` over the universes where the metric is defined; the statistic
    is the expected-best difference at the least favourable budget
    (:func:`multiverse.estimators.expected_max` of each group's CDF)."""
    metric, dim, a, b = claim["metric"], claim["dimension"], list(claim["a"]), list(claim["b"])
    own, ref = drawn.predictions(metric)[:2]
    obs = drawn.observed(metric)
    pool = np.concatenate([obs[np.isfinite(obs)], own[np.isfinite(own)], ref.ravel()])
    grid = np.unique(np.concatenate([obs[np.isfinite(obs)], np.quantile(pool, np.linspace(0, 1, CDF_GRID)),
                                     [v for v in bounds if v is not None]]))
    lo = bounds[0] if bounds[0] is not None else grid[0]
    grid = np.unique(np.concatenate([[lo], grid[grid >= lo]]))
    L = len(grid)

    def h(universes, values):
        ok, y = common.defined(values[metric])
        below = (y[:, None] <= grid[None, :]) & ok[:, None]
        out = []
        for side in (a, b):
            g = np.array([u[dim] in side for u in universes], dtype=bool)
            out += [below * g[:, None], (ok & g)[:, None]]
        return np.concatenate(out, 1).astype(float)


    s = stats.SIGN[claim["relation"]]

    def phi(m):
        with np.errstate(invalid="ignore", divide="ignore"):
            Fa = m[..., :L] / m[..., L:L + 1]
            Fb = m[..., L + 1:2 * L + 1] / m[..., 2 * L + 1:2 * L + 2]
        diff = estimators.expected_max(Fa, grid, ks) - estimators.expected_max(Fb, grid, ks)
        worst = np.argmin(s * np.where(np.isfinite(diff), diff, np.inf), axis=-1)
        return np.take_along_axis(diff, worst[..., None], -1)[..., 0]

    return h, phi


def design_answer(claim: Claim, ctx, ks: Sequence[int], bounds: tuple = (None, None)) -> dict[str, Any]:
    """The design-based answer: the expected-best difference at the least favourable
    budget, each group's expected best read off its design-based CDF of the metric over
    the multiverse (:mod:`multiverse.estimators`)."""
    if not ks:
        return stats.too_few(budgets=[])
    drawn = ctx.drawn()
    if len(drawn.sample) < 6:
        return stats.too_few(n=len(drawn.sample), note=drawn.sample.note)
    return common.design_based(ctx, [claim["metric"]], design_components(claim, drawn, ks, bounds),
                               claim["relation"], spec_claims.margin(claim), budgets=list(ks))


def analyse(claim: Claim, ctx, i: int, influence) -> ClaimResult:
    bounds = ctx.declaration(claim["metric"])["range"]
    s_gp, y, sur, base, out = comparison.prepare(claim, ctx, i, partial(observed_answer, bounds=bounds))
    design = design_answer(claim, ctx, out["observed"]["budgets"], bounds)
    if sur is None or len(base) < 2:
        gp = common.no_surrogate(int(np.isfinite(y).sum()))
    else:
        seeds = np.isfinite(per_universe(ctx.df, ctx.space, claim["metric"], ctx.declared)[1]).sum(1)
        per = float(np.mean(seeds[seeds > 0])) if (seeds > 0).any() else 1.0
        gp = gp_answer(sur, ctx.space, claim, base, ctx.samples, s_gp, out["observed"]["budgets"],
                       noise=1 / np.sqrt(per))
    first = verdict.reading(gp, out["observed"], design, claim["relation"])
    return common.result(claim, SPEC.name, SPEC.statement(claim), [first], read_where=out["read_where"],
                         converged_share=out["converged_share"])
relevance = common.group_relevance
table_cells = verdict.estimate_cells


def grid_statistic(claim: Claim, space, axes: Mapping[str, Sequence[Any]],
                   values: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
    """Its statistic over a whole full-factorial grid (the calibration benchmark's truth),
    from ``values`` (``{metric: axes x seeds}`` single-seed outcomes): the difference of
    the groups' expected best at the budget (of ``budgets``) least favourable to the claim."""
    v = np.moveaxis(values[claim["metric"]], list(axes).index(claim["dimension"]), 0)
    levels = list(axes[claim["dimension"]])
    group = lambda side: np.concatenate([v[levels.index(lv)].ravel() for lv in claim[side]])  # noqa: E731
    diff = stats.mean_max(group("a"), budgets) - stats.mean_max(group("b"), budgets)
    return float(diff[np.argmin(stats.SIGN[claim["relation"]] * diff)])


# --- its figures (drawn by :mod:`multiverse.plots`' helpers) ----------------------
def figure(c: ClaimResult, space, df, path: str) -> None:
    """Each group's expected best against the budget: GP band and observed MeanMax."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("whitegrid")
    claim = c.claim
    fig, ax = P.plt.subplots(figsize=(7, 4))
    ks = c.observed["budgets"]
    for k, (name, _) in enumerate(P.groups(claim)):
        key = "curve_a" if k == 0 else "curve_b"
        g, o = c.gp[key], c.observed[key]
        P.band(ax, ks, g, f"C{k}", f"{name}: GP")
        P.errorbars(ax, np.asarray(ks) + 0.1 * (k - 0.5), o["point"], o["lo"], o["hi"], color=f"C{k}", ms=3,
                    label=f"{name}: observed, MeanMax (95% bootstrap)")
    ax.axvline(claim.get("min_budget", 1), color="k", ls=":", lw=0.8, label="claim's smallest budget")
    ax.set_xlabel("budget: universes tried")
    ax.set_ylabel(f"expected best {P.label(claim['metric'])}")
    ax.legend(fontsize=7)
    P.title(fig, c, "expected best performance against budget")
    fig.tight_layout()
    P.save(fig, path)


def where_figure(c: ClaimResult, space, df, path: str) -> None:
    """The expected-best difference a - b against the budget, GP and observed."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("whitegrid")
    ks = np.asarray(c.observed["budgets"])
    fig, ax = P.plt.subplots(figsize=(7, 3.6))
    for k, (key, e) in enumerate((("gp", c.gp), ("observed", c.observed))):
        a, b = e["curve_a"], e["curve_b"]
        diff = np.asarray(a["mean"]) - np.asarray(b["mean"])
        ax.plot(ks, diff, color=f"C{k}", marker="o", ms=3,
                label=f"{'GP' if key == 'gp' else 'observed'}: mean difference (worst budget "
                      f"{e['effect']:+.3f} [{e['effect_lo']:+.3f}, {e['effect_hi']:+.3f}])")
    ax.axhline(0, color="k", lw=0.8)
    ax.axvline(c.claim.get("min_budget", 1), color="k", ls=":", lw=0.8)
    ax.set_xlabel("budget: universes tried")
    ax.set_ylabel("expected best: a - b")
    ax.legend(fontsize=7)
    ax.set_title(f"{c.statement}: where it holds along the budget\nverdict: {c.summary}", fontsize=8, wrap=True)
    P.save(fig, path)