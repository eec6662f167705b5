"""The pieces several claim types share: the GP's answer without a surrogate, a claim's
design-based answer from the study's drawn universes (:mod:`multiverse.inference`),
a claim's :class:`.contract.ClaimResult`, and the contract members that more than one
type implements the same way.

The context a claim is analysed in is :mod:`.context`; where it holds,
:mod:`.regions`; its one verdict, :mod:`.verdict`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from multiverse import estimators, stats
from multiverse.claims.contract import ClaimResult, Reading
from multiverse.spec.records import Claim

#: Points of a numeric dimension's grid for trends, granulated tau and maps.
TREND_GRID = 9


def no_surrogate(n_finite: int) -> dict[str, Any]:
    """The GP's answer when too few universes finished to fit a surrogate."""
    nan = float("nan")
    return {**stats.too_few(n_finite=n_finite), "fraction_holds": nan, "fraction_holds_lo": nan, "fraction_holds_hi": nan}


# --- the design-based answer --------------------------------------------------------
def design_based(ctx, metrics: Sequence[str], estimate, relation: str, margin_: float = 0.0, pairs: bool = False,
                 **extra: Any) -> dict[str, Any]:
    """A claim's design-based answer (:mod:`multiverse.estimators`): ``estimate`` maps
    the drawn universes' design-based means of ``h`` (``ctx.drawn().means(metrics, h)``,
    or over pairs) to the statistic. ``estimate`` is ``(h, phi)``: the components and the
    statistic of them. Too few drawn universes: no answer."""
    drawn = ctx.drawn()
    n = len(drawn.sample)
    if n < estimators.MIN_DRAWN:
        return stats.too_few(n=n, note=drawn.sample.note)
    h, phi = estimate
    m = drawn.pair_means(metrics, h) if pairs else drawn.means(metrics, h)
    point, se = estimators.estimate(phi, m)
    fidelity = drawn.fidelity(metrics)
    if fidelity is not None:  # a multi-fidelity study: what its answer rests on, per metric
        extra["fidelity"] = fidelity
    return estimators.summarise(float(point), float(se), n - 1, relation, margin_, n=n, note=drawn.sample.note, **extra)


def defined(values):
    """Where a metric is defined (finite), and the values with the rest set to 0."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    return ok, np.where(ok, v, 0.0)


def result(claim: Claim, kind: str, statement: str, readings: Sequence[Reading],
           **fields: Any) -> ClaimResult:
    """A claim type's :class:`ClaimResult` (``kind``: its type's name; ``statement``: the
    claim in words when the config gives none; ``fields``: the rest of the result's)."""
    return ClaimResult(name=claim["name"], type=kind, statement=claim.get("statement") or statement,
                       claim=dict(claim), readings=list(readings), **fields)


def group_relevance(space, claim: Claim, universes: Sequence[Mapping[str, Any]]):
    """``relevance`` of a claim between groups ``a`` and ``b`` of a dimension
    (:func:`multiverse.design_gp.claim_relevance`): 1 in its two groups, 0 elsewhere."""
    levels = list(claim["a"]) + list(claim["b"])
    return np.array([float(u[claim["dimension"]] in levels) for u in universes])


def mean_grid_statistic(local_effects):
    """``grid_statistic`` of a claim whose statistic is the mean of ``local_effects`` (the
    type's ``grid_local_effects``) over a whole full-factorial grid."""
    def grid_statistic(claim: Claim, space, axes: Mapping[str, Sequence[Any]],
                       values: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
        """Its statistic over a whole full-factorial grid (the calibration benchmark's
        truth), from ``values`` (``{metric: array over axes}``)."""
        return float(np.mean(local_effects(claim, space, axes, values[claim["metric"]])))

    return grid_statistic


def holds_where_figure(c: ClaimResult, space, df, path: str) -> None:
    """``where_figure`` of a claim whose map is the local posterior probability that it holds
    (:func:`multiverse.plots.holds_map`): a comparison's, a trend's."""
    from multiverse import plots as P  # matplotlib and seaborn only where a figure is drawn (GP design rounds read claim types)

    P.themed("white")
    P.holds_map(c, space, df, path)

