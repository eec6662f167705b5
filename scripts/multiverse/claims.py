"""Claim verdicts: from the GP surrogate, and model-free from the observed universes.

Four claim types (``type`` in the config; ``comparison`` when absent):

- **comparison**: a metric under levels ``a`` versus ``b`` of one categorical
  dimension, integrated over the rest of the multiverse. Effect: ``mean(metric | a) -
  mean(metric | b)``; also the share of the multiverse where it holds and a
  description, in the space's own terms, of where it flips (:func:`describe_regions`).
- **trend**: a metric rises (``increasing``) or falls with a numeric dimension.
  Effect: the least-squares slope of the metric against the dimension's position in
  its range (0 at ``low``, 1 at ``high``, on its own log scale), i.e. the change
  across the range. The GP's version is the slope of its partial dependence;
  ``given`` adds the trend at fixed values of other dimensions, and ``scaled`` along
  a path where another dimension moves with it (``lr`` proportional to
  ``batch_size^power``: the linear or square-root scaling rule).
- **correlation**: across universes, metric ``x`` predicts metric ``y``. Kendall's
  tau, and the granulated tau of Jiang et al. (2020): the mean tau along each
  dimension with the others held fixed, averaged over dimensions.
- **expected_best**: the expected best ``metric`` of ``k`` random universes of group
  ``a`` against group ``b``, for every budget ``k`` from ``min_budget`` on (Dodge et
  al. 2019), by the unbiased estimator of Tang et al. 2020 (:func:`mean_max`). Effect:
  the difference ``a - b`` at the budget least favourable to the claim.

Every verdict has two answers, put side by side by :func:`judge`:

- GP: joint posterior samples of the surrogate (sampled functions, never marginal
  variances alone), so each sample gives one value of the claim's statistic and the
  intervals account for the correlation between points;
- observed: a bootstrap over the observed universes (one value per universe, its
  seeds averaged).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

#: A verdict's probability thresholds: ``holds`` at or above, ``fails`` at or below.
P_HOLDS, P_FAILS = 0.95, 0.05
TOO_FEW = "too few universes"
CLAIM_TYPES = ("comparison", "trend", "correlation", "expected_best")
#: Points of a numeric dimension's grid for trends and granulated tau.
TREND_GRID = 9
#: Positions (in the unit range) of a numeric ``given`` dimension at which a trend is
#: also measured, and the observed universes' bins around them (thirds of the range).
GIVEN_POSITIONS = (1 / 6, 1 / 2, 5 / 6)


def claim_type(claim: Mapping[str, Any]) -> str:
    return claim.get("type", "comparison")


def claim_sign(relation: str) -> int:
    """+1 when the claim is that the statistic is positive (``a`` larger, increasing,
    positive correlation), -1 when negative."""
    return {">": 1, ">=": 1, "<": -1, "<=": -1, "increasing": 1, "decreasing": -1,
            "positive": 1, "negative": -1}[relation]


def relation(claim: Mapping[str, Any]) -> str:
    return claim.get("relation") or claim.get("direction") or ">="


def verdict(p_holds: float) -> str:
    if p_holds >= P_HOLDS:
        return "holds"
    if p_holds <= P_FAILS:
        return "fails"
    return "uncertain"


def interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(x, [a, 1 - a])
    return float(lo), float(hi)


def summarise(effects: np.ndarray, sign: int) -> dict[str, float | str]:
    """Mean, 95% interval and probability of the claimed sign for samples of an effect."""
    effects = np.asarray(effects, dtype=float)
    lo, hi = interval(effects)
    p = float(np.mean(sign * effects > 0))
    return {"effect": float(np.mean(effects)), "effect_lo": lo, "effect_hi": hi, "p_holds": p, "verdict": verdict(p)}


def too_few(**extra: Any) -> dict[str, Any]:
    nan = float("nan")
    return {**extra, "effect": nan, "effect_lo": nan, "effect_hi": nan, "p_holds": nan, "verdict": TOO_FEW}


def joint_samples(model, space, universes: Sequence[Mapping[str, Any]], n: int, seed: int) -> np.ndarray:
    """``n x len(universes)`` joint samples of the GP's latent function (sampled functions);
    ``n x len(universes) x m`` for a model of ``m > 1`` outcomes."""
    import torch

    from multiverse.gp import features

    torch.manual_seed(seed)
    with torch.no_grad():
        f = model.posterior(features(space, universes, model)).rsample(torch.Size([n]))
    return (f.squeeze(-1) if f.shape[-1] == 1 else f).numpy()


def positions(space, name: str, values: Sequence[Any]) -> np.ndarray:
    """Each value's position in the dimension's range: 0 at ``low``, 1 at ``high`` (log scale if log)."""
    return space[name].to_unit(values)


# --- comparison ---------------------------------------------------------------
def observed_verdict(
    values: np.ndarray, groups: Sequence[str], claim: Mapping[str, Any], n_boot: int, seed: int
) -> dict[str, Any]:
    """Model-free comparison verdict by a bootstrap stratified by group.

    Args:
        values: ``n`` observed metric values (non-finite ones are dropped).
        groups: ``n`` levels of the claim's dimension.
    """
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=object)
    ok = np.isfinite(values)
    a = values[ok & np.isin(groups, list(claim["a"]))]
    b = values[ok & np.isin(groups, list(claim["b"]))]
    out: dict[str, Any] = {"n_a": int(len(a)), "n_b": int(len(b))}
    if len(a) < 2 or len(b) < 2:
        return too_few(**out)
    rng = np.random.default_rng(seed)
    boot = rng.choice(a, (n_boot, len(a))).mean(1) - rng.choice(b, (n_boot, len(b))).mean(1)
    return {**out, **summarise(boot, claim_sign(claim["relation"])), "effect": float(a.mean() - b.mean())}


def comparison_universes(space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Every base universe under every level of ``a`` then ``b``: ``(len(a)+len(b)) * len(base)``."""
    levels = list(claim["a"]) + list(claim["b"])
    return [{**u, claim["dimension"]: lv} for lv in levels for u in base]


