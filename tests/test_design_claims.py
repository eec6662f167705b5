"""The claim-targeted design (design.strategy gp-claims, multiverse.design_claims): its
closed-form reductions against BoTorch's conditioning, the exploration share, seeds,
finished universes and the fallback without claims."""
import logging

import numpy as np
import pytest
import torch

from multiverse.claims import kind
from multiverse.design import design_round
from multiverse.design_gp import candidates, fit_outcomes, gp_ivr_round
from multiverse.design_claims import CLAIM_REFERENCE, block, bernoulli_reduction, gp_claims_round, n_explore
from multiverse.gp import features
from multiverse.space import SearchSpace

SPACE = SearchSpace.from_config({
    "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
    "lr": {"type": "float", "low": 1e-3, "high": 1.0, "log": True},
    "width": {"type": "int", "low": 1, "high": 9},
})
COMPARISON = {"name": "cmp", "type": "comparison", "metric": "acc", "dimension": "optimizer", "a": ["adam"],
              "b": ["sgd"], "relation": ">="}
TREND = {"name": "tr", "type": "trend", "metric": "acc", "dimension": "width", "direction": "increasing"}
BEST = {"name": "eb", "type": "expected_best", "metric": "acc", "dimension": "optimizer", "a": ["adam"],
        "b": ["sgd"], "relation": ">=", "min_budget": 2}
CORRELATION = {"name": "co", "type": "correlation", "x": "loss", "y": "acc", "relation": "negative"}
CLAIMS = [COMPARISON, TREND, BEST, CORRELATION]


def acc(u):
    """adam better at small lr, worse at large: the comparison flips inside the space."""
    x = (np.log10(u["lr"]) + 3) / 3
    return 0.7 + 0.1 * (u["width"] - 5) / 4 + (0.1 - 0.25 * x) * (u["optimizer"] == "adam") - 0.1 * x**2


def observed(n=16, seed=0, noise=0.01):
    us = SPACE.sobol(n, seed)
    rng = np.random.default_rng(seed)
    a = np.array([acc(u) for u in us]) + noise * rng.standard_normal(n)
    return us, {"acc": a, "loss": 1 - a + noise * rng.standard_normal(n)}


def test_a_round_never_proposes_a_finished_universe_and_is_reproducible():
    us, outcomes = observed()
    kw = dict(n=4, seed=3, n_candidates=16, n_reference=16)
    chosen, repl, info = gp_claims_round(SPACE, us, outcomes, CLAIMS, **kw)
    assert len(chosen) == 4 and repl == [None] * 4
    done = {SPACE.key(u) for u in us}
    assert all(SPACE.key(u) not in done for u in chosen) and len({SPACE.key(u) for u in chosen}) == 4
    again, _, info2 = gp_claims_round(SPACE, us, outcomes, CLAIMS, **kw)
    assert again == chosen and info2 == info
    assert info["claims"] == ["cmp", "co", "eb", "tr"] and info["claims_skipped"] == []
    # every candidate finished but the batch: the round takes exactly what is left
    cand = candidates(SPACE, [], 16, 3)
    left = cand[:2]
    rest = [u for u in cand if SPACE.key(u) not in {SPACE.key(v) for v in left}]
    many = us + rest
    big = {k: np.r_[v, [acc(u) for u in rest] if k == "acc" else [1 - acc(u) for u in rest]] for k, v in outcomes.items()}
    last, _, _ = gp_claims_round(SPACE, many, big, CLAIMS, **kw)
    assert {SPACE.key(u) for u in last} == {SPACE.key(u) for u in left}


@pytest.mark.parametrize("q,share,expected", [(4, 0.25, 1), (4, 0.0, 0), (4, 0.5, 2), (8, 0.25, 2), (1, 0.25, 0),
                                              (2, 0.25, 1), (4, 1.0, 4)])
def test_the_exploration_share_is_honoured(q, share, expected):
    assert n_explore(q, share) == expected
    us, outcomes = observed()
    _, _, info = gp_claims_round(SPACE, us, outcomes, [COMPARISON, TREND], n=q, seed=1, n_candidates=16,
                                 n_reference=16, explore_share=share)
    assert info["picks"].count("exploration") == expected
    assert info["picks"][: q - expected] == ["claims"] * (q - expected)


def test_without_claims_the_round_is_gp_ivr_and_says_so(caplog):
    us, outcomes = observed()
    with caplog.at_level(logging.WARNING):
        chosen, _, info = gp_claims_round(SPACE, us, outcomes, [], n=4, seed=2, n_candidates=16, n_reference=16)
    ivr, _, _ = gp_ivr_round(SPACE, us, outcomes, 4, 2, 16, 16)
    assert chosen == ivr
    assert info["fallback"] == "no claims in the config: gp-ivr"
    assert "no claims" in caplog.text


def _setup(claim, seed=0):
    us, outcomes = observed(12, seed, noise=0.02)
    fits = fit_outcomes(SPACE, us, {"acc": outcomes["acc"]}, seed)
    fit = fits["acc"]

    def mean_at(metric, points):
        with torch.no_grad():
            return fit.model.posterior(features(SPACE, points, fit.model)).mean.reshape(-1).numpy()

    (target,) = kind(claim).design_target(SPACE, claim, 8, 5, mean_at)
    cand = SPACE.enumerated(4, 9)
    parts = []
    b = block(fit, [], [target], cand, SPACE, parts)
    return fit, target, cand, b, parts


