"""Multi-fidelity universes: every universe trained at a low fidelity (its first epochs
under the full schedule: :func:`multiverse.train.train_universe`'s ``stop_after``), and a
random subset continued to full fidelity at probabilities stated before the outcome they
decide is known.

The probabilities may follow the low-fidelity outcome or the GP's uncertainty (active
inference, Zrnic & Candes, ICML 2024), but never fall below a floor: the design-based
answer (:func:`multiverse.estimators.continued_outcomes`) weighs a continued universe by
the inverse of its probability, so a universe that could not be continued would leave
the estimate biased. Unlike successive halving or Hyperband, which select what goes on
and so bias any average, every universe keeps a stated chance.

The draw is nested: each universe's uniform number is fixed by the study's seed and its
id, and it is continued when that number falls below its probability. Raising the
continuation budget raises every probability, so a rerun continues every universe it
continued before and trains only the new ones.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from multiverse.ids import derive_seed

#: The prefix of a multi-fidelity table's low-fidelity metric columns (``low_val_acc``).
LOW = "low_"


def continuation_probabilities(score: np.ndarray, expected: float, floor: float) -> np.ndarray:
    """Each universe's probability of being continued: proportional to ``score`` (all
    equal: a uniform continuation), at least ``floor`` (> 0), at most 1, summing to
    ``expected`` (the continuation budget in universes, at most their number). Capping at 1
    hands the excess to the others in proportion, so the probabilities do not fall when
    ``expected`` grows (the draw stays nested)."""
    score = np.clip(np.nan_to_num(np.asarray(score, dtype=float), nan=0.0), 0.0, None)
    n = len(score)
    if not 0 < floor <= 1:
        raise ValueError(f"the continuation probability's floor must lie in (0, 1], got {floor}")
    expected = float(min(max(expected, floor * n), n))
    share = score / score.sum() if score.sum() > 0 else np.full(n, 1.0 / n)
    p = np.full(n, floor)
    free = np.ones(n, dtype=bool)
    # water-filling: the floor for all, the rest in proportion to the score, capped at 1
    for _ in range(n + 1):
        rest = expected - p[~free].sum() - floor * free.sum()
        w = share[free] / share[free].sum() if share[free].sum() > 0 else np.full(free.sum(), 1.0 / free.sum())
        trial = floor + rest * w
        over = trial > 1.0
        if not over.any():
            p[free] = trial
            break
        idx = np.flatnonzero(free)[over]
        p[idx], free[idx] = 1.0, False
    return np.clip(p, floor, 1.0)


def uniform_numbers(seed: int, ids: Sequence[str]) -> np.ndarray:
    """Each universe's fixed uniform number of the continuation draw, from the study's
    seed and its id (``r{round}u{index}``) alone."""
    keys = [(int(i[1:].split("u")[0]), int(i.split("u")[1])) for i in ids]
    return np.array([np.random.default_rng(derive_seed(seed, 9, r, k)).random() for r, k in keys])


def continuation_draw(seed: int, ids: Sequence[str], probability: np.ndarray) -> np.ndarray:
    """Whether each universe is continued: its :func:`uniform_numbers` below its probability."""
    return uniform_numbers(seed, ids) < np.asarray(probability, dtype=float)