def local_comparison(f: np.ndarray, claim: Mapping[str, Any], n_base: int) -> np.ndarray:
    """``samples x n_base`` local effects from samples at :func:`comparison_universes`."""
    na, nb = len(claim["a"]), len(claim["b"])
    f = f.reshape(len(f), na + nb, n_base)
    return f[:, :na].mean(1) - f[:, na:].mean(1)


def with_fraction(summary: dict[str, Any], local: np.ndarray, sign: int) -> dict[str, Any]:
    """Add the share of the multiverse where the claim holds (one share per sample)."""
    frac = (sign * local > 0).mean(1)
    flo, fhi = interval(frac)
    return {**summary, "fraction_holds": float(frac.mean()), "fraction_holds_lo": flo, "fraction_holds_hi": fhi}


def gp_verdict(
    model, space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]], n_samples: int, seed: int
) -> dict[str, Any]:
    """Comparison verdict from joint posterior samples of the GP at :func:`comparison_universes`.

    ``base`` is a reference set covering the other dimensions (the claim's own
    dimension is overwritten). Returns the effect summary, the fraction of the
    multiverse where the claim holds, each with a 95% credible interval, and the
    regions where it holds and where it fails.
    """
    f = joint_samples(model, space, comparison_universes(space, claim, base), n_samples, seed)
    local = local_comparison(f, claim, len(base))
    sign = claim_sign(claim["relation"])
    out = with_fraction(summarise(local.mean(1), sign), local, sign)
    out["regions"] = describe_regions(space, base, sign * local.mean(0) > 0, exclude={claim["dimension"]})
    return out


# --- where a claim holds --------------------------------------------------------
def region_features(space, universes: Sequence[Mapping[str, Any]], exclude: set[str]) -> tuple[np.ndarray, list]:
    """Columns a decision tree splits on, in the space's own terms: numeric dimensions
    (log10 where log-scaled) and one 0/1 column per categorical level. Conditional
    dimensions are left out (their value is meaningless where inactive)."""
    cols, meta = [], []
    for d in space.dimensions:
        if d.name in exclude or d.when is not None:
            continue
        if d.is_categorical:
            for lv in d.choices:
                cols.append([float(u[d.name] == lv) for u in universes])
                meta.append((d, lv))
        else:
            v = np.asarray([u[d.name] for u in universes], dtype=float)
            cols.append(np.log10(v) if d.log else v)
            meta.append((d, None))
    return np.array(cols, dtype=float).T.reshape(len(universes), len(meta)), meta


