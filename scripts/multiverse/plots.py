"""The report's seaborn figures. Each function draws one figure and saves it to ``path``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from multiverse.gp import dimension_grid, features, noise_variance, outcome_scale, posterior_mean_std  # noqa: E402
from multiverse.space import SearchSpace  # noqa: E402

LABELS = {
    "train_acc": "train accuracy", "val_acc": "validation accuracy", "test_acc": "test accuracy",
    "train_loss": "train loss", "val_loss": "validation loss", "test_loss": "test loss",
    "gap": "generalisation gap (train - test acc.)",
    "lr": "learning rate", "weight_decay": "weight decay", "batch_size": "batch size",
}


def label(name: str) -> str:
    return LABELS.get(name, name.replace("_", " "))


def _hue(space: SearchSpace) -> str | None:
    return space.categorical[0].name if space.categorical else None


def _hue_order(space: SearchSpace) -> list | None:
    return list(space.categorical[0].choices) if space.categorical else None


def _log_axis(ax, dim, axis: str = "x") -> None:
    """Log scale; an integer dimension gets plain ticks at powers of two."""
    if not dim.log:
        return
    getattr(ax, f"set_{axis}scale")("log")
    if dim.kind == "int":
        ticks = [2**k for k in range(int(np.ceil(np.log2(dim.low))), int(np.floor(np.log2(dim.high))) + 1)]
        a = getattr(ax, f"{axis}axis")
        a.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
        a.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        a.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _save(fig, path: str) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def message_figure(message: str, path: str) -> None:
    """A figure that says why the plot it stands for could not be drawn."""
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    _save(fig, path)


def outcomes_vs_dimensions(df: pd.DataFrame, space: SearchSpace, metrics: Sequence[str], path: str) -> None:
    """A grid: one row per metric, one column per dimension, one point per universe."""
    sns.set_theme(style="whitegrid", context="paper")
    hue = _hue(space)
    fig, axes = plt.subplots(
        len(metrics), len(space.dimensions), figsize=(3.2 * len(space.dimensions), 2.8 * len(metrics)),
        squeeze=False,
    )
    data = df.assign(status=df["status"].fillna("ok"))
    for i, m in enumerate(metrics):
        for j, d in enumerate(space.dimensions):
            ax = axes[i, j]
            if d.is_categorical:
                sns.stripplot(data=data, x=d.name, y=m, hue=d.name, order=list(d.choices), ax=ax,
                              hue_order=list(d.choices), legend=False, size=5, jitter=0.2)
            else:
                sns.scatterplot(data=data, x=d.name, y=m, hue=hue, hue_order=_hue_order(space), style="status",
                                ax=ax, legend=(i == 0 and j == len(space.dimensions) - 1), s=30)
                _log_axis(ax, d)
            ax.set_xlabel(label(d.name))
            ax.set_ylabel(label(m) if j == 0 else "")
    if axes[0, -1].get_legend() is not None:
        sns.move_legend(axes[0, -1], "upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle("Each outcome against each choice (one point per universe)")
    fig.tight_layout()
    _save(fig, path)


def posterior_map(
    model, space: SearchSpace, df: pd.DataFrame, metric: str, dims: Sequence[str],
    base: Sequence[Mapping[str, Any]], path: str, n: int = 25,
) -> None:
    """Posterior mean and standard deviation over two dimensions, averaged over the others,
    with the observed universes drawn on top in the same colour scale."""
    sns.set_theme(style="white", context="paper")
    dx, dy = (space[d] for d in dims)
    gx, gy = dimension_grid(space, dx.name, n), dimension_grid(space, dy.name, n)
    grid = [{**u, dx.name: x, dy.name: y} for y in gy for x in gx for u in base]
    mean, std = posterior_mean_std(model, features(space, grid, model))
    shape = (len(gy), len(gx), len(base))
    mean, std = mean.reshape(shape).mean(-1), std.reshape(shape).mean(-1)
    vals = df[metric].to_numpy(dtype=float)
    lo, hi = np.nanmin([mean.min(), np.nanmin(vals)]), np.nanmax([mean.max(), np.nanmax(vals)])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"wspace": 0.35})
    for ax, z, title, cmap in ((axes[0], mean, "posterior mean", "viridis"), (axes[1], std, "posterior sd", "magma")):
        cs = ax.contourf(gx, gy, z, levels=20, cmap=cmap, vmin=lo if z is mean else None, vmax=hi if z is mean else None)
        fig.colorbar(cs, ax=ax, label=f"{label(metric)}: {title}")
        sns.scatterplot(
            data=df, x=dx.name, y=dy.name, hue=metric if z is mean else None, palette="viridis" if z is mean else None,
            hue_norm=(lo, hi) if z is mean else None, style=_hue(space), style_order=_hue_order(space), s=45, ax=ax,
            edgecolor="white" if z is mean else "black", legend=z is std, color="white" if z is std else None,
        )
        _log_axis(ax, dx, "x")
        _log_axis(ax, dy, "y")
        ax.set_xlabel(label(dx.name))
        ax.set_ylabel(label(dy.name))
        ax.set_title(f"GP {title} of {label(metric)}\n(averaged over the other choices)")
    if axes[1].get_legend() is not None:
        sns.move_legend(axes[1], "upper left", bbox_to_anchor=(1.3, 1), title="universes")
    _save(fig, path)


def specification_curve(model, space: SearchSpace, df: pd.DataFrame, metric: str, path: str) -> None:
    """Universes ranked by the metric (top) and the choices each one made (bottom)."""
    sns.set_theme(style="whitegrid", context="paper")
    d = df[np.isfinite(df[metric].to_numpy(dtype=float))].sort_values(metric).reset_index(drop=True)
    from multiverse.report import universes_of

    mean, std = posterior_mean_std(model, features(space, universes_of(d, space), model))
    noise_sd = float(noise_variance(model).mean().sqrt()) * outcome_scale(model)
    pred_sd = np.sqrt(std**2 + noise_sd**2)
    rows: list[tuple[str, np.ndarray]] = []
    for dim in space.dimensions:
        if dim.is_categorical:
            rows += [(f"{dim.name} = {c}", (d[dim.name] == c).to_numpy()) for c in dim.choices]
        else:
            u = dim.to_unit(d[dim.name].to_numpy(dtype=float))  # NaN where the dimension is inactive
            bins = np.where(np.isfinite(u), np.minimum(np.nan_to_num(u) * 3, 2), -1).astype(int)
            rows += [(f"{dim.name}: {t} third", bins == k) for k, t in enumerate(("low", "mid", "high"))]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(max(7, 0.14 * len(d) + 3), 3 + 0.22 * len(rows)), sharex=True,
        gridspec_kw={"height_ratios": [3, 0.22 * len(rows)]},
    )
    x = np.arange(len(d))
    top.fill_between(x, mean - 1.96 * pred_sd, mean + 1.96 * pred_sd, color="C0", alpha=0.2,
                     label="GP 95% predictive interval")
    hue = _hue(space)
    sns.scatterplot(x=x, y=d[metric], hue=d[hue] if hue else None, hue_order=_hue_order(space), ax=top, s=28, zorder=3)
    top.set_ylabel(label(metric))
    top.set_title(f"Specification curve: {label(metric)} of every universe, ranked")
    top.legend(loc="upper left", fontsize=7)
    for r, (_, mask) in enumerate(rows):
        bottom.scatter(x[mask], np.full(mask.sum(), r), s=12, color="k", marker="s")
    bottom.set_yticks(range(len(rows)), [name for name, _ in rows], fontsize=7)
    bottom.set_ylim(len(rows) - 0.5, -0.5)
    bottom.set_xlabel("universe rank")
    _save(fig, path)


def claims_forest(claims: Sequence[Mapping[str, Any]], path: str) -> None:
    """Each claim's effect with its 95% interval: GP (credible) and observed (bootstrap).

    One panel per claim, each on its own scale since claims compare different metrics.
    """
    sns.set_theme(style="whitegrid", context="paper")
    n = max(1, len(claims))
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.6 * n + 0.6), squeeze=False)
    for ax, c in zip(axes[:, 0], claims):
        for k, (src, key) in enumerate((("GP surrogate (95% CrI)", "gp"), ("observed universes (95% bootstrap CI)", "observed"))):
            e = c[key]
            if not np.isfinite(e["effect"]):
                continue
            ax.errorbar([e["effect"]], [k], xerr=[[e["effect"] - e["effect_lo"]], [e["effect_hi"] - e["effect"]]],
                        fmt="o", capsize=4, color=f"C{k}", label=src)
            ax.annotate(f"P(holds) = {e['p_holds']:.2f}", (e["effect"], k), textcoords="offset points",
                        xytext=(6, 5), fontsize=7)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks([0, 1], ["GP", "observed"])
        ax.set_ylim(1.6, -0.6)
        from multiverse.report import STATISTIC, claim_metrics

        ms = " vs ".join(claim_metrics(c["claim"]))
        ax.set_title(f"{c['statement']}  [{ms}]: {c['summary']}", fontsize=8)
        ax.set_xlabel(f"{STATISTIC[c['type']]} ({ms})")
    fig.suptitle("Claims: GP verdict beside the observed universes, 95% intervals", y=1.0)
    fig.tight_layout()
    _save(fig, path)


def _errorbars(ax, x, mean, lo, hi, **kw) -> None:
    mean, lo, hi = (np.asarray(v, dtype=float) for v in (mean, lo, hi))
    ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], fmt="o", capsize=3, **kw)


def sobol_bars(sens: Mapping[str, Mapping[str, float]], metric: str, path: str) -> None:
    """First- and total-order Sobol indices of each choice, with 95% credible intervals."""
    sns.set_theme(style="whitegrid", context="paper")
    rows = [{"choice": label(d), "order": order, "index": v[key], "lo": v[f"{key}_lo"], "hi": v[f"{key}_hi"]}
            for d, v in sens.items() for order, key in (("first order", "first"), ("total order", "total"))]
    data = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(1.3 * len(sens) + 3, 3.4))
    sns.barplot(data=data, x="choice", y="index", hue="order", ax=ax, errorbar=None)
    for k, order in enumerate(("first order", "total order")):
        d = data[data["order"] == order]
        offs = np.arange(len(d)) + (k - 0.5) * 0.4
        _errorbars(ax, offs, d["index"], d["lo"], d["hi"], color="k", ms=0, lw=1)
    ax.set_ylabel("Sobol index (share of variance)")
    ax.set_xlabel("")
    ax.set_ylim(min(0.0, data["lo"].min() - 0.02), max(1.0, data["hi"].max() + 0.02))
    ax.set_title(f"Which choices matter for {label(metric)}: Sobol indices of the GP surrogate\n"
                 "(bars: posterior mean; lines: 95% credible intervals)")
    _save(fig, path)


def loo_calibration(diag: Mapping[str, Any], metric: str, path: str) -> None:
    """Leave-one-out predictions against the observed values, with 95% intervals, and
    the standardised residuals against a standard normal."""
    sns.set_theme(style="whitegrid", context="paper")
    y, mu, sd = (np.asarray(diag[k], dtype=float) for k in ("observed", "predicted", "predicted_sd"))
    covered = np.abs(y - mu) <= 1.96 * sd
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for ok, colour, name in ((True, "C0", "inside its 95% interval"), (False, "C3", "outside")):
        m = covered == ok
        a.errorbar(y[m], mu[m], yerr=1.96 * sd[m], fmt="o", ms=4, capsize=2, color=colour, label=name, alpha=0.8)
    lims = [np.nanmin([y.min(), (mu - 1.96 * sd).min()]), np.nanmax([y.max(), (mu + 1.96 * sd).max()])]
    a.plot(lims, lims, "k--", lw=0.8, label="perfect prediction")
    a.set_xlabel(f"observed {label(metric)}")
    a.set_ylabel(f"LOO predicted {label(metric)} (95% interval)")
    a.legend(fontsize=7)
    a.set_title(f"Leave-one-out (n={diag['n']}, 95% intervals in brackets):\nRMSE {diag['rmse']:.3g} "
                f"[{diag['rmse_lo']:.3g}, {diag['rmse_hi']:.3g}], R$^2$ {diag['r2']:.2f} [{diag['r2_lo']:.2f}, "
                f"{diag['r2_hi']:.2f}], coverage {diag['coverage']:.2f} [{diag['coverage_lo']:.2f}, "
                f"{diag['coverage_hi']:.2f}]" + ("" if diag["ok"] else "\nPOOR FIT: verdicts flagged"), fontsize=8)
    z = (y - mu) / np.where(sd > 0, sd, np.nan)
    sns.histplot(z, stat="density", ax=b, bins=min(20, max(5, len(z) // 3)), label="universes")
    g = np.linspace(-4, 4, 200)
    b.plot(g, np.exp(-g**2 / 2) / np.sqrt(2 * np.pi), "k", label="standard normal")
    b.set_xlabel("standardised LOO residual (observed - predicted) / sd")
    b.set_ylabel("density")
    b.legend(fontsize=7)
    b.set_title("Calibration: residuals should look standard normal")
    _save(fig, path)


def _band(ax, x, samples, colour, name) -> None:
    lo, hi = np.quantile(samples, [0.025, 0.975], axis=0)
    ax.fill_between(x, lo, hi, color=colour, alpha=0.25)
    ax.plot(x, samples.mean(0), color=colour, label=f"{name} (GP mean, 95% band)")


def _groups(claim: Mapping[str, Any]) -> list[tuple[str, list]]:
    return [("/".join(map(str, claim["a"])), list(claim["a"])), ("/".join(map(str, claim["b"])), list(claim["b"]))]


def claim_figure(c: Mapping[str, Any], space: SearchSpace, df: pd.DataFrame, sur: Mapping[str, Any],
                 infl: Mapping[str, Any], base: Sequence[Mapping[str, Any]], path: str) -> None:
    """The figure behind a claim's verdict: partial dependence with bands (comparison,
    trend), the universes' scatter (correlation) or expected-best curves."""
    from multiverse.claims import claim_type

    sns.set_theme(style="whitegrid", context="paper")
    kind = claim_type(c["claim"])
    {"comparison": _comparison_pd, "trend": _trend_pd, "correlation": _correlation_scatter,
     "expected_best": _expected_best_curves}[kind](c, space, df, sur, base, path)


