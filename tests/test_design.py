import numpy as np
import pytest
from conftest import MIXED_SPACE, design_config
import torch

from multiverse.design import design_round, design_state, universe_outcomes
from multiverse.design_gp import greedy_ivr, gp_ivr_round
from multiverse.gp import features, fit_gp, outcome_scale
from multiverse.space import SearchSpace
from multiverse.spec.strategies import STRATEGIES
from multiverse.stats import seed_noise

SPACE_2D = {"x": {"type": "float", "low": 0.0, "high": 1.0}, "y": {"type": "float", "low": 1e-3, "high": 1.0, "log": True}}
MIXED = MIXED_SPACE


def _toy(space, n=12, seed=0):
    us = space.sobol(n, seed)
    x = space.encode(us)
    y = np.sin(6 * x[:, 0]) + 0.3 * np.log10(x[:, 1]) + 0.05 * np.random.default_rng(seed).standard_normal(n)
    return us, y


def _mixed_outcome(u):
    """A smooth outcome of the mixed space that depends on eps only where eps is active."""
    f = -(np.log10(u["lr"]) + 2) ** 2 / 4 + 0.1 * np.log2(u["batch_size"] / 16)
    if u["eps"] is not None:
        f += 0.2 * np.log10(u["eps"]) / 10
    return f + {"sgd": 0.0, "momentum": 0.1, "adam": 0.2, "rmsprop": 0.15}[u["optimizer"]]


def _records(space, universes, f, seeds=1, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {"id": f"r0u{i:03d}", "params": u, "metrics": {"m": f(u) + noise * rng.standard_normal()}}
        for i, u in enumerate(universes) for _ in range(seeds)
    ]


@pytest.mark.parametrize("categorical", ["onehot", "kernel"])
def test_closed_form_ivr_equals_botorch_qnipv(categorical):
    """The greedy score is BoTorch's qNegIntegratedPosteriorVariance, computed in closed form,
    for either encoding of a categorical dimension."""
    from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance

    space = SearchSpace.from_config({**SPACE_2D, "c": {"type": "categorical", "choices": ["a", "b"]}})
    us, y = _toy(space)
    y = y + np.array([0.5 * (u["c"] == "a") for u in us])
    model = fit_gp(space, us, y, seed=0, categorical=categorical)
    ref, cand = space.enumerated(32, 1), space.enumerated(16, 2)
    Xr, Xc = features(space, ref, model), features(space, cand, model)
    with torch.no_grad():
        cov = model.posterior(torch.cat([Xr, Xc])).distribution.covariance_matrix
        s2 = float(model.likelihood.noise) * outcome_scale(model) ** 2
        ours = cov.diagonal()[:64].mean() - (cov[:64, 64:] ** 2).mean(0) / (cov.diagonal()[64:] + s2)
        acq = qNegIntegratedPosteriorVariance(model, mc_points=Xr)
        theirs = -acq(Xc.unsqueeze(1))
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-8)


def test_log_and_integer_dimensions_go_through_the_input_transform():
    space = SearchSpace.from_config(MIXED)
    us = space.sobol(16, 0)
    model = fit_gp(space, us, [_mixed_outcome(u) for u in us], seed=0)
    names = [type(t).__name__ for t in model.input_transform.values()]
    assert names == ["Round", "Log10", "Normalize"]
    cols = space.columns()
    u = {"optimizer": "adam", "lr": 1e-2, "batch_size": 64, "momentum": None, "eps": 1e-5}
    z = model.input_transform(features(space, [u]))[0]
    assert float(z[cols["lr"][0]]) == pytest.approx(0.5)  # log10 1e-2 halfway between -4 and 0
    assert float(z[cols["batch_size"][0]]) == pytest.approx(0.5)  # log 64 halfway between log 16 and log 256
    x = features(space, [u, {**u, "batch_size": 64.4}])
    with torch.no_grad():
        m = model.posterior(x).mean.squeeze(-1)
    assert float(m[0]) == pytest.approx(float(m[1]), abs=1e-10), "integers are rounded before the kernel"


