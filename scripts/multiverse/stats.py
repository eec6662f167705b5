"""Pure array statistics behind every verdict: intervals, the verdict thresholds (with an
optional region of practical equivalence), one bootstrap, slope, Kendall's tau and the
expected maximum (MeanMax).

Every function takes and returns numpy arrays or plain numbers; the leading axis of a
``samples`` array is the posterior sample or bootstrap replicate.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

#: A verdict's probability thresholds: ``holds`` at or above, ``fails`` at or below;
#: ``equivalent`` when P(|effect| < margin) is at or above ``P_HOLDS``.
P_HOLDS, P_FAILS = 0.95, 0.05
TOO_FEW = "too few universes"
VERDICTS = ("holds", "fails", "equivalent", "uncertain")

#: +1 when a relation claims the statistic is positive (``a`` larger, increasing,
#: positive correlation), -1 when negative.
SIGN = {">": 1, ">=": 1, "<": -1, "<=": -1, "increasing": 1, "decreasing": -1, "positive": 1, "negative": -1}
#: Relations that a tie satisfies (``a >= b`` holds when a == b).
INCLUSIVE = (">=", "<=")


def interval(x: np.ndarray, level: float = 0.95, axis: int = 0) -> tuple[Any, Any]:
    """The central ``level`` quantile interval of ``x`` along ``axis`` (floats for 1-D ``x``)."""
    a = (1 - level) / 2
    lo, hi = np.quantile(np.asarray(x, dtype=float), [a, 1 - a], axis=axis)
    return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)


def holds_mask(effects: np.ndarray, relation: str, margin: float = 0.0) -> np.ndarray:
    """Where each sample of an effect satisfies the claim.

    With ``margin`` m (the statistic's units): a strict relation (``>``, increasing,
    positive, ...) needs ``effect > m`` in the claimed direction (superiority); an
    inclusive one (``>=``, ``<=``) needs ``effect > -m`` (non-inferiority), and with
    no margin a tie (``effect == 0``) satisfies it.
    """
    e = SIGN[relation] * np.asarray(effects, dtype=float)
    if relation in INCLUSIVE:
        return e > -margin if margin > 0 else e >= 0
    return e > margin


def equivalent_mask(effects: np.ndarray, margin: float) -> np.ndarray:
    """Where each sample of an effect lies inside the region of practical equivalence."""
    return np.abs(np.asarray(effects, dtype=float)) < margin


def verdict(p_holds: float, p_equivalent: float | None = None) -> str:
    """``equivalent`` when P(|effect| < margin) >= P_HOLDS, else ``holds`` / ``fails`` /
    ``uncertain`` by P(holds)."""
    if p_equivalent is not None and p_equivalent >= P_HOLDS:
        return "equivalent"
    if p_holds >= P_HOLDS:
        return "holds"
    if p_holds <= P_FAILS:
        return "fails"
    return "uncertain"


def local_verdicts(p_holds: np.ndarray, p_equivalent: np.ndarray | None = None) -> np.ndarray:
    """:func:`verdict` of each point of a map of local probabilities."""
    p_holds = np.asarray(p_holds, dtype=float)
    pe = np.full_like(p_holds, np.nan) if p_equivalent is None else np.asarray(p_equivalent, dtype=float)
    return np.array([verdict(p, None if np.isnan(q) else q) for p, q in zip(p_holds.ravel(), pe.ravel())],
                    dtype=object).reshape(p_holds.shape)


def summarise(effects: np.ndarray, relation: str, margin: float = 0.0) -> dict[str, Any]:
    """Mean, 95% interval, P(holds) (and P(equivalent) with a margin) and the verdict, from
    ``samples`` of an effect."""
    effects = np.asarray(effects, dtype=float)
    effects = effects[np.isfinite(effects)]
    if len(effects) == 0:
        return too_few()
    lo, hi = interval(effects)
    p = float(np.mean(holds_mask(effects, relation, margin)))
    pe = float(np.mean(equivalent_mask(effects, margin))) if margin > 0 else None
    out = {"effect": float(np.mean(effects)), "effect_lo": lo, "effect_hi": hi, "p_holds": p,
           "verdict": verdict(p, pe)}
    if pe is not None:
        out["p_equivalent"] = pe
    return out


def too_few(**extra: Any) -> dict[str, Any]:
    nan = float("nan")
    return {**extra, "effect": nan, "effect_lo": nan, "effect_hi": nan, "p_holds": nan, "verdict": TOO_FEW}


def bootstrap(statistic: Callable[..., np.ndarray], groups: Sequence[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """A (stratified) bootstrap: each array of ``groups`` is resampled with replacement
    along its first axis, independently of the others, ``n_boot`` times at once, and
    ``statistic`` is called on the ``n_boot x n_g x ...`` resamples (vectorised over the
    leading axis). Returns its ``n_boot`` values. One group: a plain bootstrap over rows."""
    rng = np.random.default_rng(seed)
    resampled = [np.asarray(g)[rng.integers(0, len(g), (n_boot, len(g)))] for g in groups]
    return np.asarray(statistic(*resampled))


def reference_mean(local: np.ndarray, seed: int) -> np.ndarray:
    """``samples`` means of ``samples x points`` local effects, each over its own bootstrap
    resample of the points: an integral over a finite reference set then carries the
    set's own sampling error, not only the posterior's (conservative for a Sobol set)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, local.shape[1], local.shape)
    return np.take_along_axis(local, idx, 1).mean(1)


