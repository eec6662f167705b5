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

import math
from typing import Any, Mapping, Sequence

import numpy as np

from multiverse.ids import derive_seed

#: The prefix of a multi-fidelity table's low-fidelity metric columns (``low_val_acc``).
LOW = "low_"
#: Without a ``floor`` in ``design.fidelity``, the active probabilities' floor is this share
#: of the uniform probability (``share``): the probabilities are then the midpoint
#: ``(1 - rho) pi_active + rho pi_uniform`` (``rho`` = 0.5) of the budget-preserving path from
#: active to uniform sampling (Li, Zrnic & Candes, *Robust Sampling for Active Statistical
#: Inference*, NeurIPS 2025), so no weight exceeds ``2 / share``. An absolute floor of 0.1 at
#: share 0.5 let weights reach 10 and the intervals undercover (docs/design_based.md).
UNIFORM_SHARE = 0.5


def default_floor(share: float) -> float:
    """The active probabilities' floor where ``design.fidelity`` gives none: :data:`UNIFORM_SHARE` of ``share``."""
    return UNIFORM_SHARE * float(share)


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


#: A universe's status at full fidelity when the draw did not continue it.
NOT_CONTINUED = "not_continued"


def low_epochs(settings: Mapping[str, Any], planned: int | None) -> int | None:
    """The epochs of a universe's low fidelity (``design.fidelity``): ``epochs``, or
    ``ceil(fraction * planned)``, at most the ``planned`` epochs (None: not known, e.g.
    params that fail; the low fidelity is then the first epoch)."""
    if "epochs" in settings:
        k = int(settings["epochs"])
    else:
        k = math.ceil(float(settings["fraction"]) * (planned or 1))
    return max(1, min(k, planned)) if planned else max(1, k)


def active_score(history: Sequence[Mapping[str, Any]], metric: str) -> float:
    """How much a universe's low-fidelity outcome still moves: the change of ``metric``
    over the second half of its low-fidelity epochs (``|m(e) - m(ceil(e / 2))|``, from
    its per-epoch history), a stand-in, measured before the draw, for how far its final
    outcome lies from the low-fidelity one (NaN where the history does not say)."""
    values = [h.get(metric) for h in history]
    if not values or values[-1] is None:
        return float("nan")
    half = values[max(0, math.ceil(len(values) / 2) - 1)]
    try:
        return abs(float(values[-1]) - float(half))
    except (TypeError, ValueError):
        return float("nan")


def is_final(record: Mapping[str, Any]) -> bool:
    """Whether a universe's low-fidelity run is already its full-fidelity run: it
    diverged or failed (a longer run of the same universe would too: its first epochs
    are the same), or it had no epochs left (its record says no ``fidelity_epochs``)."""
    return record.get("status") in ("diverged", "failed") or "fidelity_epochs" not in record


def continuation_round(design: Mapping[str, Any], low_records: Sequence[Mapping[str, Any]],
                       settings: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A design round's continuation draw (rule ``continuation``), from its universes'
    low-fidelity train records (``low_records``: every seed's). Each universe's
    probability (``settings``: ``design.fidelity``) is stated here, from what the low
    fidelity shows, before any full-fidelity outcome exists; the continued universes are
    those whose :func:`uniform_numbers` fall below it.

    - ``probability: uniform``: every universe ``share``; ``active``: in proportion to
      :func:`active_score` (averaged over the universe's seeds), at least ``floor``
      (default :func:`default_floor`), summing to ``share`` times the universes
      (:func:`continuation_probabilities`).
    - A universe whose low fidelity is final (:func:`is_final`, every seed) is
      continued with probability 1 at no cost, and does not count against the budget.
    """
    by_id: dict[str, list] = {}
    for r in low_records:
        by_id.setdefault(r["id"], []).append(r)
    universes = sorted(design["universes"], key=lambda u: u["index"])
    ids = [u["id"] for u in universes]
    final = np.array([all(is_final(r) for r in by_id.get(i, [{"status": "failed"}])) for i in ids], dtype=bool)
    metric = settings.get("metric")
    if settings.get("probability", "uniform") == "active":
        score = np.array([np.nanmean([active_score(r.get("history") or [], metric) for r in by_id.get(i, [])] or [np.nan])
                          for i in ids], dtype=float)
    else:
        score = np.ones(len(ids))
    p = np.ones(len(ids))
    share = float(settings.get("share", 0.33))
    floor = float(settings["floor"]) if settings.get("floor") is not None else default_floor(share)
    if (~final).any():
        p[~final] = continuation_probabilities(score[~final], share * (~final).sum(), min(floor, share))
    u = uniform_numbers(seed, ids)
    continued = final | (u < p)  # continuation_draw, with the numbers kept for the file
    return {
        "round": design["round"],
        "settings": dict(sorted({**settings, "floor": floor}.items())),
        "expected": float(p[~final].sum()),
        "universes": [
            {"id": i, "index": x["index"], "shard": x["shard"], "probability": float(pi), "uniform": float(ui),
             "continued": bool(c), "final": bool(f), "score": None if not np.isfinite(s) else float(s)}
            for i, x, pi, ui, c, f, s in zip(ids, universes, p, u, continued, final, score)
        ],
    }


def shard_draws(universes: Sequence[Mapping[str, Any]], continuation: Mapping[str, Any]
                ) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[int]]:
    """A continued shard's universes in slot order, each one's entry of its round's draw
    (:func:`continuation_round`), and the slots that train on (continued, not final)."""
    drawn = {u["id"]: u for u in continuation["universes"]}
    universes = sorted(universes, key=lambda u: u["slot"])
    draws = [drawn[u["id"]] for u in universes]
    return universes, draws, [i for i, d in enumerate(draws) if d["continued"] and not d["final"]]


def not_continued_record(fields: Mapping[str, Any], draw: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    """The full-fidelity record of a universe the draw did not continue (``fields``: its
    identity, :func:`multiverse.runtime.universe_fields`; ``more``: its trainer's own fields)."""
    return {**fields, "status": NOT_CONTINUED, "train_seconds": 0.0, "epochs_run": 0,
            "continuation_probability": draw["probability"], **more}