def _title(fig, c: Mapping[str, Any], what: str) -> None:
    fig.suptitle(f"{c['statement']}: {what}\nverdict: {c['summary']}", fontsize=9)


def _comparison_pd(c, space, df, sur, base, path, n: int = 15) -> None:
    from multiverse.claims import joint_samples

    claim, model = c["claim"], sur[c["claim"]["metric"]].model
    dims = [d for d in space.numeric if d.when is None][:4]
    fig, axes = plt.subplots(1, max(1, len(dims)), figsize=(4.2 * max(1, len(dims)), 3.6), squeeze=False)
    sub = list(base[:32])
    for ax, d in zip(axes[0], dims):
        grid = dimension_grid(space, d.name, n)
        for k, (name, levels) in enumerate(_groups(claim)):
            pts = [{**u, d.name: v, claim["dimension"]: lv} for v in grid for lv in levels for u in sub]
            f = joint_samples(model, space, pts, 128, 11 + k).reshape(128, len(grid), -1).mean(-1)
            _band(ax, grid, f, f"C{k}", name)
            obs = df[df[claim["dimension"]].isin(levels)]
            ax.scatter(obs[d.name], obs[claim["metric"]], s=14, color=f"C{k}", edgecolor="k", lw=0.3,
                       label=f"{name} universes")
        _log_axis(ax, d)
        ax.set_xlabel(label(d.name))
        ax.set_ylabel(label(claim["metric"]))
    axes[0, 0].legend(fontsize=7)
    _title(fig, c, "partial dependence of each group along each choice (averaged over the others)")
    fig.tight_layout()
    _save(fig, path)


