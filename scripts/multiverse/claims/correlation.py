"""Correlation: across universes, metric ``x`` predicts metric ``y``.

Kendall's tau, and the granulated tau of Jiang et al. (2020): the mean tau along each
dimension with the others held fixed, averaged over dimensions. The GP's answer comes
from joint posterior samples of one two-outcome model (:func:`multiverse.two_outcome.fit_multitask_gp`:
two independent GPs would give samples whose unexplained wiggles are independent, which
pulls a sampled tau towards 0; one shared kernel would copy the overall correlation onto
every dimension); the observed answer is scipy's tau with a bootstrap over universes,
and a granulated tau on matched universes where the design has any.

The two-outcome model works on each metric's normal scores (:class:`multiverse.gp.RankWarp`),
not on its declared range's scale: tau is a statistic of ranks, so any increasing scale
models the same claim, and on this one a collapsed run's enormous loss is just the
largest value. On the declared (log) scale such outliers shrank the model's lengthscales,
and its sampled taus fell short of the truth on a real grid (``benchmarks/calibration.py``;
docs/benchmarks.md, "Calibration on real trainings").

Along a dimension that moves neither metric every pair is tied and tau is undefined, so
it has no per-dimension tau and the granulated mean leaves it out (``granulated_excluded``
says which and why). Along one that moves only one metric, tau-b is undefined too, but
such a dimension is kept: its tau is read from the posterior as any other (a flat
metric's paths are its posterior uncertainty, which gives a wide interval around 0, and
pulls the mean towards 0 as Jiang et al.'s tau, which counts ties as 0, would); dropping
it would hide a proxy that moves where the target does not, the failure the granulated
tau is there to catch. Whether a metric varies along a dimension is read from the
posterior (:func:`path_signal`), not from a fixed effect size: the fitted noise can be
far too small (the GP then fits noise, and its mean path wiggles along a dimension that
does nothing), while the posterior's own uncertainty about the path says how much of a
wiggle is real. In the report a dimension also counts as moving a metric where the Sobol
table on the same page (each metric's own surrogate) gives it a total-order index of at
least :data:`MIN_TOTAL_ORDER`, so the two never contradict each other: the two-outcome
model works on normal scores and can see a path as flat that the metric's own surrogate
does not (the default study's lr and gap did).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import kendalltau

from multiverse import estimators, stats
from multiverse.claims import common, context, verdict
from multiverse.claims.contract import ClaimResult
from multiverse.gp import MIN_FIT, RankWarp, dimension_grid, joint_samples
from multiverse.ids import derive_seed
from multiverse.spec import claims as spec_claims
from multiverse.spec.records import Claim
from multiverse.two_outcome import fit_multitask_gp, multitask_loo_diagnostics

SPEC = spec_claims.CORRELATION
#: Fewest matched groups (universes differing in one dimension only) for an observed
#: granulated tau; with fewer, a single pair's tau of +-1 would stand for the whole claim.
MIN_MATCHED_GROUPS = 5
#: A metric varies along a dimension when its posterior-mean path's variation along it
#: is at least this multiple of the path's posterior variance (:func:`path_signal`): two
#: thirds of the sampled paths' variation common to them. Under a flat truth a calibrated
#: posterior gives about 1 (the values measured on the tests' multiverses are in the
#: docs/benchmarks.md, "Measured choices").
MIN_SIGNAL = 2.0
#: A metric also varies along a dimension when that dimension's total-order Sobol index
#: of the metric (the report's table, :func:`multiverse.sensitivity.sobol_indices`, from
#: the metric's own surrogate) is at least this share of its variance, so that no
#: dimension the Sobol table credits is called flat.
MIN_TOTAL_ORDER = 0.05


class JointSurrogate:
    """A two-outcome GP of ``x`` and ``y`` on their warped scales (:func:`multiverse.two_outcome.fit_multitask_gp`)."""
    def __init__(self, model, space, warps):
        self.model, self.space, self.warps = model, space, warps

    def sample(self, universes: Sequence[Mapping[str, Any]], n: int, seed: int):
        """``n x len(universes) x 2`` joint samples on the metrics' scales."""
        f = joint_samples(self.model, self.space, universes, n, seed)
        return np.stack([w.inverse(f[..., k]) for k, w in enumerate(self.warps)], -1)

    def diagnostics(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """LOO diagnostics of each outcome of the model the verdict rests on, by metric name."""
        return dict(zip(names, multitask_loo_diagnostics(self.model, self.warps)))


def fit_joint(space, universes: Sequence[Mapping[str, Any]], x, y, seed: int, warps, starts: int = 1) -> JointSurrogate:
    Y = np.c_[warps[0].forward(x), warps[1].forward(y)]
    return JointSurrogate(fit_multitask_gp(space, universes, Y, seed, starts=starts), space, warps)


def granulated_universes(space, name: str, base: Sequence[Mapping[str, Any]]) -> tuple[list, int, int]:
    """``base x grid`` universes varying only ``name`` (base-major); base points where
    ``name`` is inactive are left out."""
    d = space[name]
    values = dimension_grid(space, name, common.TREND_GRID)
    kept = [u for u in base if d.is_active({**u, name: values[0]})]
    return [{**u, name: v} for u in kept for v in values], len(kept), len(values)


def path_signal(paths):
    """How clearly each metric varies along one dimension, from ``samples x base x grid x m``
    posterior paths (each base point with that dimension moved over its grid): the
    variation of the mean path over the mean posterior variance of the path, both about
    the path's own mean over the grid, averaged over base points (``m`` values). Under a
    flat truth the mean path's wiggles are of the size of their own uncertainty (about 1
    or less); a real effect gives much more."""
    centred = paths - paths.mean(2, keepdims=True)
    signal = (centred.mean(0) ** 2).sum(1).mean(0)
    noise = centred.var(0).sum(1).mean(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return signal / noise


def gp_answer(joint, space, claim: Claim, base: Sequence[Mapping[str, Any]],
              n_samples: int, seed: int, n_granulated: int = 24,
              sobol: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Kendall tau between two outcomes across the multiverse, and granulated tau, from
    joint posterior samples of a two-outcome surrogate ``joint``.

    Each sample gives one tau over ``base``; a bootstrap of ``base`` per sample adds
    the reference set's own sampling error. Granulated tau: for each dimension, the
    mean over ``n_granulated`` base points of the tau along that dimension alone, then
    the mean over dimensions (Jiang et al. 2020, Eq. 4), over the dimensions along which
    at least one metric varies: its :func:`path_signal` is at least :data:`MIN_SIGNAL`
    (see the module docstring), or, where ``sobol`` gives the report's Sobol indices
    (``{metric: {dimension: {"total", ...}}}``), its total-order index is at least
    :data:`MIN_TOTAL_ORDER`. ``granulated_excluded`` names the dimensions left out and why,
    ``granulated_signal`` gives each metric's :func:`path_signal` along each dimension,
    and each per-dimension answer lists the metrics that vary along it (``varies``).
    """
    rng = np.random.default_rng(seed)
    rel, m = claim["relation"], spec_claims.margin(claim)
    names = SPEC.metrics(claim)
    f = joint.sample(base, n_samples, seed)  # samples x base x 2
    idx = rng.integers(0, len(base), (n_samples, len(base)))
    tau = stats.kendall_tau(np.take_along_axis(f[..., 0], idx, 1), np.take_along_axis(f[..., 1], idx, 1))
    out = stats.summarise(tau, rel, m)
    per_dim, varies_by_dim, excluded, signal = {}, {}, {}, {}
    for j, d in enumerate(space.dimensions):
        grid, nb, ng = granulated_universes(space, d.name, base[:n_granulated])
        if nb < 2:
            excluded[d.name] = "active at fewer than 2 base points"
            continue
        g = joint.sample(grid, n_samples, seed + 1 + j).reshape(n_samples, nb, ng, 2)
        s = path_signal(g)
        signal[d.name] = dict(zip(names, map(float, s)))
        total = {n: ((sobol or {}).get(n) or {}).get(d.name, {}).get("total", float("nan")) for n in names}
        varies = [n for n, v in zip(names, s) if v >= MIN_SIGNAL or total[n] >= MIN_TOTAL_ORDER]
        if not varies:
            why = f"path signal < {MIN_SIGNAL:g}"
            if all(np.isfinite(t) for t in total.values()):
                why = (f"total-order Sobol index < {MIN_TOTAL_ORDER:g} ("
                       + ", ".join(f"{n} {t:.2f}" for n, t in total.items()) + f"), {why}")
            excluded[d.name] = f"neither metric varies along it: {why}"
            continue
        t = stats.kendall_tau(g[..., 0], g[..., 1])  # samples x base
        bi = rng.integers(0, nb, (n_samples, nb))
        per_dim[d.name] = np.nanmean(np.take_along_axis(t, bi, 1), axis=1)
        varies_by_dim[d.name] = varies
    out["granulated_excluded"], out["granulated_signal"] = excluded, signal
    if per_dim:
        gran = np.mean(np.array(list(per_dim.values())), axis=0)
        out["granulated"] = stats.summarise(gran, rel, m)
        out["granulated_per_dimension"] = {k: {**stats.summarise(v, rel, m), "varies": varies_by_dim[k]}
                                           for k, v in per_dim.items()}
    return out


def matched_groups(space, universes: Sequence[Mapping[str, Any]]) -> dict[str, list[list[int]]]:
    """Per dimension, the groups (of 2 or more) of observed universes that differ in that
    dimension only (few in a Sobol or GP design unless it is a grid)."""
    out = {}
    for d in space.dimensions:
        groups: dict[tuple, list[int]] = {}
        for i, u in enumerate(universes):
            groups.setdefault(space.key({**u, d.name: None}), []).append(i)
        keep = [g for g in groups.values() if len(g) >= 2]
        if keep:
            out[d.name] = keep
    return out


def matched_granulated(space, universes: Sequence[Mapping[str, Any]], x, y, n_boot: int = 0,
                       seed: int = 0) -> dict[str, Any]:
    """Granulated tau on matched universes: per dimension, the mean tau within its
    :func:`matched_groups`, then the mean over dimensions. With ``n_boot``, a bootstrap
    over the groups (resampled within each dimension) gives its interval.

    Returns ``{"per_dimension", "effect", "lo", "hi", "groups"}`` (NaN effect and
    interval with fewer than :data:`MIN_MATCHED_GROUPS` groups).
    """
    taus = {}
    for name, groups in matched_groups(space, universes).items():
        t = np.array([float(stats.kendall_tau(x[g], y[g])) for g in groups])
        if np.isfinite(t).any():
            taus[name] = t[np.isfinite(t)]
    n_groups = int(sum(len(t) for t in taus.values()))
    out = {"per_dimension": {k: float(t.mean()) for k, t in taus.items()}, "groups": n_groups,
           "effect": float("nan"), "lo": float("nan"), "hi": float("nan")}
    if n_groups < MIN_MATCHED_GROUPS:
        return out
    out["effect"] = float(np.mean([t.mean() for t in taus.values()]))
    if n_boot:
        boot = stats.bootstrap(lambda *ts: np.mean([t.mean(1) for t in ts], axis=0), list(taus.values()), n_boot, seed)
        out["lo"], out["hi"] = stats.interval(boot)
    return out


def observed_answer(space, universes: Sequence[Mapping[str, Any]], x, y, claim: Claim, n_boot: int,
                    seed: int) -> dict[str, Any]:
    """Kendall tau (scipy) over the observed universes, with a bootstrap over universes,
    and granulated tau on matched universes where the design has any."""


    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    us = [u for u, k in zip(universes, ok) if k]
    x, y = x[ok], y[ok]
    if len(x) < 4:
        return stats.too_few(n=int(len(x)))
    boot = stats.bootstrap(lambda r: stats.kendall_tau(r[..., 0], r[..., 1]), [np.c_[x, y]], n_boot, seed)
    out = {**stats.summarise(boot, claim["relation"], spec_claims.margin(claim)),
           "effect": float(kendalltau(x, y).statistic), "n": int(len(x))}
    matched = matched_granulated(space, us, x, y, n_boot, seed + 1)
    out["granulated_matched"] = matched["effect"]
    out["granulated_matched_lo"], out["granulated_matched_hi"] = matched["lo"], matched["hi"]
    out["granulated_matched_groups"] = matched["groups"]
    out["granulated_matched_dimensions"] = sorted(matched["per_dimension"])
    return out


def design_components(claim: Claim):
    """Kendall's tau-b over pairs of universes where both metrics are defined, as three
    pair means (concordance, and each metric's share of untied pairs): the kernel and the
    statistic (:func:`multiverse.estimators.tau_b`)."""
    mx, my = claim["x"], claim["y"]

    def kernel(va, vb):
        oka, xa = common.defined(va[mx])
        okb, xb = common.defined(vb[mx])
        oya, ya = common.defined(va[my])
        oyb, yb = common.defined(vb[my])
        ok = ((oka & oya)[:, None] & (okb & oyb)[None, :]).astype(float)
        sx = np.sign(xa[:, None] - xb[None, :]) * ok
        sy = np.sign(ya[:, None] - yb[None, :]) * ok
        return np.stack([sx * sy, sx * sx, sy * sy], -1)

    return kernel, estimators.tau_b


def design_answer(claim: Claim, ctx) -> dict[str, Any]:
    """The design-based answer: Kendall's tau-b between the two metrics over the
    multiverse, a U-statistic over pairs of drawn universes (:mod:`multiverse.estimators`)."""
    return common.design_based(ctx, SPEC.metrics(claim), design_components(claim), claim["relation"],
                               spec_claims.margin(claim), pairs=True)


def design_target(space, claim: Claim, n: int, seed: int, mean_at) -> list[context.DesignTarget]:
    """What the claim-targeted design reduces (:class:`.context.DesignTarget`): tau is
    not a weighted sum of the metrics, so as a stand-in the posterior variance of each of
    its two metrics over a reference set of ``n`` points per level combination."""
    base = context.reference_universes(space, n, seed)
    return [context.DesignTarget(claim["name"], m, base, integrated=True) for m in SPEC.metrics(claim)]


def analyse(claim: Claim, ctx, i: int, influence) -> ClaimResult:
    s_gp, s_obs = derive_seed(ctx.seed, 100 + i), derive_seed(ctx.seed, 200 + i)
    x, y = ctx.values(claim["x"]), ctx.values(claim["y"])
    obs = observed_answer(ctx.space, ctx.universes, x, y, claim, ctx.bootstrap, s_obs)
    base, share = ctx.converging(SPEC.metrics(claim), ctx.space.sobol(ctx.reference, derive_seed(ctx.seed, 1)))
    design = design_answer(claim, ctx)
    figures = diagnostics = joint = None
    finite = np.isfinite(x) & np.isfinite(y)
    if finite.sum() < MIN_FIT or len(base) < 4:
        gp = common.no_surrogate(int(finite.sum()))
    else:
        joint = fit_joint(ctx.space, ctx.universes, x, y, s_gp, [RankWarp(x), RankWarp(y)], ctx.hyperparameter_starts)
        gp = gp_answer(joint, ctx.space, claim, base, ctx.samples, s_gp, sobol=ctx.sensitivity)
        f = joint.sample(base, 64, derive_seed(s_gp, 99))
        figures = {"x": np.median(f[..., 0], 0).tolist(), "y": np.median(f[..., 1], 0).tolist()}
        # the verdict rests on this model, so its LOO flags a poor fit (not the single-output GPs')
        diagnostics = joint.diagnostics(SPEC.metrics(claim))
    return common.result(claim, SPEC.name, SPEC.statement(claim), [verdict.reading(gp, obs, design, claim["relation"])],
                         read_where=context.where_read(share), converged_share=share, figures=figures,
                         diagnostics=diagnostics, model=joint)


def relevance(space, claim: Claim, universes: Sequence[Mapping[str, Any]]):
    """Every universe weighs in a tau (:func:`multiverse.design_gp.claim_relevance`)."""
    return np.ones(len(universes))


def table_cells(gp: Mapping[str, Any], observed: Mapping[str, Any]) -> tuple[str, str]:
    """Its cells of the summary table: the GP's tau with its granulated tau (and the
    dimensions it leaves out), the observed tau with the matched universes' granulated one."""
    gp_est, obs_est = verdict.estimate(gp), verdict.estimate(observed)
    if "granulated" in gp:
        gp_est += f"; granulated {verdict.estimate(gp['granulated'])}"
    if gp.get("granulated_excluded"):
        gp_est += " (left out: " + ", ".join(f"{d}: {why}" for d, why in gp["granulated_excluded"].items()) + ")"
    if np.isfinite(observed.get("granulated_matched", np.nan)):
        obs_est += (f"; granulated ({observed['granulated_matched_groups']} matched groups) "
                    f"{observed['granulated_matched']:+.3f} [{observed['granulated_matched_lo']:+.3f}, "
                    f"{observed['granulated_matched_hi']:+.3f}]")
    return gp_est, obs_est


def grid_statistic(claim: Claim, space, axes: Mapping[str, Sequence[Any]],
                   values: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
    """Its statistic over a whole full-factorial grid (the calibration benchmark's truth):
    Kendall's tau over every cell where both metrics are finite."""
    x, y = np.ravel(values[claim["x"]]), np.ravel(values[claim["y"]])
    ok = np.isfinite(x) & np.isfinite(y)
    return float(kendalltau(x[ok], y[ok]).statistic)


# --- its figures (drawn by :mod:`multiverse.plots`' helpers) ----------------------
def figure(c: ClaimResult, space, df, path: str) -> None:
    """The observed universes' scatter of the two metrics beside the GP's (medians at the reference set)."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("whitegrid")
    claim = c.claim
    x, y = claim["x"], claim["y"]
    fig, (a, b) = P.plt.subplots(1, 2, figsize=(10, 4))
    P.sns.scatterplot(data=df, x=x, y=y, hue=P.hue_dimension(space), hue_order=P.hue_levels(space), ax=a, s=30)
    o = c.observed
    a.set_title(f"observed universes: Kendall tau {o['effect']:+.2f} [{o['effect_lo']:+.2f}, {o['effect_hi']:+.2f}]"
                if np.isfinite(o["effect"]) else "observed universes", fontsize=8)
    a.set_xlabel(P.label(x))
    a.set_ylabel(P.label(y))
    b.scatter(c.figures["x"], c.figures["y"], s=10, alpha=0.6, color="C2", label="reference universes (GP medians)")
    g = c.gp
    b.set_title(f"GP surrogate: tau {g['effect']:+.2f} [{g['effect_lo']:+.2f}, {g['effect_hi']:+.2f}]", fontsize=8)
    b.set_xlabel(f"{P.label(x)} (GP median)")
    b.set_ylabel(f"{P.label(y)} (GP median)")
    b.legend(fontsize=7)
    P.title(fig, c, "does one metric predict the other across the multiverse?")
    fig.tight_layout()
    P.save(fig, path)


def where_figure(c: ClaimResult, space, df, path: str) -> None:
    """Kendall tau along each choice with the others fixed, the granulated mean and the overall tau."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("whitegrid")
    per = c.gp.get("granulated_per_dimension", {})
    names = list(per) + (["granulated (mean)"] if "granulated" in c.gp else []) + ["overall tau"]
    vals = list(per.values()) + ([c.gp["granulated"]] if "granulated" in c.gp else []) + [c.gp]
    fig, ax = P.plt.subplots(figsize=(1.1 * len(names) + 3, 3.6))
    P.errorbars(ax, np.arange(len(names)), [v["effect"] for v in vals], [v["effect_lo"] for v in vals],
                [v["effect_hi"] for v in vals], color="C0", label="GP surrogate (95% CrI)")
    o = c.observed
    if np.isfinite(o["effect"]):
        P.errorbars(ax, [len(names) - 1 + 0.15], [o["effect"]], [o["effect_lo"]], [o["effect_hi"]], color="C1",
                    label="observed universes (95% bootstrap CI)")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(names)), [P.label(n) for n in names], rotation=20)
    ax.set_ylabel("Kendall tau")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(fontsize=7)
    ax.set_title(f"{c.statement}: tau along each choice with the others fixed (Jiang et al. 2020)\n"
                 f"verdict: {c.summary}", fontsize=8, wrap=True)
    P.save(fig, path)