def test_inactive_dimensions_do_not_move_the_surrogate():
    """Whatever value a universe recorded for a dimension it did not use, the GP is the same."""
    space = SearchSpace.from_config(MIXED)
    us = space.sobol(24, 1)
    y = [_mixed_outcome(u) for u in us]
    rng = np.random.default_rng(0)
    junk = [{**u, "eps": float(10 ** rng.uniform(-10, 0)) if u["eps"] is None else u["eps"],
             "momentum": float(rng.uniform(0.5, 0.99)) if u["momentum"] is None else u["momentum"]} for u in us]
    a, b = fit_gp(space, us, y, seed=0), fit_gp(space, junk, y, seed=0)
    X = features(space, space.enumerated(16, 3))
    with torch.no_grad():
        torch.testing.assert_close(a.posterior(X).mean, b.posterior(X).mean)


@pytest.mark.parametrize("categorical", ["onehot", "kernel"])
def test_greedy_batch_explores_away_from_data(categorical):
    space = SearchSpace.from_config(SPACE_2D)
    # every observation in the lower-left corner of the unit square
    us = [{"x": float(a), "y": float(10 ** (-3 + 0.3 * b))} for a, b in np.random.default_rng(0).uniform(0, 0.3, (10, 2))]
    y = [u["x"] for u in us]
    picks, repl, info = gp_ivr_round(space, us, {"m": y}, 4, seed=1, n_candidates=256, n_reference=128,
                                     categorical=categorical)
    assert len(picks) == 4 and repl == [None] * 4
    assert all(p["x"] > 0.3 or p["y"] > 10 ** (-3 + 0.9) for p in picks)
    v = info["mean_reference_variance"]
    assert all(a > b for a, b in zip(v, v[1:])), "each pick must lower the integrated variance"


def test_greedy_ivr_respects_allowed_and_does_not_repeat():
    cov = torch.eye(6, dtype=torch.float64) + 0.5
    allowed = torch.tensor([True, False, True, True])
    picks, _ = greedy_ivr([cov], [0.1], n_ref=2, q=3, allowed=allowed)
    assert 1 not in picks and len(set(picks)) == 3


def _previous(space, n=12, seed=5):
    previous = []
    for i, u in enumerate(space.sobol(n, seed)):
        acc = 0.9 if u["optimizer"] in ("adam", "rmsprop") else 0.5 + 0.1 * np.log10(u["lr"])
        previous.append({"id": f"r0u{i:03d}", "params": u, "metrics": {"test_acc": acc, "gap": 0.02 * i}})
    previous[3]["metrics"]["test_acc"] = float("nan")  # a failed universe stays in the data
    return previous


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_is_reproducible_and_never_repeats_a_finished_universe(strategy):
    space = SearchSpace.from_config(MIXED)
    design = design_config(strategy=strategy, outcomes=["test_acc", "gap"], candidates=64, reference=32, grid_levels=4)
    previous = _previous(space)
    if strategy == "grid":  # the grid's own first universes are what came before
        grid = space.grid(4, __import__("multiverse.ids").ids.derive_seed(7, 4))
        for p, u in zip(previous, grid):
            p["params"] = u
    a, ra, _ = design_round(1, [12, 6], space, design, seed=7, previous=previous)
    b, rb, _ = design_round(1, [12, 6], space, design, seed=7, previous=previous)
    c, _, _ = design_round(1, [12, 6], space, design, seed=8, previous=previous)
    assert a == b and ra == rb and a != c
    done = {space.key(p["params"]) for p in previous}
    assert not done & {space.key(u) for u in a}
    assert len({space.key(u) for u in a}) == 6 and ra == [None] * 6
    for u in a:  # conditional dimensions are set exactly where active
        assert (u["eps"] is not None) == (u["optimizer"] in ("adam", "rmsprop"))
        assert (u["momentum"] is not None) == (u["optimizer"] == "momentum")


def test_a_universe_differing_only_in_an_inactive_dimension_is_a_duplicate():
    """An sgd universe that recorded an eps is still the sgd universe: never proposed again."""
    space = SearchSpace.from_config({"optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
                                     "batch_size": {"type": "int", "low": 1, "high": 3},
                                     "eps": {"type": "float", "low": 1e-8, "high": 1e-2, "log": True,
                                             "when": {"optimizer": ["adam"]}}})
    sgd = [{"optimizer": "sgd", "batch_size": k, "eps": 1e-3 * k} for k in (1, 2, 3)]  # every sgd universe, eps junk
    adam = [{"optimizer": "adam", "batch_size": 2, "eps": 1e-4}]
    previous = _records(space, sgd + adam, lambda u: float(u["batch_size"]))
    for strategy in ("gp-ivr", "random", "sobol"):
        design = design_config(strategy=strategy, outcomes=["m"], candidates=16, reference=16)
        us, _, _ = design_round(1, [4, 4], space, design, 3, previous)
        assert all(u["optimizer"] == "adam" for u in us), strategy


