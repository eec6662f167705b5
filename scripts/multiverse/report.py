"""The robust-claim report's numbers: surrogates per metric, claim verdicts, sensitivity
and surrogate diagnostics.

Plotting lives in :mod:`multiverse.plots` and the standalone page in
:mod:`multiverse.html`; this module only computes.

Surrogates are fitted on one row per universe: the mean over its seeds (replicates in
later rounds included) with, where any universe has two or more seeds, each mean's
observed noise as fixed ``train_Yvar`` (:func:`multiverse.design.seed_noise`), so the
GP's uncertainty has the seeds' in it. With one seed each, the GP learns the noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from multiverse import METRIC_RANGE
from multiverse import claims as C
from multiverse.config import report_metrics
from multiverse.ids import derive_seed
from multiverse.gp import MIN_FIT, fit_gp, fit_multitask_gp, influence, loo_diagnostics, noise_variance, outcome_scale
from multiverse.space import SearchSpace


#: The report's GP kernel (:data:`multiverse.gp.KERNELS`: its intervals are better calibrated).
REPORT_KERNEL = "matern"


@dataclass
class Surrogate:
    """A metric's GP and the per-universe data it was fitted on."""

    model: Any
    universes: list[dict]
    mean: np.ndarray
    #: standard deviation of one seed's outcome around its universe's mean
    noise_sd: float
    replicated: bool


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


def per_universe(df: pd.DataFrame, space: SearchSpace, metric: str) -> tuple[list[dict], np.ndarray]:
    """Universes (first row of each ``universe`` group) and an ``n x seeds`` array of
    the metric (NaN-padded; NaN also for a failed seed)."""
    groups = list(df.groupby("universe", sort=False))
    width = max(len(g) for _, g in groups)
    values = np.full((len(groups), width), np.nan)
    for i, (_, g) in enumerate(groups):
        values[i, : len(g)] = g[metric].to_numpy(dtype=float)
    return universes_of(pd.DataFrame([g.iloc[0] for _, g in groups]), space), values


def fit_surrogate(df: pd.DataFrame, space: SearchSpace, metric: str, seed: int) -> Surrogate | None:
    """A metric's GP on per-universe means (None with fewer than MIN_FIT finite ones)."""
    from multiverse.design import seed_noise

    universes, values = per_universe(df, space, metric)
    mean, yvar, _, pooled = seed_noise(values)
    if np.isfinite(mean).sum() < MIN_FIT:
        return None
    replicated = bool((np.isfinite(values).sum(1) >= 2).any())
    model = fit_gp(space, universes, mean, seed, yvar=yvar if replicated else None, kernel=REPORT_KERNEL)
    if replicated:
        noise_sd = float(np.sqrt(pooled))
    else:
        noise_sd = float(noise_variance(model).mean().sqrt()) * outcome_scale(model)
    return Surrogate(model, universes, mean, noise_sd, replicated)


def fit_surrogates(df: pd.DataFrame, space: SearchSpace, metrics: Sequence[str], seed: int) -> dict[str, Surrogate | None]:
    return {m: fit_surrogate(df, space, m, derive_seed(seed, i)) for i, m in enumerate(metrics)}


def no_surrogate(n_finite: int) -> dict[str, Any]:
    """The GP verdict when too few universes finished to fit a surrogate."""
    nan = float("nan")
    return {**C.too_few(n_finite=n_finite), "fraction_holds": nan, "fraction_holds_lo": nan, "fraction_holds_hi": nan}


def claim_metrics(claim: Mapping[str, Any]) -> list[str]:
    return [claim["x"], claim["y"]] if C.claim_type(claim) == "correlation" else [claim["metric"]]