@pytest.mark.parametrize("claim", [COMPARISON, TREND, BEST], ids=lambda c: c["type"])
def test_closed_form_reductions_equal_botorch_conditioning_at_every_candidate(claim):
    """(a) the statistic's variance and (b) the expected Bernoulli variance of every local
    holds indicator after one observation, against conditioning the GP on it with
    BoTorch's condition_on_observations (for (b), at Gauss-Hermite nodes of the
    observation's predictive distribution)."""
    from torch.distributions import Normal

    fit, target, cand, b, parts = _setup(claim)
    model, scale = fit.model, fit.scale
    X_pts = features(SPACE, target.points, model)
    Phi = Normal(0.0, 1.0).cdf
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()
    for j, u in enumerate(cand):
        xc = features(SPACE, [u], model)
        with torch.no_grad():
            pred = model.posterior(xc, observation_noise=True)
        for part in parts:
            red = b.reduction(part.rows)[:, j]
            var = b.variance(part.rows)
            W = torch.as_tensor(np.asarray(target.statistic if part.kind == "statistic" else target.local,
                                           dtype=float).reshape(len(target.points), -1))
            ys = pred.mean.reshape(()) + pred.variance.sqrt().reshape(()) * torch.as_tensor(nodes)
            future_var, future_p = None, []
            for y in ys:
                cond = model.condition_on_observations(xc, y.reshape(1, 1))
                with torch.no_grad():
                    post = cond.posterior(X_pts)
                m = W.T @ post.mean.reshape(-1) / scale
                v = (W.T @ post.distribution.covariance_matrix @ W).diagonal() / scale**2
                future_var = v
                if part.kind == "holds":
                    future_p.append(Phi((part.sign * m - part.threshold) / v.sqrt()))
            # (a), and the variance part of (b): the observation's value does not matter
            torch.testing.assert_close(var - red, future_var, rtol=1e-5, atol=1e-9)
            if part.kind == "holds":
                p_now = Phi((part.sign * part.mean - part.threshold) / var.sqrt())
                brute = p_now * (1 - p_now) - sum(w * p * (1 - p) for w, p in zip(weights, future_p))
                closed, now = bernoulli_reduction(part.mean, part.sign, part.threshold, var, red[:, None])
                torch.testing.assert_close(now, p_now * (1 - p_now))
                torch.testing.assert_close(closed[:, 0], brute.clamp_min(0), rtol=2e-3, atol=1e-6)


def test_a_gp_claims_study_round_reads_its_claims_from_the_design_settings():
    from conftest import design_config

    from multiverse.spec import round_settings

    design = {**design_config(), "strategy": "gp-claims", "explore_share": 0.25, "outcomes": ["acc"]}
    assert round_settings(design, 0, CLAIMS) == {"strategy": "sobol"}
    settings = round_settings(design, 1, [COMPARISON])
    assert settings["claims"] == [COMPARISON] and settings["explore_share"] == 0.25
    us, outcomes = observed()
    records = [{"id": f"r0u{i:03d}", "params": u, "status": "ok",
                "metrics": {"acc": float(outcomes["acc"][i]), "loss": float(outcomes["loss"][i])}}
               for i, u in enumerate(us)]
    chosen, _, info = design_round(1, [16, 4], SPACE, {**settings, "candidates": 16, "reference": 16}, 7, records)
    assert info["strategy"] == "gp-claims" and info["claims"] == ["cmp"] and len(chosen) == 4
    assert CLAIM_REFERENCE >= 8


@pytest.mark.slow
def test_one_line_switches_a_study_to_gp_claims_and_its_rounds_target_the_claims(tmp_path):
    """The tiny study with ``design.strategy: gp-claims``, through the real workflow to its
    round-1 design: round 0 is the same Sobol round as gp-ivr's, round 1 is chosen for the
    config's claims with one exploration pick of two."""
    import json
    from pathlib import Path

    from conftest import make_checkout, snakemake

    cwd = make_checkout(tmp_path, design={"strategy": "gp-claims", "explore_share": 0.5})
    target = Path("results/tiny/design/round_1.json")
    res = snakemake(cwd, "--cores", "2", str(target))
    assert res.returncode == 0, res.stderr[-3000:]
    r1 = json.loads((cwd / target).read_text())
    assert r1["strategy"] == "gp-claims" and len(r1["universes"]) == 2
    assert r1["diagnostics"]["picks"] == ["claims", "exploration"]
    assert set(r1["diagnostics"]["claims"]) <= {"adam_vs_sgd", "adaptive_gap", "gap_grows_with_batch",
                                               "train_loss_vs_gap", "adam_expected_best"}
    assert r1["diagnostics"]["claims"]
    r0 = json.loads((cwd / "results/tiny/design/round_0.json").read_text())
    assert r0["strategy"] == "sobol"


def test_claims_count_in_the_multiverse_hash_only_where_they_choose_the_universes():
    from multiverse.spec import load_config, multiverse_hash, with_defaults

    from conftest import TINY

    config = with_defaults(load_config(TINY))
    edited = {**config, "claims": config["claims"][:1]}
    assert multiverse_hash(config) == multiverse_hash(edited)  # gp-ivr: claims are read by the report only
    assert multiverse_hash(config) == multiverse_hash({**config, "design": {**config["design"], "explore_share": 0.5}})
    claims = {**config, "design": {**config["design"], "strategy": "gp-claims"}}
    assert multiverse_hash(claims) != multiverse_hash({**claims, "claims": config["claims"][:1]})
    assert multiverse_hash(claims) != multiverse_hash({**claims, "design": {**claims["design"], "explore_share": 0.5}})
