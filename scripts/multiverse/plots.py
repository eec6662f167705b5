"""The report's seaborn figures. Each function draws one figure and saves it to ``path``."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from multiverse.gp import dimension_grid, features, outcome_scale, posterior_mean_std  # noqa: E402
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
    noise_sd = float(model.likelihood.noise.detach().squeeze().sqrt()) * outcome_scale(model)
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
        ax.set_title(f"{c['statement']}  [{c['claim']['metric']}]: {c['summary']}", fontsize=8)
        ax.set_xlabel(f"effect on {label(c['claim']['metric'])}: mean | a - mean | b")
    fig.suptitle("Claims: GP verdict beside the observed universes, 95% intervals", y=1.0)
    fig.tight_layout()
    _save(fig, path)
