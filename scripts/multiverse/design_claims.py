"""Claim-targeted design rounds (``design.strategy: gp-claims``): universes that settle the
config's claims, not a surrogate that is good everywhere.

Each claim type says what a new universe should make surer (its ``design_target``,
:class:`multiverse.claims.context.DesignTarget`), as weighted sums of one metric's GP:

- **(a) the claim's statistic**: a comparison's effect and a trend's slope are weighted
  sums of the metric over the claim's reference points; an expected best's difference at
  its least favourable budget is one too once linearised at the posterior mean's order.
  A universe ``c`` (noise ``s2``) lowers the statistic's posterior variance by
  ``cov(stat, f(c))^2 / (var f(c) + s2)``, scored relative to that variance;
- **(b) where it holds**: each reference point's local effect ``L`` (mean ``mu``, sd
  ``sigma``) satisfies the claim with probability ``p = Phi(a)``, ``a = (sign mu -
  t) / sigma`` (``t``: the claim's margin, the verdicts' threshold). After observing
  ``c`` the mean moves by a normal amount of variance ``gamma = cov(L, f(c))^2 / (var
  f(c) + s2)``, so the expected Bernoulli variance ``E[p'(1 - p')] = p - Phi2(a, a;
  gamma / sigma^2)`` (Bect et al. 2012's SUR step; ``Phi2`` the bivariate normal CDF,
  BoTorch's ``bvnu``). The reduction ``Phi2(a, a; rho) - p^2``, averaged over the
  reference points, is scored relative to their mean ``p (1 - p)``;
- a correlation's tau is not a weighted sum: the posterior variance of each of its two
  metrics over the reference set stands in (the integrated variance, relative).

A candidate's score is the mean over claims of the mean of its parts (comparison and
trend: (a) and (b); expected best: (a); correlation: both metrics' integrated
variance), each relative, so claims on different scales count alike. A round takes its
claim picks greedily, each pick conditioning every covariance on the chosen universe
(rank-one; the mean is held, as in gp-ivr), then ``explore_share`` of the batch
(rounded half up) by gp-ivr's integrated variance over the reference set
(:func:`multiverse.design_gp.greedy_ivr`'s score), so the surrogate stays sound everywhere
(the LOO diagnostics and Sobol indices read it). A pick whose claims score is zero
everywhere (every claim settled) falls back to the exploration score. With no claims in
the config the round is gp-ivr and says so. Replicate candidates are not offered.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from botorch.utils.probability.bvn import bvnu
from torch.distributions import Normal

from multiverse import stats
from multiverse.claims import kind
from multiverse.design import Chosen, Round
from multiverse.design_gp import candidates, fit_outcomes, gp_ivr_round, gp_round
from multiverse.gp import features, posterior_mean_std
from multiverse.ids import derive_seed
from multiverse.space import SearchSpace
from multiverse.spec.claims import spec_of
from multiverse.spec.records import Claim
from multiverse.spec.strategies import GP_CLAIMS

log = logging.getLogger(__name__)

#: Reference points per level combination of each claim's target (the report's default
#: reference is 64; fewer keep a round within the design's time target).
CLAIM_REFERENCE = 32


def n_explore(q: int, share: float) -> int:
    """Picks of a batch of ``q`` that go to exploration: ``share * q`` rounded half up."""
    return min(q, int(np.floor(share * q + 0.5)))


@dataclass
class Block:
    """One metric's joint posterior covariance over its rows (reference points for
    exploration, then each target's rows) and the candidates, in standardised units,
    and the noise of a new observation at each candidate."""

    cov: Any
    noise: Any
    n_rows: int

    def reduction(self, rows: slice | np.ndarray) -> Any:
        """``rows x candidates``: how much observing each candidate lowers each row's variance."""
        cross = self.cov[rows, self.n_rows:]
        return cross**2 / (self.cov.diagonal()[self.n_rows:] + self.noise)

    def variance(self, rows: slice | np.ndarray) -> Any:
        return self.cov.diagonal()[rows]

    def condition(self, j: int) -> None:
        """Condition on an observation at candidate ``j`` (rank one; the mean is held)."""
        col = self.cov[:, self.n_rows + j].clone()
        self.cov -= torch.outer(col, col) / (col[self.n_rows + j] + self.noise[j])


@dataclass
class Part:
    """One part of a claim's score: ``kind`` ``statistic`` (a), ``holds`` (b) or
    ``integrated``, on ``metric``'s block rows ``rows``; for ``holds``, the local
    effects' means and signed threshold in standardised units."""

    claim: str
    kind: str
    metric: str
    rows: slice
    mean: Any = None
    sign: float = 1.0
    threshold: float = 0.0


