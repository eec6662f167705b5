"""The records that cross module boundaries, as typed dicts: a claim as the config
writes it, a universe as a design file holds it, and one answer to a claim.

They stay dicts (JSON in, JSON out: design files, claims.json) and type the places
where they are passed from module to module."""

from __future__ import annotations

from typing import Any, TypedDict


class Claim(TypedDict, total=False):
    """One entry of the config's ``claims`` (workflow/schemas/config.schema.yaml): its
    ``name`` and ``type`` (``comparison`` when absent), the metric(s) it reads and its
    type's own keys. :mod:`multiverse.spec.claims` says which keys each type needs."""

    name: str
    type: str
    statement: str
    metric: str
    dimension: str
    a: list[Any]
    b: list[Any]
    relation: str
    margin: float
    direction: str
    given: list[str]
    scaled: dict[str, Any]
    x: str
    y: str
    min_budget: int
    max_budget: int


class Universe(TypedDict, total=False):
    """One universe of a design file (:func:`multiverse.design.design_state`): its id,
    round and place in it, its shard and slot, its training seed, its ``params`` (the
    choices), the universe it replicates and how it was drawn (``sampling``,
    ``probability`` among ``candidates``, inverse-probability ``weight``, ``draws``)."""

    id: str
    round: int
    index: int
    shard: int
    slot: int
    seed: int
    replicate_of: str | None
    params: dict[str, Any]
    sampling: str
    probability: float | None
    candidates: int | None
    weight: float | None
    draws: int | None


class Answer(TypedDict, total=False):
    """One answer to a claim (the GP's, the observed universes' or the design-based one):
    what :func:`multiverse.stats.summarise` gives (``effect``, ``effect_lo``,
    ``effect_hi``, ``p_holds``, ``p_equivalent``, ``verdict``, ``n``) and what its type
    adds (a comparison's ``regions`` and ``fraction_holds``, a correlation's
    ``granulated``, an expected best's ``budgets``...). Numbers stay numbers; claims.json
    writes them as they are."""

    effect: float
    effect_lo: float
    effect_hi: float
    p_holds: float
    p_equivalent: float | None
    verdict: str
    n: int
    reason: str
