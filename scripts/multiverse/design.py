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

The GP rounds' machinery is :mod:`multiverse.design_gp`; the claim-targeted round's,
:mod:`multiverse.design_claims`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from multiverse.claims import kind
from multiverse.config import SPACE_ONLY
from multiverse.ids import derive_seed, replicate_seed, universe_id
from multiverse.space import SearchSpace
from multiverse.stats import seed_noise  # noqa: F401  (re-exported)

#: The GP rounds' names this module also offers (the design's public names), from
#: :mod:`multiverse.design_gp` on first use: a Sobol, random or grid round (the default
#: study's every round) needs neither torch nor BoTorch, whose import took 2 of a design
#: job's 2.5 s (measured 2026-12-06).
GP_NAMES = ("OutcomeFit", "candidates", "fit_outcomes", "gp_ivr_round", "greedy_ivr", "predictive_sd",
            "randomised_draws", "sampling_probabilities")


def __getattr__(name: str) -> Any:
    if name in GP_NAMES:
        from multiverse import design_gp  # on first use (see GP_NAMES)

        return getattr(design_gp, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    design file (a :data:`multiverse.config.SPACE_ONLY` round's input) for its universes, one record each
    with ``params``, ``id`` and ``replicate_of`` and no metrics."""
    out: list[Mapping[str, Any]] = []
    for rec in inputs:
        if "universes" in rec:
            out += [{"id": u["id"], "replicate_of": u["replicate_of"], "params": u["params"]} for u in rec["universes"]]
        else:
            out.append(rec)
    return out


def claim_metrics(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The metrics the ``claims`` are read on, in order, once each."""
    return list(dict.fromkeys(m for c in claims for m in kind(c).metrics(c)))


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

    @property
    def finite(self) -> dict:
        """The outcomes a surrogate can be fitted to: at least ``MIN_FIT`` finite universes."""
        from multiverse.gp import MIN_FIT  # on use: only GP rounds read it (see GP_NAMES)

        return {m: v for m, v in self.values.items() if np.isfinite(v).any(axis=1).sum() >= MIN_FIT}


#: What a strategy returns: the new universes, for each the id of the universe it
#: replicates (None for a new one), and diagnostics with the ``strategy`` that chose them.
Chosen = tuple[list[dict], list[str | None], dict[str, Any]]


def sobol(r: Round, info: Mapping[str, Any] | None = None) -> Chosen:
    """One scrambled Sobol sequence; later rounds continue it rather than restart it."""
    draw = lambda k: r.space.sobol(r.start + r.n * (k + 1), derive_seed(r.seed, 0))[r.start:]  # noqa: E731
    return (_new_distinct(draw, r.n, r.done, r.space, "design.strategy sobol"), [None] * r.n,
            {"strategy": "sobol", **(info or {})})


def random(r: Round) -> Chosen:
    """Independent uniform draws (log dimensions uniform in log space)."""
    draw = lambda k: r.space.random(r.n, derive_seed(r.seed, 3, r.index, k))  # noqa: E731
    return _new_distinct(draw, r.n, r.done, r.space, "design.strategy random"), [None] * r.n, {"strategy": "random"}


def grid(r: Round) -> Chosen:
    """The full factorial grid in a seeded random order, each round the next slice."""
    cells = r.space.grid(r.design["grid_levels"], derive_seed(r.seed, 4))
    done = r.done
    todo = [u for u in cells if r.space.key(u) not in done]
    if len(todo) < r.n:
        raise ValueError(f"config key 'design.grid_levels': the grid has {len(cells)} universes, "
                         f"fewer than the {r.start + r.n} the rounds ask for")
    return todo[:r.n], [None] * r.n, {"strategy": "grid", "grid_size": len(cells)}


def _gp_round(choose: Callable[[Round, dict], Chosen]) -> Callable[[Round], Chosen]:
    """A GP strategy: Sobol in round 0 and while fewer than ``MIN_FIT`` universes have a
    finite outcome; a randomised round with ``design.sampling: randomised``; else ``choose``."""

    def strategy(r: Round) -> Chosen:
        from multiverse.gp import MIN_FIT  # on use: only GP rounds read it (see GP_NAMES)

        finite = r.finite
        if r.index == 0 or not finite:
            return sobol(r, {"fallback": f"fewer than {MIN_FIT} finite outcomes to fit a GP"} if r.index > 0 else {})
        if r.design.get("sampling") == "randomised":
            return randomised_round(r.space, r.universes, finite, r.claims or None, r.n,
                                    derive_seed(r.seed, r.index), r.design)
        return choose(r, finite)

    strategy.__name__ = strategy.__qualname__ = choose.__name__
    strategy.__doc__ = choose.__doc__
    return strategy


@_gp_round
def gp_ivr(r: Round, finite: dict) -> Chosen:
    """Greedy reduction of the integrated posterior variance of every outcome's GP
    (:func:`multiverse.design_gp.gp_ivr_round`)."""
    from multiverse.design_gp import gp_ivr_round  # on use (see GP_NAMES)

    d = r.design
    chosen, repl, info = gp_ivr_round(r.space, r.universes, finite, r.n, derive_seed(r.seed, r.index),
                                      d["candidates"], d["reference"], d["replicates"], d["categorical"])
    return chosen, [None if i is None else r.ids[i] for i in repl], {"strategy": "gp-ivr", **info}


@_gp_round
def gp_claims(r: Round, finite: dict) -> Chosen:
    """The claim-targeted round (:func:`multiverse.design_claims.gp_claims_round`)."""
    from multiverse.design_claims import gp_claims_round  # on use (see GP_NAMES)

    d = r.design
    chosen, repl, info = gp_claims_round(
        r.space, r.universes, finite, r.claims, r.n, derive_seed(r.seed, r.index), d["candidates"],
        d["reference"], d["explore_share"], d["replicates"], d["categorical"],
        exploration=[m for m in d.get("outcomes", []) if m in finite],
    )
    return chosen, repl, {"strategy": "gp-claims", **info}


#: The design strategies by their config name (``design.strategy``): each takes a
#: :class:`Round` and returns the universes it chose (:data:`Chosen`).
STRATEGIES: dict[str, Callable[[Round], Chosen]] = {
    "gp-ivr": gp_ivr, "gp-claims": gp_claims, "sobol": sobol, "random": random, "grid": grid,
}


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
    strategy = design["strategy"]
    claims = list(design.get("claims", [])) if strategy == "gp-claims" else []
    # a Sobol, random or grid round reads no outcome (its inputs may be design files: previous_records)
    names = [] if strategy in SPACE_ONLY else list(dict.fromkeys(list(design.get("outcomes", [])) + claim_metrics(claims)))
    universes, ids, values = universe_outcomes(space, previous, names)
    r = Round(round_, sizes[round_], sum(sizes[:round_]), space, design, seed, universes, ids, values, claims)
    return STRATEGIES[strategy](r)


def claim_relevance(space: SearchSpace, claims: Sequence[Mapping[str, Any]], universes: Sequence[Mapping[str, Any]],
                    ) -> dict[str, np.ndarray]:
    """How much each universe's residual of each claim metric weighs in the claims'
    statistics, up to a constant (each claim type's ``relevance``: a comparison's or
    expected best's universes in its two groups, a trend's by their distance from the
    middle of its dimension, a correlation's all). Per metric, the root sum of squares
    over the claims that read it."""
    out: dict[str, np.ndarray] = {}
    for c in claims:
        r = kind(c).relevance(space, c, universes)
        for m in kind(c).metrics(c):
            out[m] = np.sqrt(out.get(m, 0.0) ** 2 + r**2)
    return out


def randomised_round(space: SearchSpace, observed: Sequence[Mapping[str, Any]], outcomes: Mapping[str, Any],
                     claims: Sequence[Mapping[str, Any]] | None, n: int, seed: int, design: Mapping[str, Any],
                     ) -> tuple[list[dict], list[None], dict[str, Any]]:
    """A randomised GP round (``design.sampling: randomised``): :func:`randomised_draws`
    with probabilities that follow the surrogate's predictive uncertainty: under gp-ivr,
    of the design's outcomes; under gp-claims (``claims``), of the claims' metrics, each
    universe's weighted by how much it weighs in the claims' statistics
    (:func:`claim_relevance`). Mixed with uniform by ``design.uniform_share``."""
    from multiverse.design_gp import fit_outcomes, predictive_sd, randomised_draws  # on use (see GP_NAMES)

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


def sampling_record(round_: int, strategy: str, info: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Each universe's sampling record for the design file: how it was drawn, with what
    probability (``probability`` among ``candidates``), its inverse-probability
    ``weight`` relative to the uniform multiverse (1 for a uniform draw; None when a
    greedy GP round or a grid chose it) and ``draws``."""
    if "draws" in info:
        return [{"sampling": "randomised", **d} for d in info["draws"]]
    if strategy in ("sobol", "random"):
        return [{"sampling": "uniform", "probability": None, "candidates": None, "weight": 1.0, "draws": 1}] * n
    return [{"sampling": "greedy" if strategy != "grid" else "grid", "probability": None, "candidates": None,
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
    GP round, one per earlier universe for a :data:`multiverse.config.SPACE_ONLY` round."""
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
            {
                "id": universe_id(round_, i),
                "round": round_,
                "index": i,
                "shard": i // shard_size,
                "slot": i % shard_size,
                "seed": replicate_seed(seed, round_, i, 0),
                "replicate_of": rep,
                "params": u,
                **sampling[i],
            }
            for i, (u, rep) in enumerate(zip(universes, replicate_of))
        ],
    }
