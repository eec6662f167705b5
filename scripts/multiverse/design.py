"""Design rounds: which universes to train next.

Round 0 is a scrambled Sobol sample. Later rounds explore: a GP per outcome is fitted
to every finished universe, and the batch is chosen greedily from a large candidate
set (Sobol points crossed with every categorical level) to minimise the *integrated
posterior variance* (IPV) over a reference set that covers the space the same way.

Why not ``optimize_acqf`` on BoTorch's ``qNegIntegratedPosteriorVariance``: on this
kind of 2-core machine it took 35-80 s per round of 4 (measured; see the README),
almost all of it in the acquisition optimiser. For a GP, adding a point ``c`` with
noise ``s2`` lowers the posterior covariance by the rank-one term
``C[:, c] C[c, :] / (C[c, c] + s2)`` (the variance does not depend on the fantasised
values), so the IPV reduction of every candidate is one matrix expression and the
greedy batch is ``q`` rank-one updates. The result equals BoTorch's qNIPV for the
same points (tested in ``tests/test_design.py``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from multiverse.config import derive_seed, replicate_seed, universe_id
from multiverse.gp import MIN_FIT
from multiverse.space import SearchSpace


def greedy_ivr(
    covs: Sequence["torch.Tensor"],  # noqa: F821
    noises: Sequence[float],
    n_ref: int,
    q: int,
    allowed: "torch.Tensor",  # noqa: F821
) -> tuple[list[int], list[float]]:
    """Greedy batch minimising the mean integrated posterior variance over outcomes.

    Args:
        covs: per outcome, the ``(n_ref + n_cand) x (n_ref + n_cand)`` latent posterior
            covariance of the reference points followed by the candidates, in
            standardised outcome units (so outcomes are comparable).
        noises: per outcome, the observation-noise variance in the same units.
        n_ref: number of reference points (the integration set).
        q: batch size.
        allowed: ``n_cand`` booleans; False for candidates that must not be chosen.

    Returns:
        Candidate indices in the order chosen, and the mean reference variance
        (averaged over outcomes) before the batch and after each pick.
    """
    import torch

    covs = [c.clone() for c in covs]
    allowed = allowed.clone()
    ipv = [float(np.mean([c.diagonal()[:n_ref].mean().item() for c in covs]))]
    picks: list[int] = []
    for _ in range(q):
        score = torch.zeros(len(allowed), dtype=covs[0].dtype)
        for c, s2 in zip(covs, noises):
            cross = c[:n_ref, n_ref:]  # n_ref x n_cand
            score += (cross**2).mean(0) / (c.diagonal()[n_ref:] + s2)
        score[~allowed] = -torch.inf
        j = int(torch.argmax(score))
        picks.append(j)
        allowed[j] = False
        for c, s2 in zip(covs, noises):
            col = c[:, n_ref + j].clone()
            c -= torch.outer(col, col) / (col[n_ref + j] + s2)
        ipv.append(float(np.mean([c.diagonal()[:n_ref].mean().item() for c in covs])))
    return picks, ipv


def gp_ivr_round(
    space: SearchSpace,
    observed: Sequence[Mapping[str, Any]],
    outcomes: Mapping[str, Sequence[float]],
    n: int,
    seed: int,
    n_candidates: int,
    n_reference: int,
) -> tuple[list[dict], dict[str, Any]]:
    """Choose ``n`` new universes by greedy IPV reduction over every outcome's GP.

    Args:
        observed: parameters of every finished universe (failed ones included:
            they are never proposed again, and their non-finite outcomes are left
            out of the GP).
        outcomes: outcome name -> one value per observed universe.
        n_candidates / n_reference: Sobol points over the numeric dimensions,
            each crossed with every categorical level combination.
    """
    import torch

    from multiverse.gp import features, fit_gp, outcome_scale

    cand = space.enumerated(n_candidates, derive_seed(seed, 1))
    ref = space.enumerated(n_reference, derive_seed(seed, 2))
    done = {space.key(u) for u in observed}
    allowed = torch.tensor([space.key(u) not in done for u in cand])
    Z = features(space, ref + cand)
    covs, noises, info = [], [], {}
    for name, y in outcomes.items():
        model = fit_gp(space, observed, y, seed)
        with torch.no_grad():
            cov = model.posterior(Z).distribution.covariance_matrix
        s2 = outcome_scale(model) ** 2
        covs.append(cov / s2)
        noises.append(float(model.likelihood.noise.detach().squeeze()))
        info[name] = {
            "n_fit": int(np.isfinite(np.asarray(y, dtype=float)).sum()),
            "noise_variance_standardised": noises[-1],
            "lengthscales": dict(
                zip(space.feature_names(), model.covar_module.lengthscale.detach().squeeze().tolist())
            ),
        }
    picks, ipv = greedy_ivr(covs, noises, len(ref), n, allowed)
    return [cand[j] for j in picks], {"outcomes": info, "mean_reference_variance": ipv}


def design_round(
    round_: int,
    n: int,
    space: SearchSpace,
    design: Mapping[str, Any],
    seed: int,
    previous: Sequence[Mapping[str, Any]],
) -> tuple[list[dict], dict[str, Any]]:
    """The universes of design round ``round_`` given the records of earlier rounds.

    ``previous`` holds one metrics record per finished universe (``params``,
    ``status`` and ``metrics``). Returns the new universes' parameters and
    diagnostics for the round's state file.
    """
    round_seed = derive_seed(seed, round_)
    strategy = "sobol" if round_ == 0 or design["strategy"] == "sobol" else design["strategy"]
    observed = [p["params"] for p in previous]
    outcomes = {m: [p["metrics"][m] for p in previous] for m in design["outcomes"]}
    # Failed universes have no outcome; a surrogate needs MIN_FIT finite ones.
    outcomes = {m: y for m, y in outcomes.items() if np.isfinite(np.asarray(y, dtype=float)).sum() >= MIN_FIT}
    info: dict[str, Any] = {}
    if strategy != "sobol" and not outcomes:
        strategy, info = "sobol", {"fallback": f"fewer than {MIN_FIT} finite outcomes to fit a GP"}
    if strategy == "sobol":
        # Later Sobol rounds continue the same sequence rather than restarting it.
        skip = len(previous)
        universes = space.sobol(skip + n, derive_seed(seed, 0))[skip:]
        return universes, {"strategy": "sobol", **info}
    universes, info = gp_ivr_round(
        space, observed, outcomes, n, round_seed, design["candidates"], design["reference"]
    )
    return universes, {"strategy": strategy, **info}


def design_state(
    round_: int,
    sizes: Sequence[int],
    shard_size: int,
    space_config: Mapping[str, Any],
    design: Mapping[str, Any],
    seed: int,
    previous: Sequence[Mapping[str, Any]],
    versions: Mapping[str, str],
) -> dict[str, Any]:
    """The state file of design round ``round_``: its universes (id, shard, seed,
    parameters), the strategy and its diagnostics."""
    space = SearchSpace.from_config(space_config)
    universes, info = design_round(round_, sizes[round_], space, design, seed, previous)
    return {
        "round": round_,
        "strategy": info.pop("strategy"),
        "n_previous": len(previous),
        "diagnostics": info,
        "versions": dict(versions),
        "universes": [
            {
                "id": universe_id(round_, i),
                "round": round_,
                "index": i,
                "shard": i // shard_size,
                "slot": i % shard_size,
                "seed": replicate_seed(seed, round_, i, 0),
                "params": u,
            }
            for i, u in enumerate(universes)
        ],
    }
