"""The report's seaborn figures. Each function draws one figure and saves it to ``path``.

This module draws only: every posterior quantity it shows was computed (and sampled,
with seeds from the study's) by :mod:`multiverse.report` or the claim's own module in
:mod:`multiverse.claims`; the observed universes come from the results table.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from multiverse.space import SearchSpace  # noqa: E402
from multiverse.spec.records import Claim

LABELS = {
    "train_acc": "train accuracy", "val_acc": "validation accuracy", "test_acc": "test accuracy",
    "train_loss": "train loss", "val_loss": "validation loss", "test_loss": "test loss",
    "gap": "generalisation gap (train - test acc.)",
    "lr": "learning rate", "weight_decay": "weight decay", "batch_size": "batch size",
}


def label(name: str) -> str:
    return LABELS.get(name, name.replace("_", " "))


def hue_dimension(space: SearchSpace) -> str | None:
    return space.categorical[0].name if space.categorical else None


def hue_levels(space: SearchSpace) -> list | None:
    return list(space.categorical[0].choices) if space.categorical else None


#: A metric whose positive values span at least this ratio (two decades) is drawn on a log axis.
DECADES = 100.0


def value_axis(ax, values, axis: str = "y") -> None:
    """A log scale for a metric's axis when its values are all positive and span
    :data:`DECADES` or more (a collapsed run's train loss of 10 beside 0.01 would
    otherwise flatten every other point); a linear one otherwise."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) and v.min() > 0 and v.max() / v.min() >= DECADES:
        getattr(ax, f"set_{axis}scale")("log")


def log_axis(ax, dim, axis: str = "x") -> None:
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


def save(fig, path: str) -> None:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def message_figure(message: str, path: str) -> None:
    """A figure that says why the plot it stands for could not be drawn."""
    fig, ax = plt.subplots(figsize=(7, 2))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    ax.set_axis_off()
    save(fig, path)


def outcomes_vs_dimensions(df: pd.DataFrame, space: SearchSpace, metrics: Sequence[str], path: str) -> None:
    """A grid: one row per metric, one column per dimension, one point per universe."""
    sns.set_theme(style="whitegrid", context="paper")
    hue = hue_dimension(space)
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
                sns.scatterplot(data=data, x=d.name, y=m, hue=hue, hue_order=hue_levels(space), style="status",
                                ax=ax, legend=(i == 0 and j == len(space.dimensions) - 1), s=30)
                log_axis(ax, d)
            value_axis(ax, data[m])
            ax.set_xlabel(label(d.name))
            ax.set_ylabel(label(m) if j == 0 else "")
    if axes[0, -1].get_legend() is not None:
        sns.move_legend(axes[0, -1], "upper left", bbox_to_anchor=(1.02, 1))
    fig.suptitle("Each outcome against each choice (one point per universe)")
    fig.tight_layout()
    save(fig, path)


def posterior_map(data: Mapping[str, Any], space: SearchSpace, df: pd.DataFrame, metric: str, path: str) -> None:
    """Posterior median and 95% band width over two dimensions, averaged over the others
    (``data``: :func:`multiverse.report_analysis.posterior_map_data`), with the observed universes
    drawn on top in the same colour scale."""
    sns.set_theme(style="white", context="paper")
    dx, dy = (space[d] for d in data["dims"])
    gx, gy, median, width = data["x"], data["y"], np.asarray(data["median"]), np.asarray(data["width"])
    vals = df[metric].to_numpy(dtype=float)
    lo, hi = np.nanmin([median.min(), np.nanmin(vals)]), np.nanmax([median.max(), np.nanmax(vals)])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6), gridspec_kw={"wspace": 0.35})
    for ax, z, title, cmap in ((axes[0], median, "posterior median", "viridis"),
                               (axes[1], width, "width of the 95% credible band", "magma")):
        first = z is median
        cs = ax.contourf(gx, gy, z, levels=20, cmap=cmap, vmin=lo if first else None, vmax=hi if first else None)
        fig.colorbar(cs, ax=ax, label=f"{label(metric)}: {title}")
        sns.scatterplot(
            data=df, x=dx.name, y=dy.name, hue=metric if first else None, palette="viridis" if first else None,
            hue_norm=(lo, hi) if first else None, style=hue_dimension(space), style_order=hue_levels(space), s=45, ax=ax,
            edgecolor="white" if first else "black", legend=not first, color="white" if not first else None,
        )
        log_axis(ax, dx, "x")
        log_axis(ax, dy, "y")
        ax.set_xlabel(label(dx.name))
        ax.set_ylabel(label(dy.name))
        ax.set_title(f"GP {title} of {label(metric)}\n(averaged over the other choices)")
    if axes[1].get_legend() is not None:
        sns.move_legend(axes[1], "upper left", bbox_to_anchor=(1.3, 1), title="universes")
    save(fig, path)


