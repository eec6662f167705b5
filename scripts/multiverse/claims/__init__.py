"""Claim types' analyses: one module each, found by the claim's ``type``
(:func:`multiverse.spec.claims.claim_type`; ``comparison`` when absent).

What a claim type is at parse time (its name, statistic, metrics, statement and
config check) is its :class:`multiverse.spec.claims.ClaimSpec`, in the registry
:data:`multiverse.spec.claims.SPECS`; each module here holds that spec as ``SPEC`` and
the rest of the :class:`.contract.ClaimType` protocol: its analysis (a
:class:`.contract.ClaimResult`), its cells of the summary table, its design target, its
figures and its statistic on a full grid. Adding a claim type means its spec, one
module here, its entry in :data:`TYPES` and its entry in the config schema.

Each claim's one verdict (:mod:`.verdict`) rests on its design-based answer
(:mod:`multiverse.inference`: the GP's prediction corrected by the residuals of the
universes drawn with known probability), with the GP's model-based answer beside it,
which also says where the claim holds (:mod:`.regions`); the observed universes'
bootstrap is the model-free cross-check. Thresholds: :mod:`multiverse.stats`.
"""

from __future__ import annotations

from multiverse.claims import comparison, correlation, expected_best, trend
from multiverse.claims.contract import ClaimType
from multiverse.spec.claims import SPECS, claim_type
from multiverse.spec.records import Claim

#: The claim types' analyses by their config ``type``: each module keeps :class:`ClaimType`.
TYPES: dict[str, ClaimType] = {m.SPEC.name: m for m in (comparison, trend, correlation, expected_best)}
assert set(TYPES) == set(SPECS), "every claim type of multiverse.spec.claims.SPECS has its analysis module here"


def kind(claim: Claim) -> ClaimType:
    """The module of the claim's type."""
    return TYPES[claim_type(claim)]