def bernoulli_reduction(mean, sign: float, threshold: float, variance, gamma):
    """``rows x candidates`` reductions of ``p (1 - p)`` (``p``: P(sign L > threshold) of
    a normal ``L``) by an observation that lowers ``var L`` by ``gamma``, in expectation
    over the observation: ``Phi2(a, a; gamma / var) - p^2`` (the module's (b)); and the
    rows' current ``p (1 - p)``."""
    sd = variance.clamp_min(1e-18).sqrt()
    a = ((sign * mean - threshold) / sd)[:, None].expand_as(gamma)
    p = Normal(0.0, 1.0).cdf(a)
    rho = (gamma / variance.clamp_min(1e-18)[:, None]).clamp(0.0, 1.0 - 1e-9)
    # Phi2(a, a; rho) = P(X < a, Y < a) = P(-X > -a, -Y > -a)
    joint = bvnu(rho.reshape(-1), -a.reshape(-1), -a.reshape(-1)).reshape(a.shape)
    return (joint - p**2).clamp_min(0.0), (p * (1 - p))[:, 0] if p.shape[1] else torch.zeros(len(mean))


def claims_score(parts: Sequence[Part], blocks: Mapping[str, Block], n_cand: int):
    """Each candidate's mean over claims of the mean relative reduction of its parts."""
    by_claim: dict[str, list] = {}
    for part in parts:
        b = blocks[part.metric]
        red, var = b.reduction(part.rows), b.variance(part.rows)
        if part.kind == "holds":
            red, now = bernoulli_reduction(part.mean, part.sign, part.threshold, var, red)
            total = now.sum()
        else:
            total = var.sum()
        score = red.sum(0) / total if total > 1e-12 else torch.zeros(n_cand, dtype=red.dtype)
        by_claim.setdefault(part.claim, []).append(score)
    return torch.stack([torch.stack(s).mean(0) for s in by_claim.values()]).mean(0)


def explore_score(blocks: Mapping[str, Block], outcomes: Sequence[str], n_ref: int):
    """gp-ivr's score: the mean over ``outcomes`` of each candidate's mean reduction of the
    reference points' variance (standardised units)."""
    return torch.stack([blocks[m].reduction(slice(0, n_ref)).mean(0) for m in outcomes]).mean(0)


def greedy_claims(parts: Sequence[Part], blocks: Mapping[str, Block], outcomes: Sequence[str], n_ref: int,
                  q: int, explore: int, allowed) -> tuple[list[int], list[str]]:
    """The batch: ``q - explore`` picks by :func:`claims_score`, then ``explore`` by
    :func:`explore_score`, each conditioning every block on the pick. Returns the picks
    and what chose each (``claims``, ``exploration``, or ``exploration (claims settled)``)."""
    allowed = allowed.clone()
    picks, why = [], []
    n_cand = len(allowed)
    for k in range(min(q, int(allowed.sum()))):
        reason = "claims" if k < q - explore else "exploration"
        score = claims_score(parts, blocks, n_cand) if reason == "claims" else None
        if score is None or float(torch.where(allowed, score, torch.zeros_like(score)).max()) <= 0.0:
            reason = "exploration" if score is None else "exploration (claims settled)"
            score = explore_score(blocks, outcomes, n_ref)
        j = int(torch.argmax(torch.where(allowed, score, torch.full_like(score, -torch.inf))))
        picks.append(j)
        why.append(reason)
        allowed[j] = False
        for b in blocks.values():
            b.condition(j)
    return picks, why


def block(fit, ref: Sequence[Mapping[str, Any]], targets, cand: Sequence[Mapping[str, Any]], space: SearchSpace,
          parts: list) -> Block:
    """One metric's :class:`Block`: its GP's joint posterior over the reference points
    ``ref`` (exploration rows, as they are), the ``targets``' points (turned into their
    weighted sums) and the candidates, standardised; appends each target's
    :class:`Part` s to ``parts``."""
    points = list(ref) + [p for t in targets for p in t.points] + list(cand)
    with torch.no_grad():
        post = fit.model.posterior(features(space, points, fit.model))
    C = post.distribution.covariance_matrix / fit.scale**2
    mu = post.mean.reshape(-1) / fit.scale
    n_r, n_c = len(ref), len(cand)
    n_t = len(points) - n_r - n_c
    r, t_, c = slice(0, n_r), slice(n_r, n_r + n_t), slice(n_r + n_t, None)
    weights, at, n_rows = [], 0, n_r
    for t in targets:
        pieces = [("statistic", t.statistic), ("holds", t.local)] if not t.integrated else [("integrated", None)]
        for kind_, w in pieces:
            if w is None and kind_ != "integrated":
                continue
            w = np.eye(len(t.points)) if w is None else np.asarray(w, dtype=float).reshape(len(t.points), -1)
            full = np.zeros((w.shape[1], n_t))
            full[:, at:at + len(t.points)] = w.T
            weights.append(full)
            part = Part(t.claim, kind_, t.metric, slice(n_rows, n_rows + w.shape[1]))
            if kind_ == "holds":
                part.mean = torch.as_tensor(w.T, dtype=C.dtype) @ mu[n_r + at:n_r + at + len(t.points)]
                part.sign = float(stats.SIGN[t.relation])
                part.threshold = (t.margin if t.relation not in stats.INCLUSIVE else -t.margin) / fit.scale
            parts.append(part)
            n_rows += w.shape[1]
        at += len(t.points)
    L = torch.as_tensor(np.concatenate(weights), dtype=C.dtype) if weights else torch.zeros(0, n_t, dtype=C.dtype)
    rows = torch.cat([torch.cat([C[r, r], C[r, t_] @ L.T], 1), torch.cat([L @ C[t_, r], L @ C[t_, t_] @ L.T], 1)])
    cross = torch.cat([C[r, c], L @ C[t_, c]])
    cov = torch.cat([torch.cat([rows, cross], 1), torch.cat([cross.T, C[c, c]], 1)])
    return Block(cov, fit.noise.to(C.dtype).expand(n_c), n_rows)