def test_seed_noise_shrinks_towards_the_pooled_variance():
    v = np.array([[0.0, 0.0], [1.0, -1.0], [2.0, np.nan], [np.nan, np.nan]])
    mean, yvar, per_seed, pooled = seed_noise(v)
    np.testing.assert_allclose(mean[:3], [0.0, 0.0, 2.0])
    assert np.isnan(mean[3]) and np.isnan(yvar[3])
    assert pooled == pytest.approx(1.0)  # (0 + 2) / 2 degrees of freedom
    np.testing.assert_allclose(per_seed[:3], [(0 + 2) / 3, (2 + 2) / 3, 1.0])
    np.testing.assert_allclose(yvar[:3], [1 / 3, 2 / 3, 1.0])


def test_replicates_give_the_gp_each_universes_observed_noise():
    from gpytorch.likelihoods import FixedNoiseGaussianLikelihood

    space = SearchSpace.from_config(SPACE_2D)
    previous = _records(space, space.sobol(10, 0), lambda u: u["x"], seeds=3, noise=0.1)
    us, ids, values = universe_outcomes(space, previous, ["m"])
    assert len(us) == 10 and values["m"].shape == (10, 3) and ids[0] == "r0u000"
    mean, yvar, _, _ = seed_noise(values["m"])
    model = fit_gp(space, us, mean, 0, yvar=yvar)
    assert isinstance(model.likelihood, FixedNoiseGaussianLikelihood)
    np.testing.assert_allclose(model.likelihood.noise.numpy() * outcome_scale(model) ** 2, yvar, rtol=1e-6)


def test_replicates_are_chosen_where_noise_dominates_and_not_otherwise():
    space = SearchSpace.from_config(SPACE_2D)
    universes = space.sobol(32, 0)
    design = design_config(outcomes=["m"], replicates=3, candidates=128, reference=64)
    signal = lambda u: np.sin(6 * u["x"]) + np.log10(u["y"])  # noqa: E731
    quiet = _records(space, universes, signal, seeds=3, noise=1e-3)
    _, repl, info = design_round(1, [32, 4], space, design, 0, quiet)
    assert repl == [None] * 4 and info["replicate_ratio"] > 0.99
    noisy = _records(space, universes, lambda u: 0.0, seeds=3, noise=1.0)  # seeds differ, universes do not
    chosen, repl, info = design_round(1, [32, 4], space, design, 0, noisy)
    assert info["replicate_ratio"] < 0.2
    assert all(r is not None for r in repl)
    by_id = {p["id"]: p["params"] for p in noisy}
    assert all(space.key(by_id[r]) == space.key(u) for r, u in zip(repl, chosen))


def test_a_replicate_in_the_design_state_trains_under_new_seeds():
    space = SearchSpace.from_config(SPACE_2D)
    noisy = _records(space, space.sobol(32, 0), lambda u: 0.0, seeds=3, noise=1.0)
    for p in noisy:
        p["seed"] = 1000 + int(p["id"][3:])
    design = design_config(outcomes=["m"], replicates=3, candidates=64, reference=32)
    state = design_state(1, [32, 2], 2, SPACE_2D, design, 11, noisy, {})
    reps = [u for u in state["universes"] if u["replicate_of"]]
    assert reps, "pure seed noise: the round adds seeds to existing universes"
    old = {p["id"]: p for p in noisy}
    for u in reps:
        assert u["params"] == old[u["replicate_of"]]["params"] and u["id"].startswith("r1u")
        assert u["seed"] != old[u["replicate_of"]]["seed"]