def _condition(meta, threshold: float, left: bool) -> str:
    d, level = meta
    if level is not None:
        return f"{d.name} {'is not' if left else 'is'} {level}"
    t = 10**threshold if d.log else threshold
    if d.kind == "int":
        return f"{d.name} <= {int(np.floor(t))}" if left else f"{d.name} >= {int(np.floor(t)) + 1}"
    return f"{d.name} {'<' if left else '>='} {t:.2g}"


def describe_regions(
    space, universes: Sequence[Mapping[str, Any]], holds: np.ndarray, exclude: set[str], depth: int = 2
) -> dict[str, Any]:
    """Where a claim holds and where it fails, as rules on the space's dimensions.

    A shallow decision tree (scikit-learn) is fitted to ``holds`` (one bool per
    reference universe: does the claim hold there, by the posterior mean) with
    leaves of at least 10% of the multiverse. Returns the leaves (rule, verdict,
    share of the multiverse) and the tree's accuracy: the share of the reference set
    its rules describe correctly.
    """
    from sklearn.tree import DecisionTreeClassifier

    holds = np.asarray(holds, dtype=bool)
    share = float(holds.mean())
    if share in (0.0, 1.0):
        where = "everywhere" if share == 1.0 else "nowhere"
        return {"text": f"holds {where} in the multiverse", "leaves": [], "accuracy": 1.0, "share_holds": share}
    X, meta = region_features(space, universes, exclude)
    if X.shape[1] == 0:
        return {"text": f"holds on {share:.0%} of the multiverse", "leaves": [], "accuracy": float(max(share, 1 - share)),
                "share_holds": share}
    tree = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=max(1, len(holds) // 10), random_state=0)
    tree.fit(X, holds)
    t = tree.tree_
    leaves = []

    def label(node: int) -> bool | None:
        """A node's class if every leaf under it has the same one, else None."""
        if t.children_left[node] == -1:
            return bool(tree.classes_[int(np.argmax(t.value[node][0]))])
        a, b = label(t.children_left[node]), label(t.children_right[node])
        return a if a is not None and a == b else None

    def walk(node: int, rules: list[str]) -> None:
        ok = label(node)
        if ok is not None:  # a leaf, or siblings that agree: one rule
            leaves.append({"rule": " and ".join(rules) or "everywhere", "holds": ok,
                           "share": float(t.n_node_samples[node] / len(holds))})
            return
        m, thr = meta[t.feature[node]], float(t.threshold[node])
        walk(t.children_left[node], rules + [_condition(m, thr, True)])
        walk(t.children_right[node], rules + [_condition(m, thr, False)])

    walk(0, [])
    acc = float(tree.score(X, holds))
    if len(leaves) == 1:  # one verdict everywhere but for scattered points: say so plainly
        ok = leaves[0]["holds"]
        text = (f"{'holds' if ok else 'fails'} on {share if ok else 1 - share:.0%} of the multiverse, with no region "
                f"of 10% or more where it {'fails' if ok else 'holds'}")
        return {"text": text, "leaves": leaves, "accuracy": acc, "share_holds": share}
    fails = [leaf for leaf in leaves if not leaf["holds"]]
    holds_ = [leaf for leaf in leaves if leaf["holds"]]
    parts = []
    if fails:
        parts.append("fails for " + "; or ".join(f"{leaf['rule']} ({leaf['share']:.0%})" for leaf in fails))
    if holds_:
        parts.append("holds for " + "; or ".join(f"{leaf['rule']} ({leaf['share']:.0%})" for leaf in holds_))
    text = "; ".join(parts) + f" [rules describe {acc:.0%} of the multiverse]"
    return {"text": text, "leaves": leaves, "accuracy": acc, "share_holds": share}


# --- trend ------------------------------------------------------------------------
def slope(t: np.ndarray, f: np.ndarray, axis: int = -1) -> np.ndarray:
    """Least-squares slope of ``f`` against ``t`` along ``axis``."""
    f = np.moveaxis(f, axis, -1)
    tc = t - t.mean()
    return (f - f.mean(-1, keepdims=True)) @ tc / (tc @ tc)


def trend_conditions(space, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The trend's variants: marginal, at fixed values of each ``given`` dimension, and
    along the ``scaled`` path. Each has a label, ``fixed`` ({dim: value} for the GP
    and a predicate for the observed universes) and ``scaled``."""
    out = [{"label": "marginal", "fixed": {}, "select": None, "scaled": None}]
    for name in claim.get("given", []):
        d = space[name]
        if d.is_categorical:
            trend_dim = space[claim["dimension"]]
            for lv in d.choices:
                if trend_dim.when is not None and trend_dim.when[0] == name and lv not in trend_dim.when[1]:
                    continue  # the trend's dimension is inactive at this level: nothing to read
                out.append({"label": f"at {name} = {lv}", "fixed": {name: lv},
                            "select": (lambda u, n=name, v=lv: u[n] == v), "scaled": None})
        else:
            for i, p in enumerate(GIVEN_POSITIONS):
                v = d.from_unit(np.array([p]))[0]
                lo, hi = i / 3, (i + 1) / 3
                out.append({"label": f"at {name} = {v:.3g}", "fixed": {name: v},
                            "select": (lambda u, n=name, a=lo, b=hi: a <= float(space[n].to_unit([u[n]])[0]) <= b),
                            "scaled": None})
    if claim.get("scaled"):
        s = claim["scaled"]
        out.append({"label": f"with {s['dimension']} scaled as {claim['dimension']}^{s['power']:g}", "fixed": {},
                    "select": None, "scaled": s})
    return out


def scaled_coordinate(space, claim: Mapping[str, Any], universes: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """The coupled dimension's value at the trend dimension's ``low`` end, as a position
    in its range: ``log(lr) - power * (log(batch) - log(batch_low))`` for a log-scaled lr."""
    s = claim["scaled"]
    d, c = space[claim["dimension"]], space[s["dimension"]]
    x = np.log10([u[d.name] for u in universes]) - np.log10(d.low)
    z = np.log10([u[c.name] for u in universes]) - s["power"] * x
    return (z - np.log10(c.low)) / (np.log10(c.high) - np.log10(c.low))


def trend_universes(space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]], condition) -> tuple[list, np.ndarray, list]:
    """``grid x base`` universes for a trend: the claim's dimension on its grid, the
    condition's fixed values, and on a scaled path the coupled dimension moving with it.
    Base points whose scaled path leaves the coupled dimension's range are dropped.

    Returns the universes (grid-major), the grid's positions and the base kept.
    """
    from multiverse.gp import dimension_grid

    name = claim["dimension"]
    d = space[name]
    values = dimension_grid(space, name, TREND_GRID)
    t = positions(space, name, values)
    base = [{**u, **condition["fixed"]} for u in base]
    base = [u for u in base if d.is_active({**u, name: values[0]})]
    s = condition["scaled"]
    if s:
        c = space[s["dimension"]]
        ratio = np.asarray(values, dtype=float) / d.low
        keep = [u for u in base if c.low <= u[c.name] * ratio.min() ** s["power"] and
                u[c.name] * ratio.max() ** s["power"] <= c.high]
        base = keep
        grid = [{**u, name: v, c.name: float(u[c.name] * (v / d.low) ** s["power"])} for v in values for u in base]
    else:
        grid = [{**u, name: v} for v in values for u in base]
    return grid, t, base


def trend_gp(model, space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]], n_samples: int, seed: int,
             condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A trend's verdict from sampled partial-dependence curves of the GP.

    The effect is the slope of the partial dependence (the mean over ``base``), the
    share is that of base points whose own curve has the claimed slope.
    """
    condition = condition or trend_conditions(space, claim)[0]
    grid, t, kept = trend_universes(space, claim, base, condition)
    if len(kept) < 2:
        return too_few(n_reference=len(kept))
    f = joint_samples(model, space, grid, n_samples, seed).reshape(n_samples, len(t), len(kept))
    local = slope(t, f, axis=1)  # samples x base
    sign = claim_sign(relation(claim))
    pd_ = f.mean(2)
    lo, hi = np.quantile(pd_, [0.025, 0.975], axis=0)
    out = with_fraction(summarise(local.mean(1), sign), local, sign)
    out["n_reference"] = len(kept)
    out["curve"] = {"values": [float(v) for v in np.asarray([u[claim["dimension"]] for u in grid[:: len(kept)]])],
                    "mean": pd_.mean(0).tolist(), "lo": lo.tolist(), "hi": hi.tolist()}
    if condition["label"] == "marginal":
        out["regions"] = describe_regions(space, kept, sign * local.mean(0) > 0, exclude={claim["dimension"]})
    return out


def trend_observed(space, universes: Sequence[Mapping[str, Any]], values: np.ndarray, claim: Mapping[str, Any],
                   n_boot: int, seed: int, condition: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Model-free trend: the least-squares slope of the metric on the dimension's
    position, bootstrapped over universes. On a scaled path the regression also has
    the coupled dimension's scaled coordinate (so the slope is taken along the path);
    with a fixed value, only universes in its third of the range (or of its level) count."""
    condition = condition or trend_conditions(space, claim)[0]
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values) & np.array([space[claim["dimension"]].is_active(u) for u in universes], dtype=bool)
    if condition["select"] is not None:
        keep &= np.array([bool(condition["select"](u)) for u in universes], dtype=bool)
    us = [u for u, k in zip(universes, keep) if k]
    y = values[keep]
    if len(y) < 4:
        return too_few(n=int(len(y)))
    cols = [np.ones(len(y)), positions(space, claim["dimension"], [u[claim["dimension"]] for u in us])]
    if condition["scaled"]:
        cols.append(scaled_coordinate(space, claim, us))
    X = np.column_stack(cols)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        return too_few(n=int(len(y)))
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        i = rng.integers(0, len(y), len(y))
        coef, *_ = np.linalg.lstsq(X[i], y[i], rcond=None)
        boot.append(coef[1])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return {**summarise(np.array(boot), claim_sign(relation(claim))), "effect": float(coef[1]), "n": int(len(y))}


# --- correlation ----------------------------------------------------------------------
def kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b along the last axis, vectorised over leading axes (NaN without pairs)."""
    dx = np.sign(x[..., :, None] - x[..., None, :])
    dy = np.sign(y[..., :, None] - y[..., None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (dx * dy).sum((-1, -2)) / np.sqrt((dx**2).sum((-1, -2)) * (dy**2).sum((-1, -2)))


def granulated_universes(space, name: str, base: Sequence[Mapping[str, Any]]) -> tuple[list, int, int]:
    """``base x grid`` universes varying only ``name`` (base-major); base points where
    ``name`` is inactive are left out."""
    from multiverse.gp import dimension_grid

    d = space[name]
    values = dimension_grid(space, name, TREND_GRID)
    kept = [u for u in base if d.is_active({**u, name: values[0]})]
    return [{**u, name: v} for u in kept for v in values], len(kept), len(values)


def correlation_gp(model, space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]],
                   n_samples: int, seed: int, n_granulated: int = 24) -> dict[str, Any]:
    """Kendall tau between two outcomes across the multiverse, and granulated tau, from
    joint posterior samples of a two-outcome GP (``model``:
    :func:`multiverse.gp.fit_multitask_gp` of ``[x, y]``).

    Each sample gives one tau over ``base``; a bootstrap of ``base`` per sample adds
    the reference set's own sampling error. Granulated tau: for each dimension, the
    mean over ``n_granulated`` base points of the tau along that dimension alone, then
    the mean over dimensions (Jiang et al. 2020, Eq. 4).
    """
    rng = np.random.default_rng(seed)
    sign = claim_sign(relation(claim))
    f = joint_samples(model, space, base, n_samples, seed)  # samples x base x 2
    idx = rng.integers(0, len(base), (n_samples, len(base)))
    tau = kendall_tau(np.take_along_axis(f[..., 0], idx, 1), np.take_along_axis(f[..., 1], idx, 1))
    out = summarise(tau, sign)
    per_dim = {}
    for j, d in enumerate(space.dimensions):
        grid, nb, ng = granulated_universes(space, d.name, base[:n_granulated])
        if nb < 2:
            continue
        g = joint_samples(model, space, grid, n_samples, seed + 1 + j).reshape(n_samples, nb, ng, 2)
        t = kendall_tau(g[..., 0], g[..., 1])  # samples x base
        bi = rng.integers(0, nb, (n_samples, nb))
        per_dim[d.name] = np.nanmean(np.take_along_axis(t, bi, 1), axis=1)
    gran = np.mean(np.array(list(per_dim.values())), axis=0)
    out["granulated"] = summarise(gran, sign)
    out["granulated_per_dimension"] = {k: summarise(v, sign) for k, v in per_dim.items()}
    return out


#: Fewest matched groups (universes differing in one dimension only) for an observed
#: granulated tau; with fewer, a single pair's tau of +-1 would stand for the whole claim.
MIN_MATCHED_GROUPS = 5


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


def matched_granulated(space, universes: Sequence[Mapping[str, Any]], x: np.ndarray, y: np.ndarray,
                       n_boot: int = 0, seed: int = 0) -> dict[str, Any]:
    """Granulated tau on matched universes: per dimension, the mean tau within its
    :func:`matched_groups`, then the mean over dimensions. With ``n_boot``, a bootstrap
    over the groups (resampled within each dimension) gives its interval.

    Returns ``{"per_dimension", "effect", "lo", "hi", "groups"}`` (NaN effect and
    interval with fewer than :data:`MIN_MATCHED_GROUPS` groups).
    """
    taus = {}
    for name, groups in matched_groups(space, universes).items():
        t = np.array([float(kendall_tau(x[g], y[g])) for g in groups])
        if np.isfinite(t).any():
            taus[name] = t[np.isfinite(t)]
    n_groups = int(sum(len(t) for t in taus.values()))
    out = {"per_dimension": {k: float(t.mean()) for k, t in taus.items()}, "groups": n_groups,
           "effect": float("nan"), "lo": float("nan"), "hi": float("nan")}
    if n_groups < MIN_MATCHED_GROUPS:
        return out
    out["effect"] = float(np.mean([t.mean() for t in taus.values()]))
    if n_boot:
        rng = np.random.default_rng(seed)
        boot = np.mean([t[rng.integers(0, len(t), (n_boot, len(t)))].mean(1) for t in taus.values()], axis=0)
        out["lo"], out["hi"] = (float(v) for v in np.quantile(boot, [0.025, 0.975]))
    return out


def correlation_observed(space, universes: Sequence[Mapping[str, Any]], x: np.ndarray, y: np.ndarray,
                         claim: Mapping[str, Any], n_boot: int, seed: int) -> dict[str, Any]:
    """Kendall tau (scipy) over the observed universes, with a bootstrap over universes,
    and granulated tau on matched universes where the design has any."""
    from scipy.stats import kendalltau

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    us = [u for u, k in zip(universes, ok) if k]
    x, y = x[ok], y[ok]
    if len(x) < 4:
        return too_few(n=int(len(x)))
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(x), (n_boot, len(x)))
    boot = kendall_tau(x[i], y[i])
    boot = boot[np.isfinite(boot)]
    out = {**summarise(boot, claim_sign(relation(claim))), "effect": float(kendalltau(x, y).statistic), "n": int(len(x))}
    matched = matched_granulated(space, us, x, y, n_boot, seed + 1)
    out["granulated_matched"] = matched["effect"]
    out["granulated_matched_lo"], out["granulated_matched_hi"] = matched["lo"], matched["hi"]
    out["granulated_matched_groups"] = matched["groups"]
    out["granulated_matched_dimensions"] = sorted(matched["per_dimension"])
    return out


# --- expected best ------------------------------------------------------------------------
def mean_max(values: np.ndarray, budgets: Sequence[int]) -> np.ndarray:
    """Expected maximum of ``k`` draws without replacement from ``values`` (last axis),
    for each ``k`` in ``budgets``: the unbiased estimator of Tang et al. (2020),
    ``sum_i v_(i) C(i-1, k-1) / C(n, k)`` over the sorted values ``v_(1) <= ... <= v_(n)``
    (the mean of the maximum over every subset of size ``k``)."""
    from scipy.special import gammaln

    v = np.sort(np.asarray(values, dtype=float), axis=-1)
    n = v.shape[-1]
    i = np.arange(1, n + 1)
    out = []
    for k in budgets:
        if k > n:
            raise ValueError(f"budget {k} exceeds the {n} values")
        with np.errstate(invalid="ignore"):
            logw = gammaln(i) - gammaln(k) - gammaln(i - k + 1) - (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))
        w = np.where(i >= k, np.exp(np.where(i >= k, logw, -np.inf)), 0.0)
        out.append(v @ w)
    return np.stack(out, axis=-1)


def expected_best_budgets(claim: Mapping[str, Any], n_a: int, n_b: int) -> list[int]:
    top = min(n_a, n_b, claim.get("max_budget") or min(n_a, n_b))
    return list(range(claim.get("min_budget", 1), top + 1))


def best_summary(diff: np.ndarray, sign: int, budgets: Sequence[int]) -> dict[str, Any]:
    """Summary of ``samples x budgets`` differences: the claim holds in a sample when the
    difference has the claimed sign at every budget; the effect is the difference at the
    budget least favourable to the claim."""
    worst = np.take_along_axis(diff, np.argmin(sign * diff, axis=1)[:, None], 1)[:, 0]
    return {**summarise(worst, sign), "budgets": list(budgets)}


def curve(samples: np.ndarray) -> dict[str, list]:
    lo, hi = np.quantile(samples, [0.025, 0.975], axis=0)
    return {"mean": samples.mean(0).tolist(), "lo": lo.tolist(), "hi": hi.tolist()}


def expected_best_observed(values: np.ndarray, groups: Sequence[Any], claim: Mapping[str, Any], n_boot: int,
                           seed: int) -> dict[str, Any]:
    """Expected-best curves of groups ``a`` and ``b`` from the observed universes, with a
    bootstrap over universes within each group."""
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=object)
    ok = np.isfinite(values)
    a = values[ok & np.isin(groups, list(claim["a"]))]
    b = values[ok & np.isin(groups, list(claim["b"]))]
    budgets = expected_best_budgets(claim, len(a), len(b))
    if not budgets or len(a) < 2 or len(b) < 2:
        return too_few(n_a=int(len(a)), n_b=int(len(b)), budgets=[])
    rng = np.random.default_rng(seed)
    ea = mean_max(rng.choice(a, (n_boot, len(a))), budgets)
    eb = mean_max(rng.choice(b, (n_boot, len(b))), budgets)
    sign = claim_sign(claim["relation"])
    out = best_summary(ea - eb, sign, budgets)
    point = mean_max(a, budgets) - mean_max(b, budgets)
    out["effect"] = float(point[np.argmin(sign * point)])
    return {**out, "n_a": int(len(a)), "n_b": int(len(b)), "curve_a": {**curve(ea), "point": mean_max(a, budgets).tolist()},
            "curve_b": {**curve(eb), "point": mean_max(b, budgets).tolist()}}


