"""The context a claim is analysed in: the study's observed universes, its surrogates,
the report's settings and the universes drawn with known probability; the Sobol
reference sets the claims integrate over; and what the claim-targeted design reduces
for a claim (:class:`DesignTarget`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from multiverse import declaration
from multiverse.ids import derive_seed
from multiverse.fidelity import LOW
from multiverse.inference import Drawn
from multiverse.surrogate import converging, universe_means


# --- the context a claim is analysed in ---------------------------------------------
def reference_universes(space, n: int, seed: int, fix: str | None = None, per_level: bool = False) -> list[dict]:
    """A Sobol reference set of ``n`` points per level combination; with ``fix``, that
    dimension is held at its first level (callers overwrite it), so no point is repeated;
    with ``per_level`` (trends), ``n`` points in all, shared out over the combinations."""
    if per_level:
        return space.enumerated(max(4, n // max(1, len(space.level_combinations()))), seed, canonical=False)
    ref = space.enumerated(n, seed, canonical=fix is None)
    if fix is not None:
        first = space[fix].choices[0]
        ref = [u for u in ref if u[fix] == first]
    return ref


@dataclass
class DesignTarget:
    """What the claim-targeted design (:mod:`multiverse.design_claims`) reduces for one
    claim on one metric's GP, given by each claim type's ``design_target``.

    ``points`` are universes; ``statistic`` (``len(points)`` weights) makes the claim's
    statistic a weighted sum of the metric there (criterion a: its posterior variance);
    ``local`` (``len(points) x n_base`` weights) makes each base point's local effect
    one (criterion b: the Bernoulli variance of whether it satisfies ``relation`` with
    ``margin``); ``integrated``: the posterior variance of the metric itself at every
    point (a correlation's stand-in)."""
    claim: str
    metric: str
    points: list
    statistic: Any = None
    local: Any = None
    relation: str = ">="
    margin: float = 0.0
    integrated: bool = False


@dataclass
class Context:
    """The study's observed universes, its surrogates and the report's settings.

    ``seed`` is the report's seed; every sample a claim draws derives from it.
    """
    space: Any
    df: Any
    surrogates: Mapping[str, Any]
    divergence: Any
    samples: int
    reference: int
    bootstrap: int
    seed: int
    universes: list = field(default_factory=list)
    #: the study's metric declarations (:func:`multiverse.spec.study_metrics`; None:
    #: the built-in trainer's)
    declared: Any = None
    #: hyperparameter chains of a correlation's two-outcome model, each from its own MAP
    #: fit (``report.hyperparameter_starts``; :func:`multiverse.two_outcome.fit_multitask_gp`)
    hyperparameter_starts: int = 1
    #: the report's Sobol indices per metric (:func:`multiverse.sensitivity.sobol_indices`;
    #: None where the report leaves them out), which a correlation's per-dimension tau reads
    sensitivity: Mapping[str, Any] | None = None
    _drawn: Any = None

    def drawn(self):
        """The universes drawn with known probability and their predictors
        (:class:`multiverse.inference.Drawn`), built once per context."""
        if self._drawn is None:
            self._drawn = Drawn(self.df, self.space, self.universes, self.values, derive_seed(self.seed, 600),
                                self.declared, low=self.low_values)
        return self._drawn

    def low_values(self, metric: str):
        """A multi-fidelity study's low-fidelity outcomes (its table's ``low_<metric>``
        columns, :mod:`multiverse.fidelity`): each universe's mean over its seeds."""
        return universe_means(self.df.assign(**{metric: self.df[LOW + metric]}), self.space, metric, self.declared)

    def values(self, metric: str):
        """Each observed universe's mean over its seeds (NaN where not usable)."""
        return universe_means(self.df, self.space, metric, self.declared)

    def declaration(self, metric: str) -> dict:
        """``metric``'s range, goal and ``converged_only`` (:func:`multiverse.declaration`)."""
        return declaration(metric, self.declared)

    def reference_set(self, fix: str | None = None, per_level: bool = False) -> list[dict]:
        """The Sobol reference set of the integrals: ``reference`` points per level
        combination (``fix``: that dimension held at its first level, callers overwrite
        it), or per level-combination-share (``per_level``) for trends."""
        return reference_universes(self.space, self.reference, derive_seed(self.seed, 1), fix, per_level)

    def converging(self, metrics: Sequence[str], universes: Sequence[Mapping[str, Any]],
                   variants: Sequence[Mapping[str, Any]] = ({},)) -> tuple[list[dict], float]:
        """The reference universes where a claim on ``metrics`` is read: for a metric of
        a metric declared ``converged_only``, only those the divergence model expects to
        converge under every one of ``variants`` (e.g. each compared level). Returns
        them and their share of ``universes``."""
        universes = list(universes)
        if self.divergence is None or not any(self.declaration(m)["converged_only"] for m in metrics) or not universes:
            return universes, 1.0
        ok = np.ones(len(universes), dtype=bool)
        for v in variants:
            ok &= converging(self.divergence, [{**u, **v} for u in universes])
        kept = [u for u, k in zip(universes, ok) if k]
        return kept, float(ok.mean())


def where_read(share: float) -> str:
    """The note a claim on converged-only metrics carries."""
    if share >= 1.0:
        return ""
    return f"read where universes converge ({share:.0%} of the multiverse; P(diverge) < 0.5)"