def slope(t: np.ndarray, f: np.ndarray, axis: int = -1) -> np.ndarray:
    """Least-squares slope of ``f`` against ``t`` along ``axis``."""
    f = np.moveaxis(f, axis, -1)
    tc = t - t.mean()
    return (f - f.mean(-1, keepdims=True)) @ tc / (tc @ tc)


def regression_coefficients(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares coefficients of ``... x n`` ``y`` on ``... x n x p`` ``X``, vectorised
    over leading axes (NaN where ``X`` is rank-deficient)."""
    xtx = np.swapaxes(X, -1, -2) @ X
    xty = np.swapaxes(X, -1, -2) @ y[..., None]
    ok = np.linalg.matrix_rank(xtx) == X.shape[-1]
    out = np.full(xty.shape[:-1], np.nan)
    if np.ndim(ok) == 0:
        return np.linalg.solve(xtx, xty)[..., 0] if ok else out
    out[ok] = np.linalg.solve(xtx[ok], xty[ok])[..., 0]
    return out


def kendall_tau(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b along the last axis, vectorised over leading axes (NaN without pairs)."""
    dx = np.sign(x[..., :, None] - x[..., None, :])
    dy = np.sign(y[..., :, None] - y[..., None, :])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (dx * dy).sum((-1, -2)) / np.sqrt((dx**2).sum((-1, -2)) * (dy**2).sum((-1, -2)))


def mean_max_weights(n: int, k: int) -> np.ndarray:
    """The weights of Tang et al.'s (2020) estimator of the expected maximum of ``k`` of
    ``n`` values, on the values sorted ascending: ``C(i-1, k-1) / C(n, k)`` for the i-th."""
    from scipy.special import gammaln  # deferred: scipy.special takes ~0.2 s to import; the rest of stats is numpy

    if k > n:
        raise ValueError(f"budget {k} exceeds the {n} values")
    i = np.arange(1, n + 1)
    with np.errstate(invalid="ignore"):
        logw = gammaln(i) - gammaln(k) - gammaln(i - k + 1) - (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))
    return np.where(i >= k, np.exp(np.where(i >= k, logw, -np.inf)), 0.0)


def mean_max(values: np.ndarray, budgets: Sequence[int]) -> np.ndarray:
    """Expected maximum of ``k`` draws without replacement from ``values`` (last axis),
    for each ``k`` in ``budgets``: the unbiased estimator of Tang et al. (2020),
    ``sum_i v_(i) C(i-1, k-1) / C(n, k)`` over the sorted values ``v_(1) <= ... <= v_(n)``
    (the mean of the maximum over every subset of size ``k``; :func:`mean_max_weights`)."""
    v = np.sort(np.asarray(values, dtype=float), axis=-1)
    return np.stack([v @ mean_max_weights(v.shape[-1], k) for k in budgets], axis=-1)


def band(samples: np.ndarray) -> dict[str, list]:
    """Mean and 95% band of ``samples x points``, as lists (for figures and claims.json)."""
    lo, hi = interval(samples, axis=0)
    return {"mean": np.mean(samples, 0).tolist(), "lo": np.asarray(lo).tolist(), "hi": np.asarray(hi).tolist()}


#: Prior degrees of freedom of the pooled seed variance when a universe's own seed
#: variance is shrunk towards it (two seeds alone give a very noisy variance).
NOISE_PRIOR_DOF = 2.0


def seed_noise(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Mean, observed noise of the mean, per-seed noise and pooled per-seed variance.

    Args:
        values: ``n_universes x n_seeds`` (NaN for missing seeds).

    Each universe's per-seed variance is its seeds' sample variance shrunk towards the
    variance pooled over universes (``NOISE_PRIOR_DOF`` prior degrees of freedom);
    the noise of its mean is that over its number of finite seeds.
    """
    n = np.isfinite(values).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(np.where(n[:, None] > 0, values, 0.0), axis=1)
        mean[n == 0] = np.nan
        dev = np.nansum((values - mean[:, None]) ** 2, axis=1)
    dof = np.maximum(n - 1, 0)
    spread = float(np.nanvar(mean[n > 0])) if (n > 0).any() else 0.0
    pooled = float(dev[dof > 0].sum() / dof.sum()) if dof.sum() else 0.0
    pooled = max(pooled, 1e-6 * spread, 1e-12)
    per_seed = (dev + NOISE_PRIOR_DOF * pooled) / (dof + NOISE_PRIOR_DOF)
    with np.errstate(invalid="ignore", divide="ignore"):
        yvar = np.where(n > 0, per_seed / np.maximum(n, 1), np.nan)
    return mean, yvar, per_seed, pooled
