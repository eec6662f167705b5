"""Design rounds: which universes to train next.

Strategies (``design.strategy``), each reproducible from the study's seed:

- ``gp-ivr``: round 0 is a scrambled Sobol sample; later rounds explore. A
  GP per outcome is fitted to every finished universe, and the batch is chosen
  greedily from a large candidate set (Sobol points crossed with every categorical
  level) to minimise the *integrated posterior variance* (IPV) over a reference set
  that covers the space the same way, averaged over the outcomes in standardised units.
- ``sobol`` (the schema's default): one scrambled Sobol sequence, each round continuing
  it, so every universe counts in the design-based verdicts (docs/design_based.md).
- ``random``: independent uniform draws (log dimensions uniform in log space).
- ``grid``: a full factorial grid (``design.grid_levels`` values per numeric
  dimension), visited in a seeded random order, each round taking the next slice.

What each strategy is (whether it reads outcomes, how it draws, its settings) is
declared once, in :mod:`multiverse.spec.strategies`; this module holds the space-only
strategies' ``choose`` (:func:`sobol`, :func:`random`, :func:`grid`), the
:class:`Round` every ``choose`` takes and the design file (:func:`design_state`). The GP
rounds' ``choose`` and machinery are :mod:`multiverse.design_gp` (``gp-ivr``) and
:mod:`multiverse.design_claims` (``gp-claims``), imported only when such a round runs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from multiverse.ids import derive_seed, replicate_seed, universe_id
from multiverse.space import SearchSpace
from multiverse.spec.claims import claim_metrics
from multiverse.spec.records import Universe
from multiverse.spec.strategies import GRID, RANDOM, SOBOL, STRATEGIES


def universe_outcomes(
    space: SearchSpace, previous: Sequence[Mapping[str, Any]], outcomes: Sequence[str]
) -> tuple[list[dict], list[str], dict[str, np.ndarray]]:
    """Group the metrics records of earlier rounds by universe (a universe's seeds and
    its replicates in later rounds are one universe).

    Returns the universes' parameters, their ids (the first round's id), and per
    outcome an ``n_universes x n_seeds`` array of values, NaN-padded (NaN also for a
    failed seed).
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for p in previous:
        groups[space.key(p["params"])].append(p)
    universes, ids, values = [], [], {m: [] for m in outcomes}
    width = max((len(g) for g in groups.values()), default=1)
    for recs in groups.values():
        universes.append(space.canonical(recs[0]["params"]))
        ids.append(recs[0].get("replicate_of") or recs[0].get("id"))
        for m in outcomes:
            v = [float(r["metrics"][m]) for r in recs]
            values[m].append(v + [np.nan] * (width - len(v)))
    return universes, ids, {m: np.array(v, dtype=float).reshape(len(universes), width) for m, v in values.items()}