def _trend_pd(c, space, df, sur, base, path) -> None:
    claim = c["claim"]
    d = space[claim["dimension"]]
    conds = c["conditions"]
    fig, axes = plt.subplots(1, len(conds), figsize=(4.2 * len(conds), 3.6), squeeze=False, sharey=True)
    for ax, cond in zip(axes[0], conds):
        g = cond["gp"]
        if "curve" in g:
            cur = g["curve"]
            ax.fill_between(cur["values"], cur["lo"], cur["hi"], color="C0", alpha=0.25)
            ax.plot(cur["values"], cur["mean"], color="C0", label="GP partial dependence (95% band)")
        if cond["label"] == "marginal":
            ax.scatter(df[d.name], df[claim["metric"]], s=12, color="C1", edgecolor="k", lw=0.3, label="universes")
        _log_axis(ax, d)
        ax.set_xlabel(label(d.name))
        ax.set_ylabel(label(claim["metric"]))
        est = f"slope {g['effect']:+.3g} [{g['effect_lo']:+.3g}, {g['effect_hi']:+.3g}]" if np.isfinite(g["effect"]) else "n/a"
        ax.set_title(f"{cond['label']}\n{est}, P(holds) {g['p_holds']:.2f}", fontsize=8)
    axes[0, 0].legend(fontsize=7)
    _title(fig, c, f"partial dependence of {label(claim['metric'])} on {label(d.name)}")
    fig.tight_layout()
    _save(fig, path)


