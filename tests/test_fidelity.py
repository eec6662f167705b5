"""The continuation draw of multi-fidelity universes (multiverse.fidelity): stated
probabilities with a floor, a budget they sum to, and a nested draw, so that a rerun with
a larger budget continues only new universes."""

import numpy as np
import pytest

from multiverse.fidelity import continuation_draw, continuation_probabilities
from multiverse.ids import universe_id

IDS = [universe_id(r, i) for r in range(3) for i in range(16)]


def test_probabilities_follow_the_score_with_a_floor_and_sum_to_the_budget():
    score = np.r_[np.zeros(16), np.linspace(0, 1, 16), np.full(16, 5.0)]
    p = continuation_probabilities(score, 12, floor=0.05)
    assert p.sum() == pytest.approx(12) and p.min() >= 0.05 and p.max() <= 1
    assert np.all(p[:16] == pytest.approx(0.05)) and np.all(np.diff(p[16:32]) >= 0)
    # a budget that needs a cap: the highest scores continue surely, the rest share the excess
    q = continuation_probabilities(score, 30, floor=0.05)
    assert q.sum() == pytest.approx(30) and np.all(q[32:] == 1.0)
    u = continuation_probabilities(np.ones(48), 12, floor=0.05)
    assert np.allclose(u, 0.25), "equal scores: a uniform continuation"
    with pytest.raises(ValueError, match="floor"):
        continuation_probabilities(score, 12, floor=0.0)


def test_a_larger_budget_continues_every_universe_continued_before():
    score = np.random.default_rng(0).gamma(2.0, size=len(IDS))
    before = prev = None
    for budget in (6, 12, 24, 36, 48):
        p = continuation_probabilities(score, budget, floor=0.05)
        drawn = continuation_draw(11, IDS, p)
        if before is not None:
            assert np.all(drawn[before]), f"budget {budget} drops a universe continued before"
            assert np.all(p >= prev - 1e-12)
        before, prev = drawn, p
    assert drawn.all()
    assert np.array_equal(continuation_draw(11, IDS, p), drawn), "the draw is the seed's and the ids' alone"


def test_the_draw_follows_its_stated_probabilities():
    p = continuation_probabilities(np.r_[np.ones(24), 3 * np.ones(24)], 16, floor=0.1)
    hits = np.mean([continuation_draw(s, IDS, p) for s in range(2000)], axis=0)
    assert np.abs(hits - p).max() < 0.05