def expected_best_gp(model, space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]], n_samples: int,
                     seed: int, noise_sd: float, budgets: Sequence[int],
                     value_range: tuple[float, float] | None = None) -> dict[str, Any]:
    """Expected-best curves of the surrogate: for each posterior sample plus observation
    noise of one seed (``noise_sd``), the expected best of ``k`` universes drawn at
    random from each group's part of the reference set. A maximum is sensitive to the
    Gaussian tails, so draws are clipped to the metric's ``value_range`` (accuracy
    cannot pass 1)."""
    if not budgets:
        return too_few(budgets=[])
    f = joint_samples(model, space, comparison_universes(space, claim, base), n_samples, seed)
    f = f + noise_sd * np.random.default_rng(seed).standard_normal(f.shape)
    if value_range is not None:
        f = np.clip(f, *value_range)
    na = len(claim["a"]) * len(base)
    ea, eb = mean_max(f[:, :na], budgets), mean_max(f[:, na:], budgets)
    out = best_summary(ea - eb, claim_sign(claim["relation"]), budgets)
    return {**out, "curve_a": curve(ea), "curve_b": curve(eb), "noise_sd": float(noise_sd)}


# --- the two answers side by side ----------------------------------------------------
def judge(gp: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """Put the two verdicts side by side; say so when they disagree instead of choosing.

    ``agree`` is None when the observed universes are too few to cross-check.
    """
    if gp["verdict"] == TOO_FEW:
        return {"agree": None, "summary": f"no surrogate (too few universes); observed universes say {observed['verdict']}"}
    if observed["verdict"] == TOO_FEW:
        return {"agree": None, "summary": f"GP says {gp['verdict']}; too few observed universes to cross-check"}
    if gp["verdict"] == observed["verdict"]:
        return {"agree": True, "summary": f"{gp['verdict']} (GP and observed universes agree)"}
    return {
        "agree": False,
        "summary": f"GP says {gp['verdict']}, observed universes say {observed['verdict']}: they disagree",
    }
