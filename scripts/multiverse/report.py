"""Rule report: the verdicts (claims.json, claims.csv), every figure and the standalone
page report.html, from the study's table (:func:`build_report`); and the Markdown
tables docs/case_studies.md shows (:func:`markdown_claims`, :func:`markdown_sensitivity`).

It computes with :mod:`multiverse.report_analysis`, draws with
:mod:`multiverse.report_figures` and writes the page with :mod:`multiverse.html`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from multiverse import html
from multiverse.claims.contract import ClaimResult
from multiverse.ids import derive_seed
from multiverse.report_analysis import (
    analyse,
    claims_table,
    diagnostics_table,
    fmt,
    headline,
    sensitivity_table,
)
from multiverse.report_figures import draw_claim_figures, figures_beside_analysis
from multiverse.runtime import atomic_write, write_json
from multiverse.space import SearchSpace
from multiverse.spec import report_metrics


def to_jsonable(x: Any) -> Any:
    """Replace non-finite floats by None so ``claims.json`` is strict JSON."""
    if isinstance(x, dict):
        return {k: to_jsonable(v) for k, v in x.items() if not callable(v) and not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    return x


def build_report(table_path: str, config: Mapping[str, Any], out: Mapping[str, Any], workers: int = 1) -> dict[str, Any]:
    """Compute the verdicts, draw every figure and write the tables and the standalone page.

    ``out`` holds the output paths: ``claims_json``, ``claims_csv``, ``claims_figure``,
    ``outcomes``, ``html``, and per metric (``maps``, ``curves``, ``sobol``, ``loo``:
    ``{metric: path}``) and per claim (``claim_figures``, ``where_figures``:
    ``{claim name: path}``). ``workers``: the analysis's tasks (:func:`analyse`) and the
    figures run that many at a time in forked processes, each figure as one process
    would draw it.
    """
    df = pd.read_parquet(table_path)
    metrics = report_metrics(config)
    space = SearchSpace.from_config(config["space"])
    base = space.enumerated(max(4, config["report"]["reference"] // 8), derive_seed(config["seed"], 8))

    alongside = partial(figures_beside_analysis, df, space, metrics, base, out, claims=config.get("claims", []))
    result = analyse(df, config, workers=workers, alongside=alongside)
    for c in result["claims"]:
        c.headline = headline(c)
    write_json(out["claims_json"], to_jsonable({
        "claims": [c.to_dict() for c in result["claims"]],
        "sensitivity": result["sensitivity"],
        "diagnostics": result["diagnostics"],
        "influence": result["influence"],
        "divergence": result["divergence"],
        "n_universes": int(df["universe"].nunique()),
        "n_runs": int(len(df)),
        "status_counts": df["status"].value_counts().to_dict(),
        "thresholds": {"holds": "P(holds) >= 0.95", "fails": "P(holds) <= 0.05",
                       "equivalent": "P(|effect| < margin) >= 0.95"},
    }))
    tables = {"claims": claims_table(result["claims"]), "sensitivity": sensitivity_table(result["sensitivity"]),
              "diagnostics": diagnostics_table(result["diagnostics"])}
    atomic_write(out["claims_csv"], lambda tmp: tables["claims"].to_csv(tmp, index=False))
    draw_claim_figures(result, space, df, metrics, out, workers)
    html.write_report(out["html"], config, df, result, tables, out)
    return result


# --- docs/case_studies.md's tables ----------------------------------------------------------
def markdown_claims(claims: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of a study's claims (from ``claims.json``): the headline's badge,
    the GP's P(holds) and estimate, the share where it holds, the observed estimate and
    where it holds, fails or is uncertain, trend conditions as their own rows."""

    def num(x: Any) -> str:
        return "n/a" if x is None or not np.isfinite(x) else f"{x:.2f}"

    def est(x: Mapping[str, Any]) -> str:
        clean = {k: (np.nan if v is None else v) for k, v in x.items() if k.startswith("effect")}
        return fmt(clean) if clean else "n/a"

    lines = ["| claim | verdict | design-based estimate [95% CI] | GP estimate [95% CrI] | GP P(holds) | "
             "share where it holds [surely, possibly] (GP) | observed estimate [95% CI] | "
             "where it holds, fails or is uncertain (GP) |",
             "|---|---|---|---|---|---|---|---|"]
    for c in map(ClaimResult.from_dict, claims):
        for r in c.readings:
            g, o = r.gp, r.observed
            share = ("" if g.get("fraction_holds") is None else
                     f"{g['fraction_holds']:.2f} [{g['fraction_holds_lo']:.2f}, {g['fraction_holds_hi']:.2f}]")
            name = c.statement if r.label == "marginal" else f"... {r.label}"
            verdict = (f"**{c.headline['badge']}**: " if r.label == "marginal" else "") + r.summary.replace("|", "/")
            p = num(g.get("p_holds"))
            if r.label == "marginal" and (c.family or {}).get("conditions", 0) > 1:
                p += f" (every condition: {num(c.family['p_all'])})"
            where = ((g.get("regions") or {}).get("text") or "").replace("|", "/")
            lines.append(f"| {name} | {verdict} | {est(r.design or {})} | {est(g)} | {p} | {share} | {est(o)} | "
                         f"{where} |")
    return "\n".join(lines)


def markdown_sensitivity(sensitivity: Mapping[str, Any], metric: str) -> str:
    """One sentence of a metric's total- and first-order Sobol indices with 95% CrIs."""
    s = sensitivity.get(metric)
    if not s:
        return f"No surrogate for {metric}."
    order = sorted(s, key=lambda d: -s[d]["total"])
    total = ", ".join(f"{d} {s[d]['total']:.2f} [{s[d]['total_lo']:.2f}, {s[d]['total_hi']:.2f}]" for d in order)
    first = ", ".join(f"{d} {s[d]['first']:.2f} [{s[d]['first_lo']:.2f}, {s[d]['first_hi']:.2f}]" for d in order)
    return f"Sobol indices of {metric} (95% CrI): total-order {total}; first-order {first}."
