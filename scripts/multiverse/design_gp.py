"""The GP rounds' machinery (``gp-ivr``; ``gp-claims`` builds on it in
:mod:`multiverse.design_claims`): a GP per outcome on the finished universes, the
greedy batch that lowers the integrated posterior variance, and the randomised draws
whose probabilities follow the surrogate's uncertainty. The strategies themselves,
and which one a study runs, are :mod:`multiverse.design`'s.

Why not ``optimize_acqf`` on BoTorch's ``qNegIntegratedPosteriorVariance``: speed
(``benchmarks/design_speed.py``; its table is in docs/benchmarks.md), almost all of its time
in the acquisition optimiser. For a GP, adding a point ``c`` with noise ``s2`` lowers the posterior
covariance by the rank-one term ``C[:, c] C[c, :] / (C[c, c] + s2)`` (the variance does
not depend on the value observed), so the IPV reduction of every candidate is one
matrix expression and the greedy batch is ``q`` rank-one updates. The score equals
BoTorch's qNIPV for the same points (tested in ``tests/test_design.py``).

Replicates: with ``design.replicates: r >= 2`` the design reads ``r`` seeds of every
earlier universe, and each outcome's GP gets each universe's mean and its observed
noise (``train_Yvar``: the seeds' variance, shrunk towards the pooled variance, over
the number of seeds). Every finished universe then also competes as a candidate: *r
more seeds of it*, which lowers its noise like any new observation at that point.

Rule: each pick of a round is the best replicate instead of the best new universe
when the replicate's reduction of the integrated posterior variance is at least
``rho`` times the new universe's, where ``rho = signal / (signal + noise)`` is the
share of signal in one observation (signal: the variance of the universes' means
less their mean noise; noise: the pooled seed variance over ``r``; averaged over the
outcomes).
With little noise ``rho`` is near 1 and a replicate must beat every new universe
outright (it rarely does: the posterior is already tight at an observed point); where
noise dominates ``rho`` is small and a replicate is taken as soon as it does a
fraction ``rho`` as well, since new points near existing ones teach about as much
about the mean, while more seeds also firm up the noise estimate that the greedy
variance reduction takes as known (after Binois et al. 2019, who find replication
optimal for integrated variance where noise is large).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from multiverse.claims import kind
from multiverse.design import Chosen, Round, sobol
from multiverse.gp import (
    MIN_FIT,
    features,
    fit_gp,
    lengthscales,
    noise_variance,
    outcome_scale,
)
from multiverse.ids import derive_seed
from multiverse.space import SearchSpace
from multiverse.spec.claims import claim_metrics, spec_of
from multiverse.spec.records import Claim
from multiverse.spec.strategies import GP_IVR
from multiverse.stats import seed_noise


def greedy_ivr(
    covs: Sequence["torch.Tensor"],
    noises: Sequence["torch.Tensor | float"],
    n_ref: int,
    q: int,
    allowed: "torch.Tensor",
    replicate: "torch.Tensor | None" = None,
    ratio: float = 1.0,
) -> tuple[list[int], list[float]]:
    """Greedy batch minimising the mean integrated posterior variance over outcomes.

    Args:
        covs: per outcome, the ``(n_ref + n_cand) x (n_ref + n_cand)`` latent posterior
            covariance of the reference points followed by the candidates, in
            standardised outcome units (so outcomes are comparable).
        noises: per outcome, the noise variance of an observation at each candidate in
            the same units: a scalar, or ``n_cand`` values.
        n_ref: number of reference points (the integration set).
        q: batch size.
        allowed: ``n_cand`` booleans; False for candidates that must not be chosen.
        replicate: ``n_cand`` booleans, True for candidates that add seeds to an
            existing universe. The best of them is taken when its variance reduction
            is at least ``ratio`` times the best new candidate's.

    Returns:
        Candidate indices in the order chosen, and the mean reference variance
        (averaged over outcomes) before the batch and after each pick.
    """
    covs = [c.clone() for c in covs]
    noises = [torch.as_tensor(s2, dtype=covs[0].dtype).expand(len(allowed)) for s2 in noises]
    allowed = allowed.clone()
    replicate = torch.zeros_like(allowed) if replicate is None else replicate
    ipv = [float(np.mean([c.diagonal()[:n_ref].mean().item() for c in covs]))]
    picks: list[int] = []
    for _ in range(min(q, int(allowed.sum()))):
        score = torch.zeros(len(allowed), dtype=covs[0].dtype)
        for c, s2 in zip(covs, noises):
            cross = c[:n_ref, n_ref:]  # n_ref x n_cand
            score += (cross**2).mean(0) / (c.diagonal()[n_ref:] + s2)
        new = torch.where(allowed & ~replicate, score, -torch.inf)
        rep = torch.where(allowed & replicate, score, -torch.inf)
        j = int(torch.argmax(new))
        if rep.max() > -torch.inf and (new.max() == -torch.inf or rep.max() >= ratio * new.max()):
            j = int(torch.argmax(rep))
        picks.append(j)
        allowed[j] = False
        for c, s2 in zip(covs, noises):
            col = c[:, n_ref + j].clone()
            c -= torch.outer(col, col) / (col[n_ref + j] + s2[j])
        ipv.append(float(np.mean([c.diagonal()[:n_ref].mean().item() for c in covs])))
    return picks, ipv


@dataclass
class OutcomeFit:
    """A design GP of one outcome (:func:`fit_outcomes`): the model, each universe's mean
    over its seeds and observed noise of it (``yvar``, None with one seed read), the
    per-seed and pooled seed variances, the outcome's standardising scale, the noise
    variance of a new universe's observation in standardised units (the learned noise;
    with observed noise, the pooled seed variance over the ``replicates`` seeds it is
    trained with), and the round's diagnostics of it."""

    model: Any
    mean: np.ndarray
    yvar: np.ndarray | None
    per_seed: np.ndarray
    pooled: float
    scale: float
    noise: Any
    info: dict


