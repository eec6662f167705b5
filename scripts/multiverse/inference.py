"""The study's universes drawn with known probability, read from its table, and each
one's predictor: what the design-based answers (:mod:`multiverse.estimators`) correct.

Which universes count and with what weight comes from the design files' records (the
table's ``design_weight`` and ``design_draws``; for an older table, the strategies'
registry, :mod:`multiverse.spec.strategies`). The predictors are the metric's GP fitted
without the universe it corrects: on the other folds of the uniform round 0
(cross-prediction-powered inference, Zrnic & Candes, *PNAS* 2024), or on the rounds
before a randomised round (active inference, Zrnic & Candes, ICML 2024).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from multiverse.estimators import (
    Continuation, Means, Sample, fidelity_summary, means, pair_means, power_tuning, reference_groups)
from multiverse.ids import derive_seed
from multiverse.spec.strategies import SOBOL, uniform_round
from multiverse.surrogate import fit_values, warp_for

#: Folds of round 0's cross-fitting (each fold's residuals use a surrogate fitted on the others).
FOLDS = 4
#: Reference points (in all) of a design-based mean's integral, and of a pair mean's.
REFERENCE_MEANS, REFERENCE_PAIRS = 8192, 1024


def uniform_rounds(strategy: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """Per row, whether its round counts as a uniform draw (:func:`multiverse.spec.strategies.uniform_round`)."""
    return np.array([uniform_round(s, int(r)) for s, r in zip(strategy, rounds)], dtype=bool).reshape(len(rounds))


def design_weights(df) -> tuple[np.ndarray, np.ndarray]:
    """Per table row, its universe's inverse-probability weight ``mu / p`` (times the
    times it was drawn) and draw count, from the table's ``design_weight`` and
    ``design_draws`` columns; a table without them (an older study) counts round 0 and
    the Sobol and random strategies' rounds as uniform draws. NaN: not drawn at random
    (a greedy GP round, a grid)."""
    rounds = df["round"].to_numpy() if "round" in df else np.zeros(len(df), dtype=int)
    if "design_weight" in df:
        w = df["design_weight"].to_numpy(dtype=float)
    else:
        strategy = df["strategy"].astype(str).to_numpy() if "strategy" in df else np.full(len(df), SOBOL.name)
        w = np.where(uniform_rounds(strategy, rounds), 1.0, np.nan)
    draws = df["design_draws"].to_numpy(dtype=float) if "design_draws" in df else np.where(np.isfinite(w), 1.0, np.nan)
    return w, draws


class Drawn:
    """The study's universes drawn with known probability (:class:`Sample`) and, per
    metric, the predictions of each universe's own predictor (:func:`predictors`).

    ``df``: the study table; ``universes``: one per universe in the table's order
    (:func:`multiverse.surrogate.per_universe`); ``values(metric)``: each universe's mean.

    A multi-fidelity study's table (every universe at a low fidelity, a random subset
    continued: :mod:`multiverse.fidelity`) has a ``continued`` and a
    ``continuation_probability`` column, and ``low(metric)`` gives each universe's
    low-fidelity mean: every answer then reads the continued universes' full-fidelity
    outcomes through their pseudo-outcomes (:class:`multiverse.estimators.Continuation`),
    with the low-fidelity outcome as the predictor and the GP's correction on top. The
    GPs are fitted on both fidelities (:meth:`training_values`).
    """

    def __init__(self, df, space, universes: Sequence[Mapping[str, Any]], values: Callable[[str], np.ndarray],
                 seed: int, declared=None, folds: int = FOLDS, low: Callable[[str], np.ndarray] | None = None):
        first = df.drop_duplicates("universe", keep="first")
        self.low = low if "continuation_probability" in df else None
        if self.low is not None:
            self.continued = first["continued"].to_numpy(dtype=bool)
            self.probability = first["continuation_probability"].to_numpy(dtype=float)
            # continued without training: final at the low fidelity (diverged, failed, no epochs left)
            self.trained = (first["fidelity_trained"].to_numpy(dtype=bool) if "fidelity_trained" in first
                            else self.continued)
        w, draws = design_weights(first)
        rounds = first["round"].to_numpy(dtype=int) if "round" in first else np.zeros(len(first), dtype=int)
        self.space, self.seed, self.declared, self.values = space, seed, declared, values
        self.all_universes, self.all_rounds = list(universes), rounds
        combos = max(1, len(space.level_combinations()))
        # uniform reference sets (Sobol over the numeric choices, every level combination)
        self.per = (max(16, REFERENCE_MEANS // combos), max(16, REFERENCE_PAIRS // combos))
        self.reference = space.enumerated(self.per[0], derive_seed(seed, 1))
        self.reference_pairs = space.enumerated(self.per[1], derive_seed(seed, 2))
        idx = np.flatnonzero(np.isfinite(w) & (w > 0))
        strategy = first["strategy"].astype(str).to_numpy() if "strategy" in first else np.full(len(first), "")
        # stage 0: the uniform draws of one Sobol (or random) sequence, round 0 and every
        # round of the sobol and random strategies, cross-fitted in folds; each randomised
        # round is its own stage, predicted from the rounds before it
        uniform = uniform_rounds(strategy, rounds)
        r = np.where(uniform[idx], 0, rounds[idx])
        n0 = int((r == 0).sum())
        k = min(folds, n0 // 4) if n0 >= 8 else 0
        fold = np.full(len(idx), -1)
        # contiguous blocks of the sequence: each is spread over the space as the rest is (an
        # interleaved split of a Sobol sequence is not: a point's index fixes its leading
        # digits, so fold i % k would sit where the other folds' predictor never saw data)
        fold[r == 0] = np.arange(n0) * k // n0 if k else -1
        self.stage0 = idx[r == 0]
        later = sorted(set(r[r > 0].tolist()))
        # slots: one per stage-0 fold, then one per randomised round
        self.slot_rounds = [(0, f) for f in range(k)] + [(t, -1) for t in later]
        slot = np.array([self.slot_rounds.index((0, f)) if rr == 0 and k else
                         (self.slot_rounds.index((rr, -1)) if rr > 0 else -1) for rr, f in zip(r, fold)], dtype=int)
        greedy = int((~np.isfinite(w)).sum())
        note = f"{len(idx)} universes drawn with known probability"
        if greedy:
            note += f" ({greedy} chosen by a greedy design left out)"
        if self.low is not None:
            note += (f", all trained at the low fidelity and {int(self.continued[idx].sum())} of them continued to"
                     " full fidelity at stated probabilities")
        self.sample = Sample([universes[i] for i in idx], w[idx], draws[idx], slot, r, fold, note, idx)
        self._cache: dict[str, tuple] = {}

    def training_set(self, slot: int) -> np.ndarray:
        """Indices (into the study's universes) a slot's predictor is fitted on: stage 0's
        other folds, or every universe of the rounds before a randomised round."""
        t, f = self.slot_rounds[slot]
        if t == 0:
            return self.sample.index[(self.sample.round == 0) & (self.sample.fold != f)]
        return np.flatnonzero(self.all_rounds < t)

    def predictions(self, metric: str) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """For ``metric``: ``n`` predictions of each drawn universe's own predictor,
        ``slots x N`` predictions at the reference set, per slot ``n`` predictions at
        every drawn universe, and ``slots x N_pairs`` at the pairs' reference set. A predictor is the metric's GP (the report's, on its warped
        scale: :func:`multiverse.surrogate.fit_values`, posterior median) fitted on its
        slot's training set; where too few finite values leave no GP, their mean."""
        if metric in self._cache:
            return self._cache[metric]
        y = self.training_values(metric)
        warp = warp_for(metric, self.declared)
        at_sample, at_ref, at_pairs = [], [], []
        for s in range(len(self.slot_rounds)):
            train = self.training_set(s)
            sur = None
            if np.isfinite(y[train]).sum() >= 4:
                sur = fit_values(self.space, [self.all_universes[i] for i in train], y[train][:, None],
                                 derive_seed(self.seed, 500, s), warp)
            if sur is None:
                c = float(np.nanmean(y[train])) if np.isfinite(y[train]).any() else 0.0
                at_sample.append(np.full(len(self.sample), c))
                at_ref.append(np.full(len(self.reference), c))
                at_pairs.append(np.full(len(self.reference_pairs), c))
            else:
                at_sample.append(np.asarray(sur.median(self.sample.universes), dtype=float))
                at_ref.append(np.asarray(sur.median(self.reference), dtype=float))
                at_pairs.append(np.asarray(sur.median(self.reference_pairs), dtype=float))
        own = np.array([at_sample[s][i] if s >= 0 else np.nan for i, s in enumerate(self.sample.slot)])
        ref = np.array(at_ref) if at_ref else np.zeros((0, len(self.reference)))
        pairs = np.array(at_pairs) if at_pairs else np.zeros((0, len(self.reference_pairs)))
        self._cache[metric] = (own, ref, at_sample, pairs)
        return self._cache[metric]

    def training_values(self, metric: str) -> np.ndarray:
        """What the predictors' GPs are fitted on: each universe's ``metric``. In a
        multi-fidelity study, the GP is fitted on both fidelities: a continued universe's
        full-fidelity value, and for the others their low-fidelity value through the
        power-tuned line ``a + lam * low`` (:func:`multiverse.estimators.power_tuning`,
        fitted on the continued universes), kept within the range the values span. A
        GP on the continued universes alone (a third of them, say) would predict far
        worse, and the interval would widen by what it misses."""
        y = np.asarray(self.values(metric), dtype=float)
        if self.low is None:
            return y
        return np.where(self.continued & np.isfinite(y), y, self.calibrated_low(metric))

    def calibrated_low(self, metric: str) -> np.ndarray:
        """Each universe's low-fidelity ``metric`` on the full fidelity's scale: the
        power-tuned line ``a + lam * low`` (:func:`multiverse.estimators.power_tuning`,
        fitted on the continued universes), kept within the range the values span."""
        y = np.asarray(self.values(metric), dtype=float)
        low = np.asarray(self.low(metric), dtype=float)
        known = self.continued & np.isfinite(y)
        a, lam = power_tuning(y[:, None], low[:, None], known, np.where(known, self.probability, 1.0))[:, 0]
        finite = np.r_[y[np.isfinite(y)], low[np.isfinite(low)]]
        return np.clip(a + lam * low, finite.min(), finite.max()) if len(finite) else low

    def keep(self, metric: str, predictions: tuple) -> None:
        """Hold ``metric``'s :meth:`predictions`, computed elsewhere (the report computes
        each metric's in its own process, once for all the claims on it)."""
        self._cache[metric] = predictions

    def observed(self, metric: str) -> np.ndarray:
        return np.asarray(self.values(metric), dtype=float)[self.sample.index]

    def continuation(self, metrics: Sequence[str]) -> Continuation | None:
        """The drawn universes' second phase on ``metrics`` (None: one fidelity)."""
        if self.low is None:
            return None
        i = self.sample.index
        # the predictor of each component h: h of the calibrated low fidelity (or a tuned line of it)
        return Continuation({m: self.calibrated_low(m)[i] for m in metrics}, self.continued[i], self.probability[i])

    def fidelity(self, metrics: Sequence[str]) -> dict[str, Any] | None:
        """Per metric, what a multi-fidelity answer rests on (:func:`multiverse.estimators.fidelity_summary`)."""
        c = self.continuation(metrics)
        if c is None:
            return None
        i = self.sample.index
        return {m: fidelity_summary(np.asarray(self.low(m), dtype=float)[i], self.observed(m), c.continued,
                                    c.probability, self.trained[i]) for m in metrics}

    def means(self, metrics: Sequence[str], h) -> Means:
        """:func:`means` of ``h(universes, {metric: values})`` over the drawn universes."""
        obs = {m: self.observed(m) for m in metrics}
        pred = {m: self.predictions(m)[0] for m in metrics}
        ref = {m: self.predictions(m)[1] for m in metrics}
        return means(h, self.sample, obs, pred, self.reference, ref, reference_groups(len(self.reference), self.per[0]),
                     continuation=self.continuation(metrics))

    def pair_means(self, metrics: Sequence[str], kernel) -> Means:
        """:func:`pair_means` of ``kernel`` over pairs of drawn universes."""
        obs = {m: self.observed(m) for m in metrics}
        ref = {m: self.predictions(m)[3] for m in metrics}
        return pair_means(kernel, self.sample, obs, lambda s: {m: self.predictions(m)[2][s] for m in metrics}, ref,
                          reference_groups(len(self.reference_pairs), self.per[1]),
                          continuation=self.continuation(metrics))
