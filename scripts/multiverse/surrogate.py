"""The report's surrogates: one GP per metric, on the metric's own warped scale, fitted on
one row per universe; and the model of divergence.

Surrogates are fitted on one row per universe: the mean over its seeds (replicates in
later rounds included), on the GP's scale (:class:`multiverse.gp.Warp`), with, where any
universe has two or more seeds, each mean's observed noise as fixed ``train_Yvar``
(:func:`multiverse.stats.seed_noise`), so the GP's uncertainty has the seeds' in it.
With one seed each, the GP learns the noise. A metric declared ``converged_only``
(:data:`multiverse.BUILTIN_METRICS`) is fitted on converged universes only.

Every claim, figure and index reads a surrogate through :meth:`Surrogate.sample` (joint
posterior samples on the metric's scale), so a warp is applied in one place.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from multiverse import declaration
from multiverse.gp import IDENTITY, MIN_FIT, Warp, features, fit_gp, joint_samples, noise_variance, outcome_scale, posterior_mean_std
from multiverse.ids import derive_seed
from multiverse.runtime import fork_map
from multiverse.space import SearchSpace
from multiverse.stats import seed_noise

#: The report's GP kernel (:data:`multiverse.gp.KERNELS`: its intervals are the best calibrated).
REPORT_KERNEL = "matern+linear"


def warp_for(metric: str, declared: Mapping[str, Any] | None = None) -> Warp:
    """The GP scale of a metric, from its declared range (:func:`multiverse.declaration`;
    ``declared``: the study's metrics, None for the built-in trainer's)."""
    low, high = declaration(metric, declared)["range"]
    return Warp(low, high)


@dataclass
class Surrogate:
    """A metric's GP, its scale and the per-universe data it was fitted on."""

    model: Any
    space: SearchSpace
    warp: Warp
    universes: list[dict]
    #: per-universe mean on the metric's own scale (NaN where not fitted on)
    mean: np.ndarray
    #: standard deviation of one seed's outcome around its universe's mean, on the GP's scale
    latent_noise_sd: float
    replicated: bool

    @classmethod
    def of(cls, model, space: SearchSpace, warp: Warp = IDENTITY, noise_sd: float = 0.0) -> "Surrogate":
        """A surrogate around a GP fitted elsewhere (on ``warp``'s scale)."""
        return cls(model, space, warp, [], np.array([]), noise_sd, False)

    def latent(self, universes: Sequence[Mapping[str, Any]], n: int, seed: int, batch: int = 1) -> np.ndarray:
        """``n x len(universes)`` joint posterior samples on the GP's own scale (``batch``:
        :func:`multiverse.gp.joint_samples`)."""
        return joint_samples(self.model, self.space, universes, n, seed, batch=batch)

    def sample(self, universes: Sequence[Mapping[str, Any]], n: int, seed: int, noise: float = 0.0,
               batch: int = 1) -> np.ndarray:
        """``n x len(universes)`` joint posterior samples on the metric's scale; ``noise``
        adds that multiple of one seed's observation noise (on the GP's scale, so the
        range still holds); ``batch`` samples consecutive blocks independently."""
        f = self.latent(universes, n, seed, batch)
        if noise:
            f = f + noise * self.latent_noise_sd * np.random.default_rng(seed).standard_normal(f.shape)
        return self.warp.inverse(f)

    def median(self, universes: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The marginal posterior median at each universe (the warped mean)."""
        m, _ = posterior_mean_std(self.model, features(self.space, universes, self.model))
        return self.warp.inverse(m)

    def quantiles(self, universes: Sequence[Mapping[str, Any]], q: float = 0.975) -> tuple[np.ndarray, np.ndarray]:
        """Marginal posterior ``1 - q`` and ``q`` quantiles (exact under the monotone warp)."""
        m, s = posterior_mean_std(self.model, features(self.space, universes, self.model))
        z = norm.ppf(q)
        return self.warp.inverse(m - z * s), self.warp.inverse(m + z * s)


def universes_of(df: pd.DataFrame, space: SearchSpace) -> list[dict]:
    return [space.universe(row) for row in df[space.names].to_dict("records")]


def per_universe(df: pd.DataFrame, space: SearchSpace, metric: str, declared: Mapping[str, Any] | None = None,
                 ) -> tuple[list[dict], np.ndarray]:
    """Universes (first row of each ``universe`` group) and an ``n x seeds`` array of
    the metric (NaN-padded; NaN also for a failed seed, and for a diverged one where
    the metric is declared ``converged_only``)."""
    converged_only = declaration(metric, declared)["converged_only"]
    groups = list(df.groupby("universe", sort=False))
    width = max(len(g) for _, g in groups)
    values = np.full((len(groups), width), np.nan)
    for i, (_, g) in enumerate(groups):
        v = g[metric].to_numpy(dtype=float)
        if converged_only and "status" in g:
            v = np.where(g["status"].to_numpy() == "diverged", np.nan, v)
        values[i, : len(g)] = v
    return universes_of(pd.DataFrame([g.iloc[0] for _, g in groups]), space), values


def universe_means(df: pd.DataFrame, space: SearchSpace, metric: str, declared: Mapping[str, Any] | None = None,
                   ) -> np.ndarray:
    """Each universe's mean over its finite seeds, on the metric's scale."""
    values = per_universe(df, space, metric, declared)[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a universe with no finite seed: NaN
        return np.nanmean(values, axis=1)


def fit_values(space: SearchSpace, universes: list[dict], values: np.ndarray, seed: int, warp: Warp = IDENTITY,
               warping: bool = False) -> Surrogate | None:
    """A GP of ``n x seeds`` ``values`` on the scale of ``warp`` (None with fewer than
    MIN_FIT universes with a finite value); ``warping``: with learned input warping
    (``report.input_warping``, :func:`multiverse.gp.input_transform`)."""
    latent = warp.forward(values)
    mean, yvar, _, pooled = seed_noise(latent)
    if np.isfinite(mean).sum() < MIN_FIT:
        return None
    replicated = bool((np.isfinite(values).sum(1) >= 2).any())
    model = fit_gp(space, universes, mean, seed, yvar=yvar if replicated else None, kernel=REPORT_KERNEL,
                   warping=warping)
    if replicated:
        noise_sd = float(np.sqrt(pooled))
    else:
        noise_sd = float(noise_variance(model).mean().sqrt()) * outcome_scale(model)
    with np.errstate(invalid="ignore"):
        observed = np.where(np.isfinite(mean), warp.inverse(mean), np.nan)
    return Surrogate(model, space, warp, universes, observed, noise_sd, replicated)


def fit_surrogate(df: pd.DataFrame, space: SearchSpace, metric: str, seed: int,
                  declared: Mapping[str, Any] | None = None, warping: bool = False) -> Surrogate | None:
    """A metric's GP on per-universe means, on its warped scale (``declared``: the
    study's metrics, :func:`multiverse.spec.study_metrics`; None: the built-in ones)."""
    universes, values = per_universe(df, space, metric, declared)
    return fit_values(space, universes, values, seed, warp_for(metric, declared), warping)


def fit_surrogates(df: pd.DataFrame, space: SearchSpace, metrics: Sequence[str], seed: int,
                   declared: Mapping[str, Any] | None = None, warping: bool = False,
                   workers: int = 1) -> dict[str, Surrogate | None]:
    """Each metric's :func:`fit_surrogate`, ``workers`` at a time
    (:func:`multiverse.runtime.fork_map`; each fit has its own seed)."""
    fits = fork_map([lambda i=i, m=m: fit_surrogate(df, space, m, derive_seed(seed, i), declared, warping)
                     for i, m in enumerate(metrics)], workers)
    return dict(zip(metrics, fits))


#: A reference point counts as converging where the divergence model's posterior
#: median probability of divergence is below this.
DIVERGENCE_CUTOFF = 0.5


def fit_divergence(df: pd.DataFrame, space: SearchSpace, seed: int) -> Surrogate | None:
    """The probability that a universe diverges, as a surrogate of the 0/1 divergence of
    each run on a logit scale (GP regression of the labels, a simple stand-in for a GP
    classifier: every sample is a probability in (0, 1)). None when no universe, or
    every universe, diverged."""
    if "status" not in df:
        return None
    runs = df[df["status"].isin(["ok", "diverged"])]
    if runs.empty:
        return None
    labels = runs.assign(diverged=(runs["status"] == "diverged").astype(float))
    universes, values = per_universe(labels, space, "diverged")
    frac = values[np.isfinite(values)]
    if not (np.nanmax(frac) > 0 and np.nanmin(frac) < 1):
        return None
    return fit_values(space, universes, values, seed, Warp(0.0, 1.0, margin=0.02))


def converging(divergence: Surrogate | None, universes: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Which of ``universes`` the divergence model expects to converge (all without one)."""
    if divergence is None:
        return np.ones(len(universes), dtype=bool)
    return divergence.median(universes) < DIVERGENCE_CUTOFF