def fit_outcomes(space: SearchSpace, observed: Sequence[Mapping[str, Any]], outcomes: Mapping[str, Any], seed: int,
                 replicates: int = 1, categorical: str = "onehot") -> dict[str, OutcomeFit]:
    """The design's GP of each outcome (``outcomes``: name -> per universe one value or an
    ``n_seeds`` row), on every finished universe (:func:`seed_noise`; observed noise with
    ``replicates >= 2``)."""
    fits = {}
    for k, (name, y) in enumerate(outcomes.items()):
        y = np.asarray(y, dtype=float).reshape(len(observed), -1)
        mean, yvar, per_seed, pooled = seed_noise(y)
        yvar = yvar if replicates >= 2 else None
        model = fit_gp(space, observed, mean, derive_seed(seed, 10 + k), yvar=yvar, categorical=categorical)
        scale = outcome_scale(model)
        noise = noise_variance(model).mean() if yvar is None else torch.as_tensor(pooled / replicates / scale**2)
        fits[name] = OutcomeFit(model, mean, yvar, per_seed, pooled, scale, noise, {
            "n_fit": int(np.isfinite(mean).sum()),
            "noise": "observed (train_Yvar from seeds)" if yvar is not None else "learned (homoscedastic)",
            "noise_variance_standardised": float(noise),  # gp_ivr_round: its candidates' mean
            "lengthscales": lengthscales(model, space),
        })
    return fits


def candidates(space: SearchSpace, observed: Sequence[Mapping[str, Any]], n_candidates: int, seed: int) -> list[dict]:
    """The round's candidate universes: Sobol points over the numeric dimensions crossed
    with every categorical level combination, less the finished ones."""
    done = {space.key(u) for u in observed}
    return list({space.key(u): u for u in space.enumerated(n_candidates, derive_seed(seed, 1))
                 if space.key(u) not in done}.values())