def analyse_claim(
    claim: Mapping[str, Any], i: int, df: pd.DataFrame, space: SearchSpace, sur: Mapping[str, Surrogate | None],
    rep: Mapping[str, Any], seed: int,
) -> dict[str, Any]:
    """One claim's GP verdict, observed verdict and their judgement (trends: per condition)."""
    kind = C.claim_type(claim)
    n_ref, n_s, n_boot = rep["reference"], rep["samples"], rep["bootstrap"]
    s_gp, s_obs = derive_seed(seed, 100 + i), derive_seed(seed, 200 + i)
    metrics = claim_metrics(claim)
    models = [sur[m] for m in metrics]
    fitted = all(s is not None for s in models)
    from multiverse.design import seed_noise

    universes = per_universe(df, space, metrics[0])[0]
    means = {m: seed_noise(per_universe(df, space, m)[1])[0] for m in metrics}
    y = means[metrics[0]]
    n_finite = int(np.isfinite(y).sum())
    out: dict[str, Any] = {"type": kind}
    if kind == "comparison":
        base = reference_universes(space, n_ref, derive_seed(seed, 1), fix=claim["dimension"])
        gp = C.gp_verdict(models[0].model, space, claim, base, n_s, s_gp) if fitted else no_surrogate(n_finite)
        obs = C.observed_verdict(y, [u[claim["dimension"]] for u in universes], claim, n_boot, s_obs)
    elif kind == "trend":
        base = space.enumerated(max(4, n_ref // max(1, len(space.level_combinations()))), derive_seed(seed, 1),
                                canonical=False)
        conds = []
        for j, cond in enumerate(C.trend_conditions(space, claim)):
            g = (C.trend_gp(models[0].model, space, claim, base, n_s, derive_seed(s_gp, j), cond) if fitted
                 else no_surrogate(n_finite))
            o = C.trend_observed(space, universes, y, claim, n_boot, derive_seed(s_obs, j), cond)
            conds.append({"label": cond["label"], "gp": g, "observed": o, **C.judge(g, o)})
        gp, obs = conds[0]["gp"], conds[0]["observed"]
        out["conditions"] = conds
    elif kind == "correlation":
        base = space.sobol(n_ref, derive_seed(seed, 1))
        Y = np.c_[means[claim["x"]], means[claim["y"]]]
        joint = np.isfinite(Y).all(1).sum() >= MIN_FIT
        gp = (C.correlation_gp(fit_multitask_gp(space, universes, Y, s_gp), space, claim, base, n_s, s_gp) if joint
              else no_surrogate(n_finite))
        obs = C.correlation_observed(space, universes, means[claim["x"]], means[claim["y"]], claim, n_boot, s_obs)
    else:  # expected_best
        base = reference_universes(space, n_ref, derive_seed(seed, 1), fix=claim["dimension"])
        obs = C.expected_best_observed(y, [u[claim["dimension"]] for u in universes], claim, n_boot, s_obs)
        gp = (C.expected_best_gp(models[0].model, space, claim, base, n_s, s_gp, models[0].noise_sd, obs["budgets"],
                                 METRIC_RANGE.get(claim["metric"])) if fitted else no_surrogate(n_finite))
    out.update({"gp": gp, "observed": obs, **C.judge(gp, obs)})
    return out


def analyse(df: pd.DataFrame, config: Mapping[str, Any]) -> dict[str, Any]:
    """Verdicts for every claim, and per metric its Sobol indices and LOO diagnostics.

    Returns ``{"claims", "sensitivity", "diagnostics", "influence", "surrogates", "space"}``.
    A claim whose surrogate fits poorly (:data:`multiverse.gp.MIN_LOO_R2`,
    :data:`multiverse.gp.MIN_COVERAGE`) says so in its summary.
    """
    from multiverse.sensitivity import sobol_indices

    space = SearchSpace.from_config(config["space"])
    rep = config["report"]
    seed = derive_seed(config["seed"], 7)
    metrics = report_metrics(config)
    sur = fit_surrogates(df, space, metrics, seed)
    base_all = reference_universes(space, rep["reference"], derive_seed(seed, 1))
    infl = {m: influence(s.model, space, base_all) if s else None for m, s in sur.items()}
    diag = {m: loo_diagnostics(s.model) if s else None for m, s in sur.items()}
    sens = {m: sobol_indices(s.model, space, rep.get("sobol_points", 256), min(64, rep["samples"]),
                             derive_seed(seed, 300 + k)) if s else None for k, (m, s) in enumerate(sur.items())}
    results = []
    for i, claim in enumerate(config.get("claims", [])):
        res = analyse_claim(claim, i, df, space, sur, rep, seed)
        poor = [m for m in claim_metrics(claim) if diag[m] is not None and not diag[m]["ok"]]
        res["surrogate_ok"] = not poor
        if poor:
            res["summary"] += "; surrogate fits poorly for " + ", ".join(
                f"{m} (LOO R^2 {diag[m]['r2']:.2f}, 95% coverage {diag[m]['coverage']:.2f})" for m in poor)
        results.append({"name": claim["name"], "statement": claim.get("statement") or default_statement(claim),
                        "claim": dict(claim), **res})
    return {"claims": results, "sensitivity": sens, "diagnostics": diag, "influence": infl, "surrogates": sur,
            "space": space}


def default_statement(claim: Mapping[str, Any]) -> str:
    kind = C.claim_type(claim)
    if kind == "trend":
        return f"{claim['metric']} is {claim['direction']} in {claim['dimension']}"
    if kind == "correlation":
        return f"{claim['x']} and {claim['y']} are {claim['relation']}ly correlated across universes"
    a, b = "/".join(map(str, claim["a"])), "/".join(map(str, claim["b"]))
    if kind == "expected_best":
        return f"expected best {claim['metric']} of {a} {claim['relation']} {b} at every budget >= {claim.get('min_budget', 1)}"
    return f"{claim['metric']} of {claim['dimension']} {a} {claim['relation']} {b}"


STATISTIC = {
    "comparison": "difference of means, a - b",
    "trend": "slope: change across the dimension's range",
    "correlation": "Kendall tau",
    "expected_best": "expected-best difference a - b at the least favourable budget",
}


def fmt(x: Mapping[str, Any]) -> str:
    if not np.isfinite(x.get("effect", np.nan)):
        return "n/a"
    return f"{x['effect']:+.3f} [{x['effect_lo']:+.3f}, {x['effect_hi']:+.3f}]"


def claims_table(claims: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The summary table: one row per claim (and per condition of a trend), every
    estimate with its 95% interval."""

    def row(c: Mapping[str, Any], label: str, g: Mapping[str, Any], o: Mapping[str, Any], summary: str) -> dict:
        share = (f"{g['fraction_holds']:.2f} [{g['fraction_holds_lo']:.2f}, {g['fraction_holds_hi']:.2f}]"
                 if np.isfinite(g.get("fraction_holds", np.nan)) else "n/a")
        gp_est = fmt(g)
        obs_est = fmt(o)
        if c["type"] == "correlation" and "granulated" in g:
            gp_est += f"; granulated {fmt(g['granulated'])}"
        if c["type"] == "correlation" and np.isfinite(o.get("granulated_matched", np.nan)):
            obs_est += (f"; granulated ({o['granulated_matched_groups']} matched groups) {o['granulated_matched']:+.3f} "
                        f"[{o['granulated_matched_lo']:+.3f}, {o['granulated_matched_hi']:+.3f}]")
        return {
            "claim": c["statement"] + ("" if label == "marginal" else f" ({label})"),
            "type": c["type"],
            "statistic": STATISTIC[c["type"]],
            "verdict": summary,
            "GP P(holds)": round(g["p_holds"], 3) if np.isfinite(g["p_holds"]) else np.nan,
            "GP estimate [95% CrI]": gp_est,
            "GP share of multiverse where it holds [95% CrI]": share,
            "observed P(holds), bootstrap": round(o["p_holds"], 3) if np.isfinite(o["p_holds"]) else np.nan,
            "observed estimate [95% CI]": obs_est,
            "where it flips": (g.get("regions") or {}).get("text", ""),
        }

    rows = []
    for c in claims:
        rows.append(row(c, "marginal", c["gp"], c["observed"], c["summary"]))
        for cond in c.get("conditions", [])[1:]:
            rows.append(row(c, cond["label"], cond["gp"], cond["observed"], cond["summary"]))
    return pd.DataFrame(rows)


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


def top_numeric(space: SearchSpace, infl: Mapping[str, float], k: int = 2, exclude: Sequence[str] = ()) -> list[str]:
    """The ``k`` most influential numeric, unconditional dimensions (for 2-D maps)."""
    numeric = [d.name for d in space.numeric if d.name not in exclude and d.when is None]
    return sorted(numeric, key=lambda n: -infl[n])[:k]


def to_jsonable(x: Any) -> Any:
    """Replace non-finite floats by None so ``claims.json`` is strict JSON."""
    if isinstance(x, dict):
        return {k: to_jsonable(v) for k, v in x.items() if not callable(v)}
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


def build_report(table_path: str, config: Mapping[str, Any], out: Mapping[str, Any]) -> dict[str, Any]:
    """Compute the verdicts, draw every figure and write the tables and the standalone page.

    ``out`` holds the output paths: ``claims_json``, ``claims_csv``, ``claims_figure``,
    ``outcomes``, ``html``, and lists in metric order (``maps``, ``curves``, ``sobol``,
    ``loo``) and in claim order (``claim_figures``, ``where_figures``).
    """
    from multiverse import html, plots
    from multiverse.runtime import atomic_write, write_json

    df = pd.read_parquet(table_path)
    result = analyse(df, config)
    space, sur = result["space"], result["surrogates"]
    metrics = report_metrics(config)
    write_json(out["claims_json"], to_jsonable({
        "claims": result["claims"],
        "sensitivity": result["sensitivity"],
        "diagnostics": {m: ({k: v for k, v in d.items()} if d else None) for m, d in result["diagnostics"].items()},
        "influence": result["influence"],
        "n_universes": int(df["universe"].nunique()),
        "n_runs": int(len(df)),
        "status_counts": df["status"].value_counts().to_dict(),
        "thresholds": {"holds": "P(holds) >= 0.95", "fails": "P(holds) <= 0.05"},
    }))
    tables = {"claims": claims_table(result["claims"]), "sensitivity": sensitivity_table(result["sensitivity"]),
              "diagnostics": diagnostics_table(result["diagnostics"])}
    atomic_write(out["claims_csv"], lambda tmp: tables["claims"].to_csv(tmp, index=False))
    plots.claims_forest(result["claims"], out["claims_figure"])
    plots.outcomes_vs_dimensions(df, space, metrics, out["outcomes"])
    base = reference_universes(space, max(4, config["report"]["reference"] // 8), derive_seed(config["seed"], 8))
    status = df["status"].value_counts().to_dict()
    for m, map_png, curve_png, sobol_png, loo_png in zip(metrics, out["maps"], out["curves"], out["sobol"], out["loo"]):
        if sur[m] is None:
            msg = f"No surrogate for {m}: fewer than {MIN_FIT} universes have a finite value\n(statuses: {status})"
            for p in (map_png, curve_png, sobol_png, loo_png):
                plots.message_figure(msg, p)
            continue
        dims = top_numeric(space, result["influence"][m])
        plots.posterior_map(sur[m].model, space, df, m, dims, base, map_png)
        plots.specification_curve(sur[m].model, space, df, m, curve_png)
        plots.sobol_bars(result["sensitivity"][m], m, sobol_png)
        plots.loo_calibration(result["diagnostics"][m], m, loo_png)
    for c, main_png, where_png in zip(result["claims"], out["claim_figures"], out["where_figures"]):
        ms = claim_metrics(c["claim"])
        if any(sur[m] is None for m in ms) or c["gp"]["verdict"] == C.TOO_FEW:
            msg = f"No surrogate verdict for claim '{c['name']}': too few finished universes\n(statuses: {status})"
            plots.message_figure(msg, main_png)
            plots.message_figure(msg, where_png)
            continue
        plots.claim_figure(c, space, df, sur, result["influence"], base, main_png)
        plots.where_figure(c, space, df, sur, result["influence"], base, where_png)
    html.write_report(out["html"], config, df, result, tables, out)
    return result