def gp_claims_round(
    space: SearchSpace,
    observed: Sequence[Mapping[str, Any]],
    outcomes: Mapping[str, Any],
    claims: Sequence[Claim],
    n: int,
    seed: int,
    n_candidates: int,
    n_reference: int,
    explore_share: float = 0.25,
    replicates: int = 1,
    categorical: str = "onehot",
    exploration: Sequence[str] | None = None,
) -> tuple[list[dict], list[None], dict[str, Any]]:
    """Choose ``n`` universes for the config's ``claims`` (the module's rule).

    Args:
        outcomes: metric -> per universe values (one or ``n_seeds`` each): the design's
            outcomes and every claim's metrics, each with at least ``MIN_FIT`` finite
            values (:func:`multiverse.design.design_round` passes only those).
        exploration: the outcomes of the exploration picks (the design's
            ``outcomes``; default all of ``outcomes``).

    Returns the chosen universes, ``None`` for each (no replicates) and diagnostics.
    """
    exploration = list(exploration or outcomes)
    if not claims:
        log.warning("design.strategy gp-claims: the config has no claims; this round is gp-ivr")
        chosen, repl, info = gp_ivr_round(space, observed, {m: outcomes[m] for m in exploration}, n, seed,
                                          n_candidates, n_reference, replicates, categorical)
        return chosen, repl, {**info, "fallback": "no claims in the config: gp-ivr"}
    fits = fit_outcomes(space, observed, outcomes, seed, replicates, categorical)

    def mean_at(metric: str, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        model = fits[metric].model
        return posterior_mean_std(model, features(space, points, model))[0]

    targets = []
    for i, claim in enumerate(claims):
        if all(m in fits for m in spec_of(claim).metrics(claim)):
            targets += kind(claim).design_target(space, claim, CLAIM_REFERENCE, derive_seed(seed, 20 + i), mean_at)
    skipped = sorted({c["name"] for c in claims} - {t.claim for t in targets})
    cand = candidates(space, observed, n_candidates, seed)
    ref = space.enumerated(n_reference, derive_seed(seed, 2))
    explore_on = [m for m in exploration if m in fits] or list(dict.fromkeys(t.metric for t in targets))
    blocks, parts = {}, []
    for metric in dict.fromkeys(explore_on + [t.metric for t in targets]):
        blocks[metric] = block(fits[metric], ref if metric in explore_on else [],
                               [t for t in targets if t.metric == metric], cand, space, parts)
    explore = n_explore(n, explore_share)
    if not parts:
        explore = n
    allowed = torch.ones(len(cand), dtype=torch.bool)
    picks, why = greedy_claims(parts, blocks, explore_on or list(blocks), len(ref), n, explore, allowed)
    info = {"outcomes": {m: f.info for m, f in fits.items()}, "n_candidates": len(cand),
            "explore_share": explore_share, "picks": why,
            "claims": sorted({p.claim for p in parts}), "claims_skipped": skipped}
    return [cand[j] for j in picks], [None] * len(picks), info


@gp_round
def gp_claims(r: Round, finite: dict) -> Chosen:
    """The claim-targeted round (:func:`multiverse.design_claims.gp_claims_round`)."""
    d = r.design
    chosen, repl, info = gp_claims_round(
        r.space, r.universes, finite, r.claims, r.n, derive_seed(r.seed, r.index), d["candidates"],
        d["reference"], d["explore_share"], d["replicates"], d["categorical"],
        exploration=[m for m in d.get("outcomes", []) if m in finite],
    )
    return chosen, repl, {"strategy": GP_CLAIMS.name, **info}
