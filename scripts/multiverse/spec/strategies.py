"""The design strategies' registry (``design.strategy``): what each one is, declared once.

Each :class:`Strategy` says whether it reads outcomes (a round that does not reads only
the earlier rounds' design files, so Snakemake trains a round while it designs the
next), whether its every round draws uniformly (each universe then counts in the
design-based answers with weight 1), whether its rounds can draw with stated
probabilities (``design.sampling: randomised``), which of the ``design`` settings its
rounds read (the design rule's params, so an edit reruns exactly the rounds it
changes), and its ``choose``: the function that picks a round's universes, named as
``module:function`` and imported when a round runs (a Sobol round needs neither torch nor
BoTorch, whose import took 2 of a design job's 2.5 s, 2026-12-06).

Adding a strategy means its ``choose`` in a module of its own, its entry in
:data:`STRATEGIES` and its name in the config schema; nothing else names it.
"""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from multiverse.spec.records import Claim

#: The ``design`` keys a GP round reads (besides the round sizes, a param of their own).
GP_SETTINGS = ("outcomes", "candidates", "reference", "replicates", "categorical", "sampling", "uniform_share")


def _no_settings(design: Mapping[str, Any], claims: Sequence[Claim]) -> dict[str, Any]:
    return {}


def _grid_settings(design: Mapping[str, Any], claims: Sequence[Claim]) -> dict[str, Any]:
    return {"grid_levels": design["grid_levels"]}


def _gp_settings(design: Mapping[str, Any], claims: Sequence[Claim]) -> dict[str, Any]:
    settings = {k: design[k] for k in GP_SETTINGS if k in design}
    if settings.get("sampling", "greedy") == "greedy":  # greedy rounds read neither: no rerun when they change
        settings = {k: v for k, v in settings.items() if k not in ("sampling", "uniform_share")}
    return settings


def _gp_claims_settings(design: Mapping[str, Any], claims: Sequence[Claim]) -> dict[str, Any]:
    # its rounds read the claims: editing one reruns them
    return {**_gp_settings(design, claims), "explore_share": design["explore_share"], "claims": [dict(c) for c in claims]}


def space_size(space: Mapping[str, Mapping[str, Any]]) -> float:
    """Number of distinct universes: infinite with any float dimension."""
    return _count(space, lambda spec: float("inf") if spec["type"] == "float" else spec["high"] - spec["low"] + 1)


def grid_size(space: Mapping[str, Mapping[str, Any]], levels: int) -> float:
    """Universes of the grid strategy's full factorial grid (at most; integers that round
    together count once)."""
    return _count(space, lambda spec: levels if spec["type"] == "float" else min(levels, spec["high"] - spec["low"] + 1))


def _count(space: Mapping[str, Mapping[str, Any]], values) -> float:
    """Distinct universes when numeric dimension ``spec`` takes ``values(spec)`` values:
    summed over the level combinations, since an inactive dimension takes none."""
    cats = [n for n, s in space.items() if s["type"] == "categorical"]
    total = 0.0
    for combo in itertools.product(*(space[n]["choices"] for n in cats)):
        level = dict(zip(cats, combo))
        size = 1.0
        for spec in space.values():
            if spec["type"] == "categorical":
                continue
            (parent, active), = (spec.get("when") or {None: None}).items()
            if parent is None or level[parent] in active:
                size *= values(spec)
        total += size
    return total


def _grid_size(space: Mapping[str, Mapping[str, Any]], design: Mapping[str, Any]) -> float:
    return grid_size(space, design["grid_levels"])


def _space_size(space: Mapping[str, Mapping[str, Any]], design: Mapping[str, Any]) -> float:
    return space_size(space)


