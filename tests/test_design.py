import numpy as np
import pytest
import torch

from multiverse.design import design_round, design_state, greedy_ivr, gp_ivr_round
from multiverse.gp import features, fit_gp, outcome_scale
from multiverse.space import SearchSpace

SPACE_2D = {"x": {"type": "float", "low": 0.0, "high": 1.0}, "y": {"type": "float", "low": 1e-3, "high": 1.0, "log": True}}


def _toy(space, n=12, seed=0):
    us = space.sobol(n, seed)
    x = space.encode(us)
    y = np.sin(6 * x[:, 0]) + 0.3 * x[:, 1] + 0.05 * np.random.default_rng(seed).standard_normal(n)
    return us, y


def test_closed_form_ivr_equals_botorch_qnipv():
    """The greedy score is BoTorch's qNegIntegratedPosteriorVariance, computed in closed form."""
    from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance

    space = SearchSpace.from_config(SPACE_2D)
    us, y = _toy(space)
    model = fit_gp(space, us, y, seed=0)
    ref, cand = space.enumerated(64, 1), space.enumerated(32, 2)
    Xr, Xc = features(space, ref), features(space, cand)
    with torch.no_grad():
        cov = model.posterior(torch.cat([Xr, Xc])).distribution.covariance_matrix
        s2 = float(model.likelihood.noise) * outcome_scale(model) ** 2
        ours = cov.diagonal()[:64].mean() - (cov[:64, 64:] ** 2).mean(0) / (cov.diagonal()[64:] + s2)
        acq = qNegIntegratedPosteriorVariance(model, mc_points=Xr)
        theirs = -acq(Xc.unsqueeze(1))
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-8)


def test_greedy_batch_explores_away_from_data():
    space = SearchSpace.from_config(SPACE_2D)
    # every observation in the lower-left corner of the unit square
    us = [{"x": float(a), "y": float(10 ** (-3 + 0.3 * b))} for a, b in np.random.default_rng(0).uniform(0, 0.3, (10, 2))]
    y = [u["x"] for u in us]
    picks, info = gp_ivr_round(space, us, {"m": y}, 4, seed=1, n_candidates=256, n_reference=128)
    assert len(picks) == 4
    assert all(p["x"] > 0.3 or p["y"] > 10 ** (-3 + 0.9) for p in picks)
    v = info["mean_reference_variance"]
    assert all(a > b for a, b in zip(v, v[1:])), "each pick must lower the integrated variance"


def test_greedy_ivr_respects_allowed_and_does_not_repeat():
    cov = torch.eye(6, dtype=torch.float64) + 0.5
    allowed = torch.tensor([True, False, True, True])
    picks, _ = greedy_ivr([cov], [0.1], n_ref=2, q=3, allowed=allowed)
    assert 1 not in picks and len(set(picks)) == 3


def test_design_is_reproducible_and_never_repeats_a_finished_universe(default_config):
    space = SearchSpace.from_config(default_config["space"])
    design = {**default_config["design"], "candidates": 64, "reference": 32}
    previous = []
    for i, u in enumerate(space.sobol(12, 5)):
        acc = 0.9 if u["optimizer"] in ("adam", "rmsprop") else 0.5 + 0.1 * np.log10(u["lr"])
        previous.append({"params": u, "metrics": {"test_acc": acc, "gap": 0.02 * i}})
    previous[3]["metrics"]["test_acc"] = float("nan")  # a failed universe stays in the data
    a, _ = design_round(1, 4, space, design, seed=7, previous=previous)
    b, _ = design_round(1, 4, space, design, seed=7, previous=previous)
    c, _ = design_round(1, 4, space, design, seed=8, previous=previous)
    assert a == b and a != c
    done = {space.key(p["params"]) for p in previous}
    assert not done & {space.key(u) for u in a}
    assert len({space.key(u) for u in a}) == 4


def test_design_state_layout(default_config):
    cfg = default_config
    state = design_state(0, [8, 4], 4, cfg["space"], cfg["design"], cfg["seed"], [], {"torch": "x"})
    assert state["strategy"] == "sobol" and len(state["universes"]) == 8
    assert [(u["shard"], u["slot"]) for u in state["universes"]][:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert len({u["seed"] for u in state["universes"]}) == 8
    assert [u["id"] for u in state["universes"]][:2] == ["r0u000", "r0u001"]
