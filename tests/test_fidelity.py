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


def test_low_epochs_from_a_count_or_a_fraction():
    from multiverse.fidelity import low_epochs

    assert low_epochs({"epochs": 15}, 60) == 15 and low_epochs({"epochs": 15}, 10) == 10
    assert low_epochs({"fraction": 0.25}, 60) == 15 and low_epochs({"fraction": 0.25}, 5) == 2
    assert low_epochs({"fraction": 0.25}, None) == 1


def test_the_active_score_is_the_change_over_the_second_half():
    from multiverse.fidelity import active_score

    history = [{"val_acc": v} for v in (0.1, 0.3, 0.5, 0.6)]
    assert active_score(history, "val_acc") == pytest.approx(0.3)  # epoch 4 against epoch 2
    assert np.isnan(active_score([], "val_acc")) and np.isnan(active_score(history, "test_acc"))


def low_record(uid, status="ok", epochs=(0.2, 0.5), fidelity=True):
    return {"id": uid, "status": status, "history": [{"val_acc": v} for v in epochs],
            **({"fidelity_epochs": len(epochs)} if fidelity else {})}


@pytest.mark.parametrize("probability", ["uniform", "active"])
def test_a_round_s_draw_states_every_probability_and_continues_the_final_ones(probability):
    """multiverse.fidelity.continuation_round: the probabilities (from the low fidelity
    only), the draw (uniform numbers below them), and universes final at the low
    fidelity (diverged, failed, no epochs left) continued with probability 1."""
    from multiverse.fidelity import continuation_round

    ids = IDS[:16]
    design = {"round": 0, "universes": [{"id": i, "index": k, "shard": k // 4} for k, i in enumerate(ids)]}
    records = [low_record(i, epochs=(0.1, 0.1 + 0.05 * k)) for k, i in enumerate(ids[:13])]
    records += [low_record(ids[13], "diverged"), low_record(ids[14], "failed"), low_record(ids[15], fidelity=False)]
    settings = {"share": 0.25, "probability": probability, "floor": 0.05, "metric": "val_acc"}
    state = continuation_round(design, records, settings, seed=7)
    us = state["universes"]
    assert [u["final"] for u in us] == [False] * 13 + [True] * 3
    assert all(u["probability"] == 1 and u["continued"] for u in us[13:])
    p = np.array([u["probability"] for u in us[:13]])
    assert p.sum() == pytest.approx(0.25 * 13) and p.min() >= 0.05
    assert all(u["continued"] == (u["uniform"] < u["probability"]) for u in us[:13])
    if probability == "uniform":
        assert np.allclose(p, 0.25)
    else:  # the universes whose low fidelity still moved most get the most
        assert np.all(np.diff(p) >= -1e-12) and p[-1] > p[0]
    again = continuation_round(design, records, {**settings, "share": 0.5}, seed=7)["universes"]
    assert all(b["continued"] for a, b in zip(us, again) if a["continued"]), "a larger budget is nested"


def test_without_a_floor_the_active_probabilities_are_halfway_to_uniform():
    """No ``floor`` in ``design.fidelity``: every active probability is at least half the
    share (the midpoint of the budget-preserving path to uniform continuation, Li, Zrnic
    & Candes 2025), so no continued universe weighs more than ``2 / share``; the design
    file states the floor it used."""
    from multiverse.fidelity import continuation_round, default_floor

    ids = IDS[:16]
    design = {"round": 0, "universes": [{"id": i, "index": k, "shard": k // 4} for k, i in enumerate(ids)]}
    # four universes' low fidelity still moved, the others' not at all
    records = [low_record(i, epochs=(0.1, 0.1 + (0.05 if k % 4 == 3 else 0.0))) for k, i in enumerate(ids)]
    state = continuation_round(design, records, {"share": 0.25, "probability": "active", "metric": "val_acc"}, seed=3)
    p = np.array([u["probability"] for u in state["universes"]])
    assert state["settings"]["floor"] == default_floor(0.25) == pytest.approx(0.125)
    assert p.sum() == pytest.approx(0.25 * 16)
    assert np.allclose(p[3::4], 0.625) and np.allclose(np.delete(p, np.s_[3::4]), 0.125)
    assert (1 / p).max() == pytest.approx(2 / 0.25)
    # the floor grows with the share, and every probability with it: a larger budget stays nested
    more = continuation_round(design, records, {"share": 0.5, "probability": "active", "metric": "val_acc"}, seed=3)
    assert all(np.array([u["probability"] for u in more["universes"]]) >= p - 1e-12)
    assert all(b["continued"] for a, b in zip(state["universes"], more["universes"]) if a["continued"])