def test_failed_universes_are_kept_but_never_proposed_or_replicated():
    space = SearchSpace.from_config(SPACE_2D)
    previous = _records(space, space.sobol(8, 0), lambda u: 0.0, seeds=2, noise=1.0)
    for p in previous[:4]:
        p["metrics"]["m"] = float("nan")  # universes r0u000 and r0u001 failed
    design = design_config(outcomes=["m"], replicates=2, candidates=32, reference=32)
    us, repl, info = design_round(1, [8, 4], space, design, 0, previous)
    assert info["n_replicate_candidates"] == 6 and info["outcomes"]["m"]["n_fit"] == 6
    assert not {"r0u000", "r0u001"} & set(repl)
    failed = {space.key(p["params"]) for p in previous[:4]}
    assert not failed & {space.key(u) for u, r in zip(us, repl) if r is None}


def test_grid_runs_out_with_a_clear_error():
    space = SearchSpace.from_config(SPACE_2D)
    with pytest.raises(ValueError, match="design.grid_levels"):
        design_round(1, [4, 8], space, design_config(strategy="grid", grid_levels=3, outcomes=["m"]), 0,
                     _records(space, space.grid(3, 0)[:4], lambda u: 0.0))


def test_design_state_layout(config):
    cfg = config
    state = design_state(0, [8, 4], 4, cfg["space"], cfg["design"], cfg["seed"], [], {"torch": "x"})
    assert state["strategy"] == "sobol" and len(state["universes"]) == 8
    assert [(u["shard"], u["slot"]) for u in state["universes"]][:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert len({u["seed"] for u in state["universes"]}) == 8
    assert [u["id"] for u in state["universes"]][:2] == ["r0u000", "r0u001"]
    assert all(u["replicate_of"] is None for u in state["universes"])


def test_each_round_is_given_only_the_design_settings_it_uses():
    from multiverse.spec import round_settings

    design = {"strategy": "gp-ivr", "initial": 16, "rounds": 4, "batch": 8, "outcomes": ["val_acc"], "candidates": 512,
              "reference": 256, "replicates": 1, "categorical": "onehot", "grid_levels": 5, "threads": 2}
    assert round_settings(design, 0) == {"strategy": "sobol"}
    assert round_settings(design, 2) == {"strategy": "gp-ivr", "outcomes": ["val_acc"], "candidates": 512,
                                         "reference": 256, "replicates": 1, "categorical": "onehot"}
    assert round_settings({**design, "strategy": "sobol"}, 3) == {"strategy": "sobol"}
    assert round_settings({**design, "strategy": "random"}, 0) == {"strategy": "random"}
    assert round_settings({**design, "strategy": "grid"}, 1) == {"strategy": "grid", "grid_levels": 5}


@pytest.mark.parametrize("strategy", ["sobol", "random", "grid"])
def test_a_space_only_round_reads_the_earlier_design_files_and_writes_what_their_metrics_give(config, strategy):
    """A Sobol, random or grid round's input is the earlier rounds' design files (so it
    need not wait for their training): its state file equals the one the earlier rounds'
    metrics records give, a failed universe's among them."""
    from multiverse.spec import round_settings

    design = round_settings({**config["design"], "strategy": strategy, "grid_levels": 4}, 2)  # as rule design's params
    args = ([4, 4, 4], 4, config["space"], design, config["seed"])
    r0 = design_state(0, *args, [], {})
    r1 = design_state(1, *args, [r0], {})
    designs = [r0, r1]
    metrics = [{"id": u["id"], "replicate_of": u["replicate_of"], "params": u["params"], "status": "ok",
                "metrics": {"val_acc": 0.5, "train_loss": 1.0}} for d in designs for u in d["universes"]]
    metrics[0] = {**metrics[0], "status": "failed", "metrics": {"val_acc": float("nan"), "train_loss": float("nan")}}
    from_designs, from_metrics = design_state(2, *args, designs, {}), design_state(2, *args, metrics, {})
    assert from_designs == from_metrics
    assert from_designs["n_previous"] == 8
    raw = {**config["design"], "strategy": strategy, "grid_levels": 4}  # outcomes too: a space-only round reads none
    assert design_state(2, [4, 4, 4], 4, config["space"], raw, config["seed"], designs, {}) == from_designs
    done = {SearchSpace.from_config(config["space"]).key(u["params"]) for d in designs for u in d["universes"]}
    assert not done & {SearchSpace.from_config(config["space"]).key(u["params"]) for u in from_designs["universes"]}