def gp_ivr_round(
    space: SearchSpace,
    observed: Sequence[Mapping[str, Any]],
    outcomes: Mapping[str, Sequence[float] | np.ndarray],
    n: int,
    seed: int,
    n_candidates: int,
    n_reference: int,
    replicates: int = 1,
    categorical: str = "onehot",
) -> tuple[list[dict], list[int | None], dict[str, Any]]:
    """Choose ``n`` universes by greedy IPV reduction over every outcome's GP.

    Args:
        observed: parameters of every finished universe, once each (failed ones
            included: they are never proposed again, and their non-finite outcomes
            are left out of the GP).
        outcomes: outcome name -> per universe one value, or ``n_seeds`` values
            (an ``n_universes x n_seeds`` array, NaN-padded).
        n_candidates / n_reference: Sobol points over the numeric dimensions,
            each crossed with every categorical level combination.
        replicates: seeds read of each universe (and trained by a new one); with 2 or
            more the GPs use the observed seed noise and finished universes are
            candidates for ``replicates`` more seeds.

    Returns:
        The chosen universes, for each the index into ``observed`` of the universe it
        replicates (None for a new universe), and diagnostics.
    """
    cand = candidates(space, observed, n_candidates, seed)
    ref = space.enumerated(n_reference, derive_seed(seed, 2))
    fits = fit_outcomes(space, observed, outcomes, seed, replicates, categorical)
    # a finished universe with a finite mean of every outcome can be replicated
    repl = [i for i in range(len(observed)) if all(np.isfinite(f.mean[i]) for f in fits.values())] if replicates >= 2 else []
    points = ref + cand + [observed[i] for i in repl]
    covs, noises, signal = [], [], []
    for name, f in fits.items():
        with torch.no_grad():
            cov = f.model.posterior(features(space, points, f.model)).distribution.covariance_matrix
        covs.append(cov / f.scale**2)
        noise = f.noise.expand(len(cand))
        if f.yvar is not None:  # a replicate: its own seed noise, over r more seeds
            noise = torch.cat([noise, torch.as_tensor(f.per_seed[repl] / replicates / f.scale**2)])
        noises.append(noise)
        f.info["noise_variance_standardised"] = float(noise.mean())
        if f.yvar is None:  # no observed noise: no replicates, the ratio does not matter
            signal.append(1.0)
        else:  # method of moments: the spread of the universes' means less their own noise
            between = max(float(np.nanvar(f.mean) - np.nanmean(f.yvar)), 0.0)
            signal.append(between / (between + f.pooled / replicates))
    info = {name: f.info for name, f in fits.items()}
    allowed = torch.ones(len(cand) + len(repl), dtype=torch.bool)
    is_replicate = torch.arange(len(allowed)) >= len(cand)
    # the replicate rule: the share of signal in an observation, signal / (signal + noise)
    ratio = float(np.mean(signal))
    picks, ipv = greedy_ivr(covs, noises, len(ref), n, allowed, is_replicate, ratio)
    chosen = [cand[j] if j < len(cand) else observed[repl[j - len(cand)]] for j in picks]
    replicate_of = [None if j < len(cand) else repl[j - len(cand)] for j in picks]
    diagnostics = {"outcomes": info, "mean_reference_variance": ipv, "n_candidates": len(cand),
                   "n_replicate_candidates": len(repl), "replicate_ratio": ratio if repl else None}
    return chosen, replicate_of, diagnostics


def sampling_probabilities(score: np.ndarray, uniform_share: float) -> np.ndarray:
    """Each candidate's probability of being drawn: ``score``'s share, mixed with the
    uniform ``1 / M`` so that no probability falls below ``uniform_share / M`` (no
    universe's weight exceeds ``1 / uniform_share``)."""
    score = np.clip(np.nan_to_num(np.asarray(score, dtype=float), nan=0.0), 0.0, None)
    M = len(score)
    share = score / score.sum() if score.sum() > 0 else np.full(M, 1.0 / M)
    return (1.0 - uniform_share) * share + uniform_share / M


def randomised_draws(space: SearchSpace, score, n: int, seed: int, n_candidates: int,
                     uniform_share: float) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """A randomised round: ``n`` independent draws from a uniform candidate set (Sobol
    points over the numeric dimensions crossed with every level combination, finished
    universes included, so that the set stays a uniform sample of the multiverse), each
    candidate with probability :func:`sampling_probabilities` of ``score(candidates)``.
    Active statistical inference (Zrnic & Candès 2024) draws where the surrogate is
    unsure, with probabilities it knows, so that the design-based answer
    (:mod:`multiverse.estimators`) can weight each universe by their inverse.

    Returns the drawn universes (a candidate drawn twice is trained twice, as two
    independent draws), for each ``{"probability", "candidates", "weight", "draws"}``
    (``weight = 1 / (M p)``: the inverse of its density relative to the uniform
    multiverse), and diagnostics."""
    cand = space.enumerated(n_candidates, derive_seed(seed, 1))
    p = sampling_probabilities(score(cand), uniform_share)
    rng = np.random.default_rng(derive_seed(seed, 7))
    picks = rng.choice(len(cand), size=n, p=p)
    M = len(cand)
    info = [{"probability": float(p[j]), "candidates": M, "weight": float(1.0 / (M * p[j])), "draws": 1} for j in picks]
    diagnostics = {"sampling": "randomised", "candidates": M, "probability_sum": float(p.sum()),
                   "uniform_share": uniform_share, "weight_range": [float(1 / (M * p.max())), float(1 / (M * p.min()))]}
    return [dict(cand[j]) for j in picks], info, diagnostics


