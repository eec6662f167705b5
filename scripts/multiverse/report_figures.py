"""The report's figures, drawn from what :mod:`multiverse.report_analysis` computed:
each metric's posterior map, specification curve and LOO calibration, the outcomes
against every dimension, each claim's two figures (its type's ``figure`` and
``where_figure``), the claims' forest and the Sobol bars. :mod:`multiverse.plots` draws;
this module says which figure goes to which file, and runs them side by side in
forked workers (:func:`multiverse.runtime.fork_map`)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from multiverse import plots, stats
from multiverse.claims import TYPES
from multiverse.claims.contract import ClaimResult
from multiverse.claims.regions import map_dimensions
from multiverse.gp import MIN_FIT
from multiverse.report_analysis import posterior_map_data, specification_data
from multiverse.runtime import fork_map
from multiverse.space import SearchSpace
from multiverse.spec.claims import SPECS


def statuses(df: pd.DataFrame) -> dict[str, int]:
    return df["status"].value_counts().to_dict()


def surrogate_figures(df: pd.DataFrame, space: SearchSpace, base: Sequence[Mapping[str, Any]],
                      out: Mapping[str, Any], m: str, sur: Any, influence: Any, diagnostics: Any,
                      claims: Sequence[Mapping[str, Any]] = ()) -> None:
    """Metric ``m``'s posterior map, specification curve (with the ``claims`` on it) and
    LOO calibration (a message figure in the GP's where it has no surrogate)."""
    if sur is None:
        msg = f"No surrogate for {m}: fewer than {MIN_FIT} universes have a finite value\n(statuses: {statuses(df)})"
        for kind in ("maps", "sobol", "loo"):
            plots.message_figure(msg, out[kind][m])
        if df[m].notna().any():
            plots.specification_curve(specification_data(None, space, df, m, claims), space, m, out["curves"][m])
        else:
            plots.message_figure(msg, out["curves"][m])
        return
    dims = map_dimensions(space, influence, exclude=())
    if len(dims) < 2:
        plots.message_figure(f"No posterior map for {m}: it needs two numeric, unconditional dimensions "
                             f"(this space has {len(dims)})", out["maps"][m])
    else:
        plots.posterior_map(posterior_map_data(sur, space, dims, base), space, df, m, out["maps"][m])
    plots.specification_curve(specification_data(sur, space, df, m, claims), space, m, out["curves"][m])
    plots.loo_calibration(diagnostics, m, out["loo"][m])


def figures_beside_analysis(df: pd.DataFrame, space: SearchSpace, metrics: Sequence[str],
                            base: Sequence[Mapping[str, Any]], out: Mapping[str, Any], ctx: Any,
                            infl: Mapping[str, Any], diag: Mapping[str, Any],
                            claims: Sequence[Mapping[str, Any]] = ()) -> list[Callable[[], Any]]:
    """The figures that need no verdict, as tasks the analysis runs beside the claims'
    (:func:`multiverse.report_analysis.analyse`'s ``alongside``)."""
    return [lambda: plots.outcomes_vs_dimensions(df, space, metrics, out["outcomes"]),
            *(lambda m=m: surrogate_figures(df, space, base, out, m, ctx.surrogates[m], infl[m], diag[m], claims)
              for m in metrics)]


def claim_figures(c: ClaimResult, space: SearchSpace, df: pd.DataFrame, out: Mapping[str, Any]) -> None:
    """Claim ``c``'s figure and where it holds, or a message in both without a surrogate verdict."""
    main_png, where_png = out["claim_figures"][c.name], out["where_figures"][c.name]
    if c.gp["verdict"] == stats.TOO_FEW:
        msg = f"No surrogate verdict for claim '{c.name}': too few finished universes\n(statuses: {statuses(df)})"
        plots.message_figure(msg, main_png)
        plots.message_figure(msg, where_png)
        return
    TYPES[c.type].figure(c, space, df, main_png)
    TYPES[c.type].where_figure(c, space, df, where_png)


def draw_claim_figures(result: Mapping[str, Any], space: SearchSpace, df: pd.DataFrame, metrics: Sequence[str],
                       out: Mapping[str, Any], workers: int = 1) -> None:
    """The figures that read the verdicts: each claim's two, the forest, the Sobol bars;
    each figure (group) on its own, so that the workers draw them side by side."""
    sur = result["surrogates"]
    fork_map([*(lambda c=c: claim_figures(c, space, df, out) for c in result["claims"]),
              lambda: plots.claims_forest(result["claims"], out["claims_figure"], lambda c: (
                  SPECS[c.type].statistic, SPECS[c.type].metrics(c.claim))),
              *(lambda m=m: plots.sobol_bars(result["sensitivity"][m], m, out["sobol"][m])
                for m in metrics if sur[m] is not None)], workers)