def previous_records(inputs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records :func:`design_round` reads, from the design rule's inputs: a metrics
    record stands for itself (a GP round reads every result), and an earlier round's
    design file (a :data:`multiverse.spec.strategies` round's input) for its universes, one record each
    with ``params``, ``id`` and ``replicate_of`` and no metrics."""
    out: list[Mapping[str, Any]] = []
    for rec in inputs:
        if "universes" in rec:
            out += [{"id": u["id"], "replicate_of": u["replicate_of"], "params": u["params"]} for u in rec["universes"]]
        else:
            out.append(rec)
    return out


def _new_distinct(draw, n: int, done: set, space: SearchSpace, what: str) -> list[dict]:
    """The first ``n`` universes of ``draw(k)`` (k = 0, 1, ...) that are neither finished
    nor drawn before; raises when the space runs out."""
    out, seen = [], set(done)
    for k in range(1000):
        for u in draw(k):
            if space.key(u) not in seen:
                seen.add(space.key(u))
                out.append(u)
                if len(out) == n:
                    return out
    raise ValueError(f"{what}: could not find {n} universes not already in the design")

# --- the strategies -----------------------------------------------------------------
@dataclass
class Round:
    """What a strategy chooses a design round from: the round's number ``index``, its
    size ``n`` and the universes of earlier rounds (``start`` in all), the space, the
    config's ``design`` section and the study's seed; the finished universes once each
    (``universes``, their first ids ``ids``), per outcome their ``n_universes x
    n_seeds`` values, and the claims a ``gp-claims`` round targets."""

    index: int
    n: int
    start: int
    space: SearchSpace
    design: Mapping[str, Any]
    seed: int
    universes: list
    ids: list
    values: dict
    claims: list = field(default_factory=list)

    @property
    def done(self) -> set:
        return {self.space.key(u) for u in self.universes}


#: What a strategy returns: the new universes, for each the id of the universe it
#: replicates (None for a new one), and diagnostics with the ``strategy`` that chose them.
Chosen = tuple[list[dict], list[str | None], dict[str, Any]]


def sobol(r: Round, info: Mapping[str, Any] | None = None) -> Chosen:
    """One scrambled Sobol sequence; later rounds continue it rather than restart it."""
    draw = lambda k: r.space.sobol(r.start + r.n * (k + 1), derive_seed(r.seed, 0))[r.start:]  # noqa: E731
    return (_new_distinct(draw, r.n, r.done, r.space, f"design.strategy {SOBOL.name}"), [None] * r.n,
            {"strategy": SOBOL.name, **(info or {})})


def random(r: Round) -> Chosen:
    """Independent uniform draws (log dimensions uniform in log space)."""
    draw = lambda k: r.space.random(r.n, derive_seed(r.seed, 3, r.index, k))  # noqa: E731
    return _new_distinct(draw, r.n, r.done, r.space, f"design.strategy {RANDOM.name}"), [None] * r.n, {"strategy": RANDOM.name}


def grid(r: Round) -> Chosen:
    """The full factorial grid in a seeded random order, each round the next slice."""
    cells = r.space.grid(r.design["grid_levels"], derive_seed(r.seed, 4))
    done = r.done
    todo = [u for u in cells if r.space.key(u) not in done]
    if len(todo) < r.n:
        raise ValueError(f"config key 'design.grid_levels': the grid has {len(cells)} universes, "
                         f"fewer than the {r.start + r.n} the rounds ask for")
    return todo[:r.n], [None] * r.n, {"strategy": GRID.name, "grid_size": len(cells)}


def design_round(
    round_: int,
    sizes: Sequence[int],
    space: SearchSpace,
    design: Mapping[str, Any],
    seed: int,
    previous: Sequence[Mapping[str, Any]],
) -> Chosen:
    """The universes of design round ``round_`` given the records of earlier rounds, by
    the strategy :data:`STRATEGIES` holds under ``design.strategy``.

    ``sizes`` holds the number of universes of rounds ``0..round_``; ``previous`` one
    metrics record per finished universe and seed read (``params``, ``status``,
    ``metrics``, and ``id`` / ``replicate_of``). Returns the new universes' parameters,
    for each the id of the universe it replicates (None for a new one), and
    diagnostics for the round's state file.
    """
    strategy = STRATEGIES[design["strategy"]]
    claims = list(design.get("claims", [])) if strategy.reads_claims else []
    # a strategy that reads no outcome reads none (its inputs may be design files: previous_records)
    names = [] if not strategy.reads_outcomes else list(dict.fromkeys(list(design.get("outcomes", [])) + claim_metrics(claims)))
    universes, ids, values = universe_outcomes(space, previous, names)
    r = Round(round_, sizes[round_], sum(sizes[:round_]), space, design, seed, universes, ids, values, claims)
    return strategy.choose_function()(r)


def sampling_record(round_: int, strategy: str, info: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Each universe's sampling record for the design file: how it was drawn, with what
    probability (``probability`` among ``candidates``), its inverse-probability
    ``weight`` relative to the uniform multiverse (1 for a uniform draw; None when a
    greedy GP round or a grid chose it) and ``draws``."""
    if "draws" in info:
        return [{"sampling": "randomised", **d} for d in info["draws"]]
    if STRATEGIES[strategy].uniform:
        return [{"sampling": "uniform", "probability": None, "candidates": None, "weight": 1.0, "draws": 1}] * n
    return [{"sampling": STRATEGIES[strategy].chosen_as, "probability": None, "candidates": None,
             "weight": None, "draws": None}] * n


def design_state(
    round_: int,
    sizes: Sequence[int],
    shard_size: int,
    space_config: Mapping[str, Any],
    design: Mapping[str, Any],
    seed: int,
    previous: Sequence[Mapping[str, Any]],
    versions: Mapping[str, str],
) -> dict[str, Any]:
    """The state file of design round ``round_``: its universes (id, shard, seed,
    parameters, and the universe each replicates, if any), the strategy and its
    diagnostics. ``previous``: the design rule's inputs (:func:`previous_records`);
    ``n_previous`` counts the records read: one per earlier universe and seed read for a
    GP round, one per earlier universe for a :data:`multiverse.spec.strategies` round."""
    space = SearchSpace.from_config(space_config)
    previous = previous_records(previous)
    universes, replicate_of, info = design_round(round_, sizes, space, design, seed, previous)
    strategy = info.pop("strategy")
    sampling = sampling_record(round_, strategy, info, len(universes))
    info.pop("draws", None)
    return {
        "round": round_,
        "strategy": strategy,
        "n_previous": len(previous),
        "diagnostics": info,
        "versions": dict(versions),
        "universes": [
            Universe(
                id=universe_id(round_, i),
                round=round_,
                index=i,
                shard=i // shard_size,
                slot=i % shard_size,
                seed=replicate_seed(seed, round_, i, 0),
                replicate_of=rep,
                params=u,
                **sampling[i],
            )
            for i, (u, rep) in enumerate(zip(universes, replicate_of))
        ],
    }
