"""The robust-claim report's numbers: surrogates per metric, claim verdicts, influence.

Plotting lives in :mod:`multiverse.plots`; this module only computes.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from multiverse.claims import TOO_FEW, gp_verdict, judge, observed_verdict
from multiverse.config import derive_seed, report_metrics
from multiverse.gp import MIN_FIT, fit_gp, influence
from multiverse.space import SearchSpace


def reference_universes(space: SearchSpace, n: int, seed: int, fix: str | None = None) -> list[dict]:
    """A Sobol reference set over the space; with ``fix``, that dimension is held at its
    first level (callers overwrite it), so no point is repeated."""
    ref = space.enumerated(n, seed, canonical=fix is None)
    if fix is not None:
        first = space[fix].choices[0]
        ref = [u for u in ref if u[fix] == first]
    return ref


def universes_of(df: pd.DataFrame, space: SearchSpace) -> list[dict]:
    return [space.universe(row) for row in df[space.names].to_dict("records")]


def fit_surrogates(df: pd.DataFrame, space: SearchSpace, metrics: Sequence[str], seed: int) -> dict[str, Any]:
    """One fitted GP per metric on every universe with a finite value (None with fewer than MIN_FIT)."""
    universes = universes_of(df, space)
    out = {}
    for i, m in enumerate(metrics):
        y = df[m].to_numpy(dtype=float)
        out[m] = fit_gp(space, universes, y, derive_seed(seed, i)) if np.isfinite(y).sum() >= MIN_FIT else None
    return out


def no_surrogate(n_finite: int) -> dict[str, Any]:
    """The GP verdict when too few universes finished to fit a surrogate."""
    nan = float("nan")
    return {"effect": nan, "effect_lo": nan, "effect_hi": nan, "p_holds": nan, "verdict": TOO_FEW,
            "fraction_holds": nan, "fraction_holds_lo": nan, "fraction_holds_hi": nan, "n_finite": n_finite}


def analyse(df: pd.DataFrame, config: Mapping[str, Any]) -> dict[str, Any]:
    """Verdicts for every claim, and the influence of each dimension on each metric.

    Returns ``{"claims": [...], "influence": {metric: {dim: var}}, "surrogates": {metric: GP}}``.
    """
    space = SearchSpace.from_config(config["space"])
    rep = config["report"]
    seed = derive_seed(config["seed"], 7)
    metrics = report_metrics(config)
    models = fit_surrogates(df, space, metrics, seed)
    base_all = reference_universes(space, rep["reference"], derive_seed(seed, 1))
    infl = {m: influence(models[m], space, base_all) if models[m] is not None else None for m in metrics}
    claims = []
    for i, claim in enumerate(config.get("claims", [])):
        base = reference_universes(space, rep["reference"], derive_seed(seed, 1), fix=claim["dimension"])
        model = models[claim["metric"]]
        gp = (
            gp_verdict(model, space, claim, base, rep["samples"], derive_seed(seed, 100 + i))
            if model is not None
            else no_surrogate(int(np.isfinite(df[claim["metric"]].to_numpy(dtype=float)).sum()))
        )
        # one value per universe (its seeds averaged): replicates are not independent universes
        per_universe = df.groupby("universe", sort=False).agg({claim["metric"]: "mean", claim["dimension"]: "first"})
        obs = observed_verdict(
            per_universe[claim["metric"]].to_numpy(dtype=float), per_universe[claim["dimension"]].tolist(),
            claim, rep["bootstrap"], derive_seed(seed, 200 + i),
        )
        claims.append({
            "name": claim["name"],
            "statement": claim.get("statement") or default_statement(claim),
            "claim": dict(claim),
            "gp": gp,
            "observed": obs,
            **judge(gp, obs),
        })
    return {"claims": claims, "influence": infl, "surrogates": models, "space": space}


def default_statement(claim: Mapping[str, Any]) -> str:
    a, b = "/".join(claim["a"]), "/".join(claim["b"])
    return f"{claim['metric']} of {claim['dimension']} {a} {claim['relation']} {b}"


def claims_table(claims: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The summary table: one row per claim, every estimate with its 95% interval."""

    def fmt(x: Mapping[str, Any]) -> str:
        return f"{x['effect']:+.3f} [{x['effect_lo']:+.3f}, {x['effect_hi']:+.3f}]"

    rows = []
    for c in claims:
        g, o = c["gp"], c["observed"]
        rows.append({
            "claim": c["statement"],
            "verdict": c["summary"],
            "GP P(holds)": round(g["p_holds"], 3),
            "GP effect [95% CrI]": fmt(g),
            "GP share of multiverse where it holds [95% CrI]":
                f"{g['fraction_holds']:.2f} [{g['fraction_holds_lo']:.2f}, {g['fraction_holds_hi']:.2f}]",
            "observed P(holds), bootstrap": round(o["p_holds"], 3),
            "observed effect [95% CI]": fmt(o),
            "universes (a / b)": f"{o['n_a']} / {o['n_b']}",
        })
    return pd.DataFrame(rows)


def top_numeric(space: SearchSpace, infl: Mapping[str, float], k: int = 2) -> list[str]:
    """The ``k`` most influential numeric dimensions (for the 2-D posterior map)."""
    numeric = [d.name for d in space.numeric]
    return sorted(numeric, key=lambda n: -infl[n])[:k]


def to_jsonable(x: Any) -> Any:
    """Replace non-finite floats by None so ``claims.json`` is strict JSON."""
    if isinstance(x, dict):
        return {k: to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def build_report(
    table_path: str, config: Mapping[str, Any], claims_json: str, claims_csv: str, claims_png: str,
    outcomes_png: str, map_pngs: Sequence[str], curve_pngs: Sequence[str],
) -> dict[str, Any]:
    """Compute the verdicts and draw every figure of the report (paths in metric order)."""

    from multiverse import plots
    from multiverse.runtime import atomic_write, write_json

    df = pd.read_parquet(table_path)
    result = analyse(df, config)
    space, models = result["space"], result["surrogates"]
    metrics = report_metrics(config)
    write_json(claims_json, to_jsonable({
        "claims": result["claims"],
        "influence": result["influence"],
        "n_universes": int(len(df)),
        "status_counts": df["status"].value_counts().to_dict(),
        "thresholds": {"holds": "P(holds) >= 0.95", "fails": "P(holds) <= 0.05"},
    }))
    atomic_write(claims_csv, lambda tmp: claims_table(result["claims"]).to_csv(tmp, index=False))
    plots.claims_forest(result["claims"], claims_png)
    plots.outcomes_vs_dimensions(df, space, metrics, outcomes_png)
    base = reference_universes(space, max(4, config["report"]["reference"] // 8), derive_seed(config["seed"], 8))
    for m, map_png, curve_png in zip(metrics, map_pngs, curve_pngs):
        if models[m] is None:
            msg = f"No surrogate for {m}: fewer than {MIN_FIT} universes have a finite value\n" \
                  f"(statuses: {df['status'].value_counts().to_dict()})"
            plots.message_figure(msg, map_png)
            plots.message_figure(msg, curve_png)
            continue
        dims = top_numeric(space, result["influence"][m])
        plots.posterior_map(models[m], space, df, m, dims, base, map_png)
        plots.specification_curve(models[m], space, df, m, curve_png)
    return result