def predictive_sd(fits: Mapping[str, OutcomeFit], space: SearchSpace, universes: Sequence[Mapping[str, Any]],
                  weights: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The root mean standardised predictive variance (posterior plus a new
    observation's noise) of the outcomes at ``universes``, each outcome's variance
    times its ``weights`` (default 1): what a randomised round's probabilities follow."""
    total = np.zeros(len(universes))
    for name, f in fits.items():
        with torch.no_grad():
            var = f.model.posterior(features(space, universes, f.model)).variance.reshape(-1).numpy()
        v = var / f.scale**2 + float(f.noise)
        total += v * (1.0 if weights is None else np.asarray(weights[name], dtype=float) ** 2)
    return np.sqrt(total / max(1, len(fits)))


# --- the GP strategies' rounds (multiverse.spec.strategies) --------------------------
def fittable(r: Round) -> dict:
    """The outcomes of round ``r``'s universes a surrogate can be fitted to: at least
    ``MIN_FIT`` finite universes."""
    return {m: v for m, v in r.values.items() if np.isfinite(v).any(axis=1).sum() >= MIN_FIT}


def gp_round(choose: Callable[[Round, dict], Chosen]) -> Callable[[Round], Chosen]:
    """A GP strategy: Sobol in round 0 and while fewer than ``MIN_FIT`` universes have a
    finite outcome; a randomised round with ``design.sampling: randomised``; else ``choose``."""

    def strategy(r: Round) -> Chosen:
        finite = fittable(r)
        if r.index == 0 or not finite:
            return sobol(r, {"fallback": f"fewer than {MIN_FIT} finite outcomes to fit a GP"} if r.index > 0 else {})
        if r.design.get("sampling") == "randomised":
            return randomised_round(r.space, r.universes, finite, r.claims or None, r.n,
                                    derive_seed(r.seed, r.index), r.design)
        return choose(r, finite)

    strategy.__name__ = strategy.__qualname__ = choose.__name__
    strategy.__doc__ = choose.__doc__
    return strategy


@gp_round
def gp_ivr(r: Round, finite: dict) -> Chosen:
    """Greedy reduction of the integrated posterior variance of every outcome's GP
    (:func:`multiverse.design_gp.gp_ivr_round`)."""
    d = r.design
    chosen, repl, info = gp_ivr_round(r.space, r.universes, finite, r.n, derive_seed(r.seed, r.index),
                                      d["candidates"], d["reference"], d["replicates"], d["categorical"])
    return chosen, [None if i is None else r.ids[i] for i in repl], {"strategy": GP_IVR.name, **info}


def claim_relevance(space: SearchSpace, claims: Sequence[Claim], universes: Sequence[Mapping[str, Any]],
                    ) -> dict[str, np.ndarray]:
    """How much each universe's residual of each claim metric weighs in the claims'
    statistics, up to a constant (each claim type's ``relevance``: a comparison's or
    expected best's universes in its two groups, a trend's by their distance from the
    middle of its dimension, a correlation's all). Per metric, the root sum of squares
    over the claims that read it."""
    out: dict[str, np.ndarray] = {}
    for c in claims:
        r = kind(c).relevance(space, c, universes)
        for m in spec_of(c).metrics(c):
            out[m] = np.sqrt(out.get(m, 0.0) ** 2 + r**2)
    return out


def randomised_round(space: SearchSpace, observed: Sequence[Mapping[str, Any]], outcomes: Mapping[str, Any],
                     claims: Sequence[Claim] | None, n: int, seed: int, design: Mapping[str, Any],
                     ) -> tuple[list[dict], list[None], dict[str, Any]]:
    """A randomised GP round (``design.sampling: randomised``): :func:`randomised_draws`
    with probabilities that follow the surrogate's predictive uncertainty: under gp-ivr,
    of the design's outcomes; under gp-claims (``claims``), of the claims' metrics, each
    universe's weighted by how much it weighs in the claims' statistics
    (:func:`claim_relevance`). Mixed with uniform by ``design.uniform_share``."""
    fits = fit_outcomes(space, observed, outcomes, seed, 1, design["categorical"])
    if claims:
        metrics = [m for m in claim_metrics(claims) if m in fits]
        fits = {m: fits[m] for m in metrics} or fits
        score = lambda cand: predictive_sd(fits, space, cand, claim_relevance(space, claims, cand) if metrics else None)  # noqa: E731
    else:
        fits = {m: f for m, f in fits.items() if m in design.get("outcomes", fits)} or fits
        score = lambda cand: predictive_sd(fits, space, cand)  # noqa: E731
    chosen, info, diag = randomised_draws(space, score, n, seed, design["candidates"], design["uniform_share"])
    return chosen, [None] * n, {"strategy": design["strategy"], "outcomes": {m: f.info for m, f in fits.items()},
                                "draws": info, **diag}