def _correlation_scatter(c, space, df, sur, base, path) -> None:
    claim = c["claim"]
    x, y = claim["x"], claim["y"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    hue = _hue(space)
    sns.scatterplot(data=df, x=x, y=y, hue=hue, hue_order=_hue_order(space), ax=a, s=30)
    o = c["observed"]
    a.set_title(f"observed universes: Kendall tau {o['effect']:+.2f} [{o['effect_lo']:+.2f}, {o['effect_hi']:+.2f}]"
                if np.isfinite(o["effect"]) else "observed universes", fontsize=8)
    a.set_xlabel(label(x))
    a.set_ylabel(label(y))
    mx, _ = posterior_mean_std(sur[x].model, features(space, base, sur[x].model))
    my, _ = posterior_mean_std(sur[y].model, features(space, base, sur[y].model))
    b.scatter(mx, my, s=10, alpha=0.6, color="C2", label="reference universes (GP means)")
    g = c["gp"]
    b.set_title(f"GP surrogate: tau {g['effect']:+.2f} [{g['effect_lo']:+.2f}, {g['effect_hi']:+.2f}]", fontsize=8)
    b.set_xlabel(f"{label(x)} (GP mean)")
    b.set_ylabel(f"{label(y)} (GP mean)")
    b.legend(fontsize=7)
    _title(fig, c, "does one metric predict the other across the multiverse?")
    fig.tight_layout()
    _save(fig, path)


def _expected_best_curves(c, space, df, sur, base, path) -> None:
    claim = c["claim"]
    fig, ax = plt.subplots(figsize=(7, 4))
    ks = c["observed"]["budgets"]
    for k, (name, _) in enumerate(_groups(claim)):
        key = "curve_a" if k == 0 else "curve_b"
        g, o = c["gp"][key], c["observed"][key]
        ax.fill_between(ks, g["lo"], g["hi"], color=f"C{k}", alpha=0.2)
        ax.plot(ks, g["mean"], color=f"C{k}", label=f"{name}: GP (95% band)")
        _errorbars(ax, np.asarray(ks) + 0.1 * (k - 0.5), o["point"], o["lo"], o["hi"], color=f"C{k}", ms=3,
                   label=f"{name}: observed, MeanMax (95% bootstrap)")
    ax.axvline(claim.get("min_budget", 1), color="k", ls=":", lw=0.8, label="claim's smallest budget")
    ax.set_xlabel("budget: universes tried")
    ax.set_ylabel(f"expected best {label(claim['metric'])}")
    ax.legend(fontsize=7)
    _title(fig, c, "expected best performance against budget")
    fig.tight_layout()
    _save(fig, path)


def where_figure(c: Mapping[str, Any], space: SearchSpace, df: pd.DataFrame, sur: Mapping[str, Any],
                 infl: Mapping[str, Any], base: Sequence[Mapping[str, Any]], path: str) -> None:
    """Where a claim holds: a map of the posterior probability that it holds locally
    (comparison, trend), the granulated tau of each choice (correlation), or the
    expected-best difference against budget."""
    from multiverse.claims import claim_type

    sns.set_theme(style="white", context="paper")
    kind = claim_type(c["claim"])
    if kind == "correlation":
        return _granulated_bars(c, path)
    if kind == "expected_best":
        return _expected_best_difference(c, path)
    return _holds_map(c, space, df, sur, infl, base, path)


def _holds_map(c, space, df, sur, infl, base, path, n: int = 12, n_base: int = 8, n_samples: int = 128) -> None:
    import torch

    from multiverse import claims as C
    from multiverse.report import top_numeric

    claim = c["claim"]
    model = sur[claim["metric"]].model
    dims = top_numeric(space, infl[claim["metric"]], 2, exclude=[claim["dimension"]])
    sign = C.claim_sign(C.relation(claim))
    if not dims:
        return message_figure(f"No numeric choice besides {claim['dimension']} to map the claim over", path)
    gx = dimension_grid(space, dims[0], n)
    gy = dimension_grid(space, dims[1], n) if len(dims) > 1 else [None]
    cells = [(x, y) for y in gy for x in gx]
    # a trend over a conditional dimension is mapped where that dimension is active
    sub = [u for u in base if C.claim_type(claim) == "comparison" or space[claim["dimension"]].is_active(u)][:n_base]
    if not sub:
        return message_figure(f"No reference universe where {claim['dimension']} is active", path)
    pts = []
    for x, y in cells:
        cell = [{**u, dims[0]: x, **({dims[1]: y} if y is not None else {})} for u in sub]
        if C.claim_type(claim) == "comparison":
            pts += C.comparison_universes(space, claim, cell)
        else:
            pts += C.trend_universes(space, claim, cell, C.trend_conditions(space, claim)[0])[0]
    X = features(space, pts, model).reshape(len(cells), len(pts) // len(cells), -1)
    torch.manual_seed(5)
    with torch.no_grad():
        f = model.posterior(X).rsample(torch.Size([n_samples])).squeeze(-1).numpy()  # S x cells x points
    if C.claim_type(claim) == "comparison":
        local = np.stack([C.local_comparison(f[:, i], claim, len(sub)).mean(1) for i in range(len(cells))], 1)
    else:
        t = C.positions(space, claim["dimension"], dimension_grid(space, claim["dimension"], C.TREND_GRID))
        local = C.slope(t, f.reshape(n_samples, len(cells), len(t), -1), axis=2).mean(-1)
    p = (sign * local > 0).mean(0)
    fig, ax = plt.subplots(figsize=(7, 5))
    if len(dims) == 2:
        cs = ax.contourf(gx, gy, p.reshape(len(gy), len(gx)), levels=np.linspace(0, 1, 11), cmap="RdBu")
        fig.colorbar(cs, ax=ax, label="posterior probability that the claim holds here")
        ax.contour(gx, gy, p.reshape(len(gy), len(gx)), levels=[0.05, 0.5, 0.95], colors="k", linewidths=0.7)
        sns.scatterplot(data=df, x=dims[0], y=dims[1], style=_hue(space), style_order=_hue_order(space), color="k",
                        s=30, ax=ax)
        _log_axis(ax, space[dims[1]], "y")
        ax.set_ylabel(label(dims[1]))
    else:
        ax.plot(gx, p, color="C0")
        ax.set_ylim(0, 1)
        ax.set_ylabel("posterior probability that the claim holds here")
    _log_axis(ax, space[dims[0]], "x")
    ax.set_xlabel(label(dims[0]))
    regions = (c["gp"].get("regions") or {}).get("text", "")
    ax.set_title(f"Where it holds: {c['statement']}\n(other choices averaged; contours at 0.05, 0.5, 0.95)\n{regions}",
                 fontsize=8, wrap=True)
    _save(fig, path)


def _granulated_bars(c, path) -> None:
    sns.set_theme(style="whitegrid", context="paper")
    per = c["gp"].get("granulated_per_dimension", {})
    names = list(per) + ["granulated (mean)", "overall tau"]
    vals = list(per.values()) + [c["gp"]["granulated"], c["gp"]]
    fig, ax = plt.subplots(figsize=(1.1 * len(names) + 3, 3.6))
    _errorbars(ax, np.arange(len(names)), [v["effect"] for v in vals], [v["effect_lo"] for v in vals],
               [v["effect_hi"] for v in vals], color="C0", label="GP surrogate (95% CrI)")
    o = c["observed"]
    if np.isfinite(o["effect"]):
        _errorbars(ax, [len(names) - 1 + 0.15], [o["effect"]], [o["effect_lo"]], [o["effect_hi"]], color="C1",
                   label="observed universes (95% bootstrap CI)")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(range(len(names)), [label(n) for n in names], rotation=20)
    ax.set_ylabel("Kendall tau")
    ax.set_ylim(-1.05, 1.05)
    ax.legend(fontsize=7)
    ax.set_title(f"{c['statement']}: tau along each choice with the others fixed (Jiang et al. 2020)\n"
                 f"verdict: {c['summary']}", fontsize=8)
    _save(fig, path)


def _expected_best_difference(c, path) -> None:
    sns.set_theme(style="whitegrid", context="paper")
    ks = np.asarray(c["observed"]["budgets"])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for k, key in enumerate(("gp", "observed")):
        a, b = c[key]["curve_a"], c[key]["curve_b"]
        diff = np.asarray(a["mean"]) - np.asarray(b["mean"])
        ax.plot(ks, diff, color=f"C{k}", marker="o", ms=3,
                label=f"{'GP' if key == 'gp' else 'observed'}: mean difference (worst budget "
                      f"{c[key]['effect']:+.3f} [{c[key]['effect_lo']:+.3f}, {c[key]['effect_hi']:+.3f}])")
    ax.axhline(0, color="k", lw=0.8)
    ax.axvline(c["claim"].get("min_budget", 1), color="k", ls=":", lw=0.8)
    ax.set_xlabel("budget: universes tried")
    ax.set_ylabel("expected best: a - b")
    ax.legend(fontsize=7)
    ax.set_title(f"{c['statement']}: where it holds along the budget\nverdict: {c['summary']}", fontsize=8)
    _save(fig, path)