@dataclass(frozen=True)
class Strategy:
    """One design strategy.

    ``name``: its ``design.strategy``. ``choose``: ``module:function``, a function of a
    :class:`multiverse.design.Round` returning the round's universes
    (:data:`multiverse.design.Chosen`). ``reads_outcomes``: whether its rounds after round
    0 read what training made of the earlier ones (round 0 of such a strategy is a Sobol
    round: a GP needs data first). ``uniform``: whether every round draws uniformly from
    the space. ``stated_probabilities``: whether its rounds can draw at random with
    probabilities the design file states (``design.sampling: randomised``).
    ``reads_claims``: whether its rounds read the claims (which then enter the study's
    provenance hash). ``chosen_as``: what the design file records for a universe it chose
    without a stated probability (``uniform``, ``greedy`` or ``grid``). ``settings``: the
    ``design`` settings its rounds after round 0 read, from the ``design`` section and the
    claims. ``size``: how many distinct universes it can draw from the space, given the
    ``design`` section (``size_what`` names them in an error)."""

    name: str
    choose: str
    reads_outcomes: bool
    uniform: bool
    chosen_as: str
    settings: Callable[[Mapping[str, Any], Sequence[Claim]], dict[str, Any]] = _no_settings
    stated_probabilities: bool = False
    reads_claims: bool = False
    size: Callable[[Mapping[str, Mapping[str, Any]], Mapping[str, Any]], float] = _space_size
    size_what: str = "universes"

    def choose_function(self) -> Callable[..., Any]:
        module, _, function = self.choose.partition(":")
        return getattr(importlib.import_module(module), function)


SOBOL = Strategy("sobol", "multiverse.design:sobol", reads_outcomes=False, uniform=True, chosen_as="uniform")
RANDOM = Strategy("random", "multiverse.design:random", reads_outcomes=False, uniform=True, chosen_as="uniform")
GRID = Strategy("grid", "multiverse.design:grid", reads_outcomes=False, uniform=False, chosen_as="grid",
                settings=_grid_settings, size=_grid_size, size_what="universes of a grid of design.grid_levels values")
GP_IVR = Strategy("gp-ivr", "multiverse.design_gp:gp_ivr", reads_outcomes=True, uniform=False, chosen_as="greedy",
                  settings=_gp_settings, stated_probabilities=True)
GP_CLAIMS = Strategy("gp-claims", "multiverse.design_claims:gp_claims", reads_outcomes=True, uniform=False,
                     chosen_as="greedy", settings=_gp_claims_settings, stated_probabilities=True, reads_claims=True)

#: The design strategies by their config name (``design.strategy``).
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (GP_IVR, GP_CLAIMS, SOBOL, RANDOM, GRID)}
#: What chooses round 0 of a strategy that reads outcomes.
FIRST_ROUND = SOBOL


def round_strategy(design: Mapping[str, Any], round_: int) -> Strategy:
    """The strategy that chooses round ``round_``: ``design.strategy``'s, or Sobol for
    round 0 of a strategy that reads outcomes."""
    strategy = STRATEGIES[design["strategy"]]
    return FIRST_ROUND if strategy.reads_outcomes and round_ == 0 else strategy


def round_settings(design: Mapping[str, Any], round_: int, claims: Sequence[Claim] = ()) -> dict[str, Any]:
    """The ``design`` settings round ``round_`` uses, and only those: the design rule's
    params, so that an edit reruns exactly the rounds it changes. Round 0 of a GP
    strategy is a Sobol round, so editing ``design.reference`` or ``design.candidates``
    reruns the GP rounds and what they feed, never round 0; the round sizes
    (``initial``, ``batch``) are the rule's ``sizes`` param."""
    strategy = round_strategy(design, round_)
    return {"strategy": strategy.name, **strategy.settings(design, claims)}


def reads_outcomes(design: Mapping[str, Any], round_: int) -> bool:
    """Whether round ``round_`` reads the outcomes of the earlier rounds (else only
    which universes they drew: their design files)."""
    return round_strategy(design, round_).reads_outcomes


def uniform_round(strategy: str, round_: int) -> bool:
    """Whether round ``round_`` of ``strategy`` (a name; an unknown or missing one reads
    as none) counts as a uniform draw where its universes carry no ``weight`` of their
    own: a design file or table written before they did, and the stages of the
    design-based answers. Round 0 counts (a grid's universes carry weight None, and so
    drop out before this is asked)."""
    known = STRATEGIES.get(strategy)
    return round_ == 0 or (known is not None and known.uniform)