#: The specification curve's size in inches (width, height of the curve; the strip adds a
#: fixed height per row): the same for 48 universes as for 5,000.
CURVE_SIZE = (10.0, 3.6)
CURVE_ROW = 0.16
#: The binned strip's x label: what its shades mean.
CURVE_BINS_LABEL = "share of each bin's universes with the choice, darker = more"


def specification_curve(data: Mapping[str, Any], space: SearchSpace, metric: str, path: str) -> dict[str, Any]:
    """Universes ranked by ``metric`` (top) and the choices each one made (the strip below:
    one row per categorical level and per numeric third), at one size whatever the count
    (``data``: :func:`multiverse.report_analysis.specification_data`).

    Up to :data:`multiverse.report_analysis.CURVE_POINTS` universes: one point each, its
    seeds' range as a bar, the GP's 95% predictive interval as a band, and a mark per
    universe in the strip. Above: the ranking in bins, each bin's median with its 5-95% and
    25-75% quantile bands, and the strip's share of each bin's universes with each choice.
    Each comparison (or expected-best) claim on the metric draws its two groups' means as
    lines and has its two rows in the strip; the universes without a value (failed,
    diverged, not continued) sit at the right, hatched, counted in the legend, their
    choices in the strip. Returns what was drawn (for tests and captions)."""
    sns.set_theme(style="whitegrid", context="paper")
    d, missing, strip, bins = data["table"], data["missing"], data["strip"], data["bins"]
    n, k = len(d), len(missing)
    width = n if bins is None else int(bins.max()) + 1 if n else 0
    gap = max(1, round(0.02 * width)) if k else 0
    slots = max(1, round(width * k / max(n, 1))) if k else 0  # the missing universes' share of the x axis
    fig = plt.figure(figsize=(CURVE_SIZE[0], CURVE_SIZE[1] + CURVE_ROW * len(strip) + 0.6))
    grid = fig.add_gridspec(2, 1, height_ratios=[CURVE_SIZE[1], CURVE_ROW * len(strip) + 0.3], hspace=0.08)
    top = fig.add_subplot(grid[0])
    bottom = fig.add_subplot(grid[1], sharex=top)
    y = d["value"].to_numpy(dtype=float)
    drawn: dict[str, Any] = {"n": n, "binned": bins is not None, "missing": k, "lines": [], "strip_rows": len(strip)}
    if bins is None:
        x = np.arange(n)
        if "gp_lo" in d:
            top.fill_between(x, d["gp_lo"], d["gp_hi"], color="C0", alpha=0.15, lw=0, label="GP 95% predictive interval")
        if (d["seeds"] > 1).any():
            top.vlines(x, d["seed_lo"], d["seed_hi"], color="0.4", lw=0.8, label="range over its seeds")
        hue = hue_dimension(space)
        sns.scatterplot(x=x, y=y, hue=d[hue].to_numpy() if hue else None, hue_order=hue_levels(space), ax=top, s=18,
                        zorder=3, legend="brief")
        cells = np.array([mask[:n] for _, mask in strip], dtype=float)
    else:
        x = np.arange(width)
        q = np.array([np.quantile(y[bins == b], [0.05, 0.25, 0.5, 0.75, 0.95]) for b in range(width)])
        top.fill_between(x, q[:, 0], q[:, 4], color="C0", alpha=0.2, lw=0, label="5-95% of the bin's universes")
        top.fill_between(x, q[:, 1], q[:, 3], color="C0", alpha=0.4, lw=0, label="25-75%")
        top.plot(x, q[:, 2], color="C0", lw=1.5, label=f"median ({n // width}-{-(-n // width)} universes a bin)")
        cells = np.array([[mask[:n][bins == b].mean() for b in range(width)] for _, mask in strip], dtype=float)
    for j, c in enumerate(data["claims"]):
        for g, style in zip(c["groups"], ("--", ":")):
            if np.isfinite(g["mean"]):
                text = f"{c['name']}: mean of {c['relation'] if g['side'] == 'a' else 'vs'} {', '.join(map(str, g['levels']))}"
                top.axhline(g["mean"], color=f"C{3 + j}", ls=style, lw=1.2, label=f"{c['name']}: {g['side']} = "
                            f"{', '.join(map(str, g['levels']))} (mean {g['mean']:.3g})")
                drawn["lines"].append(text)
    if k:
        lo = width + gap
        top.axvspan(lo - 0.5, lo + slots - 0.5, color="0.85", hatch="//", lw=0, label="no value: " + ", ".join(
            f"{s} {v}" for s, v in sorted(data["missing_counts"].items())))
        extra = np.array([mask[n:] for _, mask in strip], dtype=float)  # their choices, binned like the rest
        span = np.minimum(np.arange(k) * slots // k, slots - 1)
        extra = np.array([[row[span == b].mean() if (span == b).any() else np.nan for b in range(slots)]
                          for row in extra]).reshape(len(strip), slots)
        cells = np.concatenate([cells.reshape(len(strip), width), np.full((len(strip), gap), np.nan), extra], 1)
    top.set_xlim(-0.5, width + gap + slots - 0.5)
    top.set_ylabel(label(metric))
    top.set_title(f"Specification curve: {label(metric)} of {n} universes, ranked"
                  + (f" ({k} without a value, right)" if k else ""))
    top.legend(loc="lower right", fontsize=6, ncol=2)  # a ranking rises to the right: that corner is free
    top.tick_params(labelbottom=False)
    cmap = plt.get_cmap("Greys").copy()
    cmap.set_bad("white")
    bottom.imshow(np.ma.masked_invalid(cells), aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest",
                  extent=(-0.5, cells.shape[1] - 0.5, len(strip) - 0.5, -0.5))
    bottom.set_yticks(range(len(strip)), [name for name, _ in strip], fontsize=6)
    bottom.grid(False)
    bottom.set_xlabel("universe rank" if bins is None else f"bin of the ranking ({CURVE_BINS_LABEL})")
    fig.subplots_adjust(left=0.24, right=0.98, top=0.93, bottom=0.08)
    fig.savefig(path, dpi=110)  # no tight box: the same size whatever the labels
    plt.close(fig)
    drawn["size_inches"] = tuple(fig.get_size_inches())
    return drawn


def claims_forest(claims: Sequence[Any], path: str, describe: Callable[[Any], tuple[str, Sequence[str]]]) -> None:
    """Each claim's effect with its 95% interval: design-based (confidence), GP (credible)
    and observed (bootstrap), for each :class:`multiverse.claims.contract.ClaimResult`;
    ``describe(c)`` gives a claim's statistic and its metrics.

    One panel per claim, each on its own scale since claims compare different metrics.
    """
    sns.set_theme(style="whitegrid", context="paper")
    n = max(1, len(claims))
    fig, axes = plt.subplots(n, 1, figsize=(8, 1.9 * n + 0.6), squeeze=False)
    for ax, c in zip(axes[:, 0], claims):
        for k, (src, key) in enumerate((("design-based (95% CI)", "design"), ("GP surrogate (95% CrI)", "gp"),
                                         ("observed universes (95% bootstrap CI)", "observed"))):
            e = getattr(c, key) or {"effect": np.nan}
            if not np.isfinite(e["effect"]):
                continue
            ax.errorbar([e["effect"]], [k], xerr=[[e["effect"] - e["effect_lo"]], [e["effect_hi"] - e["effect"]]],
                        fmt="o", capsize=4, color=f"C{k}", label=src)
            ax.annotate(f"P(holds) = {e['p_holds']:.2f}", (e["effect"], k), textcoords="offset points",
                        xytext=(6, 5), fontsize=7)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks([0, 1, 2], ["design-based", "GP", "observed"])
        ax.set_ylim(2.6, -0.6)
        statistic, metrics = describe(c)
        ms = " vs ".join(metrics)
        ax.set_title(f"{c.statement}  [{ms}]: {c.summary}", fontsize=8, wrap=True)
        ax.set_xlabel(f"{statistic} ({ms})")
    fig.suptitle("Claims: the design-based answer beside the GP's and the observed universes', 95% intervals", y=1.0)
    fig.tight_layout()
    save(fig, path)


def errorbars(ax, x, mean, lo, hi, **kw) -> None:
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
        errorbars(ax, offs, d["index"], d["lo"], d["hi"], color="k", ms=0, lw=1)
    ax.set_ylabel("Sobol index (share of variance)")
    ax.set_xlabel("")
    ax.set_ylim(min(0.0, data["lo"].min() - 0.02), max(1.0, data["hi"].max() + 0.02))
    ax.set_title(f"Which choices matter for {label(metric)}: Sobol indices of the GP surrogate\n"
                 "(bars: posterior mean; lines: 95% credible intervals)")
    save(fig, path)


def loo_calibration(diag: Mapping[str, Any], metric: str, path: str) -> None:
    """Leave-one-out predictions against the observed values, with 95% intervals, and
    the standardised residuals against a standard normal."""
    sns.set_theme(style="whitegrid", context="paper")
    y, mu, plo, phi = (np.asarray(diag[k], dtype=float) for k in ("observed", "predicted", "predicted_lo", "predicted_hi"))
    covered = (plo <= y) & (y <= phi)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for ok, colour, name in ((True, "C0", "inside its 95% interval"), (False, "C3", "outside")):
        m = covered == ok
        a.errorbar(y[m], mu[m], yerr=[mu[m] - plo[m], phi[m] - mu[m]], fmt="o", ms=4, capsize=2, color=colour,
                   label=name, alpha=0.8)
    lims = [np.nanmin([y.min(), plo.min()]), np.nanmax([y.max(), phi.max()])]
    a.plot(lims, lims, "k--", lw=0.8, label="perfect prediction")
    a.set_xlabel(f"observed {label(metric)}")
    a.set_ylabel(f"LOO predicted {label(metric)} (95% interval)")
    a.legend(fontsize=7)
    a.set_title(f"Leave-one-out (n={diag['n']}, 95% intervals in brackets):\nRMSE {diag['rmse']:.3g} "
                f"[{diag['rmse_lo']:.3g}, {diag['rmse_hi']:.3g}], R$^2$ {diag['r2']:.2f} [{diag['r2_lo']:.2f}, "
                f"{diag['r2_hi']:.2f}], coverage {diag['coverage']:.2f} [{diag['coverage_lo']:.2f}, "
                f"{diag['coverage_hi']:.2f}]" + ("" if diag["ok"] else "\nPOOR FIT: verdicts flagged"), fontsize=8)
    half = (phi - plo) / (2 * 1.96)  # on the GP's scale the interval is symmetric: its sd, warped
    z = (y - mu) / np.where(half > 0, half, np.nan)
    sns.histplot(z, stat="density", ax=b, bins=min(20, max(5, len(z) // 3)), label="universes")
    g = np.linspace(-4, 4, 200)
    b.plot(g, np.exp(-g**2 / 2) / np.sqrt(2 * np.pi), "k", label="standard normal")
    b.set_xlabel("LOO residual / (half-width of its 95% interval / 1.96)")
    b.set_ylabel("density")
    b.legend(fontsize=7)
    b.set_title("Calibration: residuals should look standard normal")
    save(fig, path)


def band(ax, x, band: Mapping[str, Any], colour, name) -> None:
    ax.fill_between(x, band["lo"], band["hi"], color=colour, alpha=0.25)
    ax.plot(x, band["mean"], color=colour, label=f"{name} (GP mean, 95% band)")


def groups(claim: Claim) -> list[tuple[str, list]]:
    return [("/".join(map(str, claim["a"])), list(claim["a"])), ("/".join(map(str, claim["b"])), list(claim["b"]))]






def themed(style: str) -> None:
    """The seaborn theme of the figure about to be drawn (``whitegrid`` or ``white``)."""
    sns.set_theme(style=style, context="paper")


def title(fig, c, what: str) -> None:
    """A claim's figure's title (``c``: its :class:`multiverse.claims.contract.ClaimResult`)."""
    fig.suptitle(f"{c.statement}: {what}\nverdict: {c.summary}", fontsize=9, wrap=True)










def holds_map(c, space, df, path) -> None:
    """A map of the local posterior probability that the claim holds, with contours at the
    verdict's thresholds (0.05, 0.95) and 0.5."""
    data = c.figures["where"]
    if "message" in data:
        return message_figure(data["message"], path)
    dims, gx, gy = data["dims"], data["x"], data["y"]
    p = np.asarray(data["p_holds"])
    fig, ax = plt.subplots(figsize=(7, 5))
    if len(dims) == 2:
        z = p.reshape(len(gy), len(gx))
        cs = ax.contourf(gx, gy, z, levels=np.linspace(0, 1, 11), cmap="RdBu")
        fig.colorbar(cs, ax=ax, label="posterior probability that the claim holds here")
        ax.contour(gx, gy, z, levels=[0.05, 0.5, 0.95], colors="k", linewidths=0.7)
        sns.scatterplot(data=df, x=dims[0], y=dims[1], style=hue_dimension(space), style_order=hue_levels(space), color="k",
                        s=30, ax=ax)
        log_axis(ax, space[dims[1]], "y")
        ax.set_ylabel(label(dims[1]))
    else:
        ax.plot(gx, p, color="C0")
        ax.axhline(0.95, color="k", ls=":", lw=0.8)
        ax.axhline(0.05, color="k", ls=":", lw=0.8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("posterior probability that the claim holds here")
    log_axis(ax, space[dims[0]], "x")
    ax.set_xlabel(label(dims[0]))
    regions = (c.gp.get("regions") or {}).get("text", "")
    ax.set_title(f"Where it holds: {c.statement}\n(other choices averaged; holds above 0.95, fails below 0.05)"
                 f"\n{regions}", fontsize=8, wrap=True)
    save(fig, path)




