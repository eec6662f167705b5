"""Claim types: one module each, found by the claim's ``type`` (``comparison`` when absent).

Each module (:mod:`.comparison`, :mod:`.trend`, :mod:`.correlation`,
:mod:`.expected_best`) holds everything about its type: ``NAME``, ``STATISTIC`` (what
its effect is), ``metrics(claim)``, ``statement(claim)``, ``check(claim, key, checks)``
(the config checks that depend on the space and metrics), ``analyse(claim, ctx, i,
influence)`` (the GP's answer from joint posterior samples, the observed universes'
model-free answer, their judgement and the data its figures draw) and ``rows(result)``
(its lines of the summary table). Adding a claim type means one module here plus its
entry in the config schema.

Every verdict has two answers, put side by side by :func:`.common.judge`: the GP's, from
joint posterior samples of the surrogate (sampled functions, never marginal variances
alone), and the observed universes', a bootstrap over universes (their seeds averaged).
Thresholds: :mod:`multiverse.stats`.
"""

from __future__ import annotations

from typing import Any, Mapping

from multiverse.claims import comparison, correlation, expected_best, trend

TYPES = {m.NAME: m for m in (comparison, trend, correlation, expected_best)}


def claim_type(claim: Mapping[str, Any]) -> str:
    return claim.get("type", "comparison")


def kind(claim: Mapping[str, Any]):
    """The module of the claim's type."""
    return TYPES[claim_type(claim)]
