"""Expected best: the expected best ``metric`` of ``k`` random universes of group ``a``
against group ``b``, for every budget ``k`` from ``min_budget`` on (Dodge et al. 2019),
by the unbiased estimator of Tang et al. 2020 (:func:`multiverse.stats.mean_max`).

Effect: the difference ``a - b`` at the budget least favourable to the claim. Both
answers are on one noise basis: the observed side maximises over universes' means over
their seeds, and the GP side adds the noise of such a mean (one seed's noise over the
square root of the seeds per universe) to its posterior samples, the same draw for both
groups at each reference point (common random numbers), on the metric's warped scale so
that no draw leaves its range.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from multiverse.claims import common
from multiverse.lazy import np

NAME = "expected_best"
STATISTIC = "expected-best difference a - b at the least favourable budget"
#: The figures of :mod:`multiverse.plots` that draw its evidence and where it holds.
FIGURE, WHERE_FIGURE = "expected_best_curves", "expected_best_difference"


def metrics(claim: Mapping[str, Any]) -> list[str]:
    return [claim["metric"]]


def statement(claim: Mapping[str, Any]) -> str:
    a, b = common.levels_text(claim["a"]), common.levels_text(claim["b"])
    return f"expected best {claim['metric']} of {a} {claim['relation']} {b} at every budget >= {claim.get('min_budget', 1)}"


def check(claim: Mapping[str, Any], key: str, checks) -> None:
    from multiverse.config import ConfigError

    checks.metric(claim["metric"], f"{key}.metric")
    checks.groups(claim, key)
    if claim.get("max_budget") and claim["max_budget"] < claim.get("min_budget", 1):
        raise ConfigError(f"{key}.max_budget", f"at least min_budget ({claim.get('min_budget', 1)})", claim["max_budget"])


def budgets(claim: Mapping[str, Any], n_a: int, n_b: int) -> list[int]:
    top = min(n_a, n_b, claim.get("max_budget") or min(n_a, n_b))
    return list(range(claim.get("min_budget", 1), top + 1))


def summarise_budgets(diff, claim: Mapping[str, Any], ks: Sequence[int]) -> dict[str, Any]:
    """Summary of ``samples x budgets`` differences: the claim holds in a sample when the
    difference satisfies it at every budget; the effect is the difference at the
    budget least favourable to the claim."""
    from multiverse import stats

    sign = stats.SIGN[claim["relation"]]
    worst = np.take_along_axis(diff, np.argmin(sign * diff, axis=1)[:, None], 1)[:, 0]
    return {**stats.summarise(worst, claim["relation"], common.margin(claim)), "budgets": list(ks)}


def groups_of(values, groups: Sequence[Any], claim: Mapping[str, Any]):
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=object)
    ok = np.isfinite(values)
    return values[ok & np.isin(groups, list(claim["a"]))], values[ok & np.isin(groups, list(claim["b"]))]


def observed_answer(values, groups: Sequence[Any], claim: Mapping[str, Any], n_boot: int, seed: int) -> dict[str, Any]:
    """Expected-best curves of groups ``a`` and ``b`` from the observed universes, with a
    bootstrap over universes within each group."""
    from multiverse import stats

    a, b = groups_of(values, groups, claim)
    ks = budgets(claim, len(a), len(b))
    if not ks or len(a) < 2 or len(b) < 2:
        return stats.too_few(n_a=int(len(a)), n_b=int(len(b)), budgets=[])
    boot = stats.bootstrap(lambda x, y: np.stack([stats.mean_max(x, ks), stats.mean_max(y, ks)]), [a, b], n_boot, seed)
    ea, eb = boot[0], boot[1]
    out = summarise_budgets(ea - eb, claim, ks)
    pa, pb = stats.mean_max(a, ks), stats.mean_max(b, ks)
    point = pa - pb
    out["effect"] = float(point[np.argmin(stats.SIGN[claim["relation"]] * point)])
    return {**out, "n_a": int(len(a)), "n_b": int(len(b)), "curve_a": {**stats.band(ea), "point": pa.tolist()},
            "curve_b": {**stats.band(eb), "point": pb.tolist()}}


def gp_answer(sur, space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]], n_samples: int, seed: int,
              ks: Sequence[int], noise: float = 1.0) -> dict[str, Any]:
    """Expected-best curves of the surrogate: for each posterior sample plus observation
    noise (``noise`` times one seed's), the expected best of ``k`` universes drawn at
    random from each group's part of the reference set ``base``."""
    from multiverse import stats
    from multiverse.claims.comparison import comparison_universes

    if not ks:
        return stats.too_few(budgets=[])
    levels = len(claim["a"]) + len(claim["b"])
    f = sur.latent(comparison_universes(claim, base), n_samples, seed).reshape(n_samples, levels, len(base))
    eps = np.random.default_rng(seed).standard_normal((n_samples, 1, len(base)))  # the same draw for every level
    f = sur.warp.inverse(f + noise * sur.latent_noise_sd * eps)
    na = len(claim["a"])
    fa, fb = f[:, :na].reshape(n_samples, -1), f[:, na:].reshape(n_samples, -1)
    ea, eb = stats.mean_max(fa, ks), stats.mean_max(fb, ks)
    out = summarise_budgets(ea - eb, claim, ks)
    return {**out, "curve_a": stats.band(ea), "curve_b": stats.band(eb), "noise_sd": float(noise * sur.latent_noise_sd)}


def analyse(claim: Mapping[str, Any], ctx, i: int, influence) -> dict[str, Any]:
    from multiverse.ids import derive_seed
    from multiverse.surrogate import per_universe

    s_gp, s_obs = derive_seed(ctx.seed, 100 + i), derive_seed(ctx.seed, 200 + i)
    metric, dim = claim["metric"], claim["dimension"]
    y = ctx.values(metric)
    obs = observed_answer(y, [u[dim] for u in ctx.universes], claim, ctx.bootstrap, s_obs)
    sur = ctx.surrogates.get(metric)
    base, share = ctx.converging([metric], ctx.reference_set(fix=dim),
                                 [{dim: lv} for lv in list(claim["a"]) + list(claim["b"])])
    out: dict[str, Any] = {"observed": obs, "read_where": common.where_read(share), "converged_share": share}
    if sur is None or len(base) < 2:
        out["gp"] = common.no_surrogate(int(np.isfinite(y).sum()))
    else:
        seeds = np.isfinite(per_universe(ctx.df, ctx.space, metric)[1]).sum(1)
        per = float(np.mean(seeds[seeds > 0])) if (seeds > 0).any() else 1.0
        out["gp"] = gp_answer(sur, ctx.space, claim, base, ctx.samples, s_gp, obs["budgets"], noise=1 / np.sqrt(per))
    return {**out, **common.judge(out["gp"], obs, claim["relation"])}


def rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"label": "marginal", "gp": result["gp"], "observed": result["observed"], "summary": result["summary"]}]
