"""Claim types: one module each, found by the claim's ``type`` (``comparison`` when absent).

Each module (:mod:`.comparison`, :mod:`.trend`, :mod:`.correlation`,
:mod:`.expected_best`) holds everything about its type, the names of the
:class:`.contract.ClaimType` protocol: what it says and checks, its analysis (a
:class:`.contract.ClaimResult`), its cells of the summary table, its design target, its figures and its statistic on a
full grid. Adding a claim type means one module here, its entry in :data:`TYPES` and
its entry in the config schema.

Every verdict has two answers, put side by side by :func:`.common.judge`: the GP's, from
joint posterior samples of the surrogate (sampled functions, never marginal variances
alone), and the observed universes', a bootstrap over universes (their seeds averaged).
Thresholds: :mod:`multiverse.stats`.
"""

from __future__ import annotations

from typing import Any, Mapping

from multiverse.claims import comparison, correlation, expected_best, trend
from multiverse.claims.contract import ClaimType

#: The claim types by their config ``type``: each module keeps :class:`ClaimType`.
TYPES: dict[str, ClaimType] = {m.NAME: m for m in (comparison, trend, correlation, expected_best)}


def claim_type(claim: Mapping[str, Any]) -> str:
    return claim.get("type", "comparison")


def kind(claim: Mapping[str, Any]) -> ClaimType:
    """The module of the claim's type."""
    return TYPES[claim_type(claim)]
