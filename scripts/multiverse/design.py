"""Design rounds: which universes to train next.

Strategies (``design.strategy``), each reproducible from the study's seed:

- ``gp-ivr`` (default): round 0 is a scrambled Sobol sample; later rounds explore. A
  GP per outcome is fitted to every finished universe, and the batch is chosen
  greedily from a large candidate set (Sobol points crossed with every categorical
  level) to minimise the *integrated posterior variance* (IPV) over a reference set
  that covers the space the same way, averaged over the outcomes in standardised units.
- ``sobol``: one scrambled Sobol sequence, each round continuing it.
- ``random``: independent uniform draws (log dimensions uniform in log space).
- ``grid``: a full factorial grid (``design.grid_levels`` values per numeric
  dimension), visited in a seeded random order, each round taking the next slice.

Why not ``optimize_acqf`` on BoTorch's ``qNegIntegratedPosteriorVariance``: speed
(``benchmarks/design_speed.py``; its table is in the README), almost all of its time
in the acquisition optimiser. For a GP, adding a point ``c`` with noise ``s2`` lowers the posterior
covariance by the rank-one term ``C[:, c] C[c, :] / (C[c, c] + s2)`` (the variance does
not depend on the value observed), so the IPV reduction of every candidate is one
matrix expression and the greedy batch is ``q`` rank-one updates. The score equals
BoTorch's qNIPV for the same points (tested in ``tests/test_design.py``).

Replicates: with ``design.replicates: r >= 2`` the design reads ``r`` seeds of every
earlier universe, and each outcome's GP gets each universe's mean and its observed
noise (``train_Yvar``: the seeds' variance, shrunk towards the pooled variance, over
the number of seeds). Every finished universe then also competes as a candidate: *r
more seeds of it*, which lowers its noise like any new observation at that point.

Rule: each pick of a round is the best replicate instead of the best new universe
when the replicate's reduction of the integrated posterior variance is at least
``rho`` times the new universe's, where ``rho = signal / (signal + noise)`` is the
share of signal in one observation (signal: the variance of the universes' means
less their mean noise; noise: the pooled seed variance over ``r``; averaged over the
outcomes).
With little noise ``rho`` is near 1 and a replicate must beat every new universe
outright (it rarely does: the posterior is already tight at an observed point); where
noise dominates ``rho`` is small and a replicate is taken as soon as it does a
fraction ``rho`` as well, since new points near existing ones teach about as much
about the mean, while more seeds also firm up the noise estimate that the greedy
variance reduction takes as known (after Binois et al. 2019, who find replication
optimal for integrated variance where noise is large).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from multiverse.ids import derive_seed, replicate_seed, universe_id
from multiverse.gp import MIN_FIT
from multiverse.space import SearchSpace

STRATEGIES = ("gp-ivr", "gp-claims", "sobol", "random", "grid")

#: Prior degrees of freedom of the pooled seed variance when a universe's own seed
#: variance is shrunk towards it (two seeds alone give a very noisy variance).
NOISE_PRIOR_DOF = 2.0


def greedy_ivr(
    covs: Sequence["torch.Tensor"],  # noqa: F821
    noises: Sequence["torch.Tensor | float"],  # noqa: F821
    n_ref: int,
    q: int,
    allowed: "torch.Tensor",  # noqa: F821
    replicate: "torch.Tensor | None" = None,  # noqa: F821
    ratio: float = 1.0,
) -> tuple[list[int], list[float]]:
    """Greedy batch minimising the mean integrated posterior variance over outcomes.

    Args:
        covs: per outcome, the ``(n_ref + n_cand) x (n_ref + n_cand)`` latent posterior
            covariance of the reference points followed by the candidates, in
            standardised outcome units (so outcomes are comparable).
        noises: per outcome, the noise variance of an observation at each candidate in
            the same units: a scalar, or ``n_cand`` values.
        n_ref: number of reference points (the integration set).
        q: batch size.
        allowed: ``n_cand`` booleans; False for candidates that must not be chosen.
        replicate: ``n_cand`` booleans, True for candidates that add seeds to an
            existing universe. The best of them is taken when its variance reduction
            is at least ``ratio`` times the best new candidate's.

    Returns:
        Candidate indices in the order chosen, and the mean reference variance
        (averaged over outcomes) before the batch and after each pick.
    """
    import torch

    covs = [c.clone() for c in covs]
    noises = [torch.as_tensor(s2, dtype=covs[0].dtype).expand(len(allowed)) for s2 in noises]
    allowed = allowed.clone()
    replicate = torch.zeros_like(allowed) if replicate is None else replicate
    ipv = [float(np.mean([c.diagonal()[:n_ref].mean().item() for c in covs]))]
    picks: list[int] = []
    for _ in range(min(q, int(allowed.sum()))):
        score = torch.zeros(len(allowed), dtype=covs[0].dtype)
        for c, s2 in zip(covs, noises):
            cross = c[:n_ref, n_ref:]  # n_ref x n_cand
            score += (cross**2).mean(0) / (c.diagonal()[n_ref:] + s2)
        new = torch.where(allowed & ~replicate, score, -torch.inf)
        rep = torch.where(allowed & replicate, score, -torch.inf)
        j = int(torch.argmax(new))
        if rep.max() > -torch.inf and (new.max() == -torch.inf or rep.max() >= ratio * new.max()):
            j = int(torch.argmax(rep))
        picks.append(j)
        allowed[j] = False
        for c, s2 in zip(covs, noises):
            col = c[:, n_ref + j].clone()
            c -= torch.outer(col, col) / (col[n_ref + j] + s2[j])
        ipv.append(float(np.mean([c.diagonal()[:n_ref].mean().item() for c in covs])))
    return picks, ipv


def claim_metrics(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The metrics the ``claims`` are read on, in order, once each."""
    from multiverse.claims import kind

    return list(dict.fromkeys(m for c in claims for m in kind(c).metrics(c)))


def universe_outcomes(
    space: SearchSpace, previous: Sequence[Mapping[str, Any]], outcomes: Sequence[str]
) -> tuple[list[dict], list[str], dict[str, np.ndarray]]:
    """Group the metrics records of earlier rounds by universe (a universe's seeds and
    its replicates in later rounds are one universe).

    Returns the universes' parameters, their ids (the first round's id), and per
    outcome an ``n_universes x n_seeds`` array of values, NaN-padded (NaN also for a
    failed seed).
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = defaultdict(list)
    for p in previous:
        groups[space.key(p["params"])].append(p)
    universes, ids, values = [], [], {m: [] for m in outcomes}
    width = max((len(g) for g in groups.values()), default=1)
    for recs in groups.values():
        universes.append(space.canonical(recs[0]["params"]))
        ids.append(recs[0].get("replicate_of") or recs[0].get("id"))
        for m in outcomes:
            v = [float(r["metrics"][m]) for r in recs]
            values[m].append(v + [np.nan] * (width - len(v)))
    return universes, ids, {m: np.array(v, dtype=float).reshape(len(universes), width) for m, v in values.items()}


def seed_noise(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Mean, observed noise of the mean, per-seed noise and pooled per-seed variance.

    Args:
        values: ``n_universes x n_seeds`` (NaN for missing seeds).

    Each universe's per-seed variance is its seeds' sample variance shrunk towards the
    variance pooled over universes (``NOISE_PRIOR_DOF`` prior degrees of freedom);
    the noise of its mean is that over its number of finite seeds.
    """
    n = np.isfinite(values).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(np.where(n[:, None] > 0, values, 0.0), axis=1)
        mean[n == 0] = np.nan
        dev = np.nansum((values - mean[:, None]) ** 2, axis=1)
    dof = np.maximum(n - 1, 0)
    spread = float(np.nanvar(mean[n > 0])) if (n > 0).any() else 0.0
    pooled = float(dev[dof > 0].sum() / dof.sum()) if dof.sum() else 0.0
    pooled = max(pooled, 1e-6 * spread, 1e-12)
    per_seed = (dev + NOISE_PRIOR_DOF * pooled) / (dof + NOISE_PRIOR_DOF)
    with np.errstate(invalid="ignore", divide="ignore"):
        yvar = np.where(n > 0, per_seed / np.maximum(n, 1), np.nan)
    return mean, yvar, per_seed, pooled


@dataclass
class OutcomeFit:
    """A design GP of one outcome (:func:`fit_outcomes`): the model, each universe's mean
    over its seeds and observed noise of it (``yvar``, None with one seed read), the
    per-seed and pooled seed variances, the outcome's standardising scale, the noise
    variance of a new universe's observation in standardised units (the learned noise;
    with observed noise, the pooled seed variance over the ``replicates`` seeds it is
    trained with), and the round's diagnostics of it."""

    model: Any
    mean: np.ndarray
    yvar: np.ndarray | None
    per_seed: np.ndarray
    pooled: float
    scale: float
    noise: Any
    info: dict


def fit_outcomes(space: SearchSpace, observed: Sequence[Mapping[str, Any]], outcomes: Mapping[str, Any], seed: int,
                 replicates: int = 1, categorical: str = "onehot") -> dict[str, OutcomeFit]:
    """The design's GP of each outcome (``outcomes``: name -> per universe one value or an
    ``n_seeds`` row), on every finished universe (:func:`seed_noise`; observed noise with
    ``replicates >= 2``)."""
    import torch

    from multiverse.gp import fit_gp, lengthscales, noise_variance, outcome_scale

    fits = {}
    for k, (name, y) in enumerate(outcomes.items()):
        y = np.asarray(y, dtype=float).reshape(len(observed), -1)
        mean, yvar, per_seed, pooled = seed_noise(y)
        yvar = yvar if replicates >= 2 else None
        model = fit_gp(space, observed, mean, derive_seed(seed, 10 + k), yvar=yvar, categorical=categorical)
        scale = outcome_scale(model)
        noise = noise_variance(model).mean() if yvar is None else torch.as_tensor(pooled / replicates / scale**2)
        fits[name] = OutcomeFit(model, mean, yvar, per_seed, pooled, scale, noise, {
            "n_fit": int(np.isfinite(mean).sum()),
            "noise": "observed (train_Yvar from seeds)" if yvar is not None else "learned (homoscedastic)",
            "noise_variance_standardised": float(noise),  # gp_ivr_round: its candidates' mean
            "lengthscales": lengthscales(model, space),
        })
    return fits


def candidates(space: SearchSpace, observed: Sequence[Mapping[str, Any]], n_candidates: int, seed: int) -> list[dict]:
    """The round's candidate universes: Sobol points over the numeric dimensions crossed
    with every categorical level combination, less the finished ones."""
    done = {space.key(u) for u in observed}
    return list({space.key(u): u for u in space.enumerated(n_candidates, derive_seed(seed, 1))
                 if space.key(u) not in done}.values())


def gp_ivr_round(
    space: SearchSpace,
    observed: Sequence[Mapping[str, Any]],
    outcomes: Mapping[str, Sequence[float] | np.ndarray],
    n: int,
    seed: int,
    n_candidates: int,
    n_reference: int,
    replicates: int = 1,
    categorical: str = "onehot",
) -> tuple[list[dict], list[int | None], dict[str, Any]]:
    """Choose ``n`` universes by greedy IPV reduction over every outcome's GP.

    Args:
        observed: parameters of every finished universe, once each (failed ones
            included: they are never proposed again, and their non-finite outcomes
            are left out of the GP).
        outcomes: outcome name -> per universe one value, or ``n_seeds`` values
            (an ``n_universes x n_seeds`` array, NaN-padded).
        n_candidates / n_reference: Sobol points over the numeric dimensions,
            each crossed with every categorical level combination.
        replicates: seeds read of each universe (and trained by a new one); with 2 or
            more the GPs use the observed seed noise and finished universes are
            candidates for ``replicates`` more seeds.

    Returns:
        The chosen universes, for each the index into ``observed`` of the universe it
        replicates (None for a new universe), and diagnostics.
    """
    import torch

    from multiverse.gp import features

    cand = candidates(space, observed, n_candidates, seed)
    ref = space.enumerated(n_reference, derive_seed(seed, 2))
    fits = fit_outcomes(space, observed, outcomes, seed, replicates, categorical)
    # a finished universe with a finite mean of every outcome can be replicated
    repl = [i for i in range(len(observed)) if all(np.isfinite(f.mean[i]) for f in fits.values())] if replicates >= 2 else []
    points = ref + cand + [observed[i] for i in repl]
    covs, noises, signal = [], [], []
    for name, f in fits.items():
        with torch.no_grad():
            cov = f.model.posterior(features(space, points, f.model)).distribution.covariance_matrix
        covs.append(cov / f.scale**2)
        noise = f.noise.expand(len(cand))
        if f.yvar is not None:  # a replicate: its own seed noise, over r more seeds
            noise = torch.cat([noise, torch.as_tensor(f.per_seed[repl] / replicates / f.scale**2)])
        noises.append(noise)
        f.info["noise_variance_standardised"] = float(noise.mean())
        if f.yvar is None:  # no observed noise: no replicates, the ratio does not matter
            signal.append(1.0)
        else:  # method of moments: the spread of the universes' means less their own noise
            between = max(float(np.nanvar(f.mean) - np.nanmean(f.yvar)), 0.0)
            signal.append(between / (between + f.pooled / replicates))
    info = {name: f.info for name, f in fits.items()}
    allowed = torch.ones(len(cand) + len(repl), dtype=torch.bool)
    is_replicate = torch.arange(len(allowed)) >= len(cand)
    # the replicate rule: the share of signal in an observation, signal / (signal + noise)
    ratio = float(np.mean(signal))
    picks, ipv = greedy_ivr(covs, noises, len(ref), n, allowed, is_replicate, ratio)
    chosen = [cand[j] if j < len(cand) else observed[repl[j - len(cand)]] for j in picks]
    replicate_of = [None if j < len(cand) else repl[j - len(cand)] for j in picks]
    diagnostics = {"outcomes": info, "mean_reference_variance": ipv, "n_candidates": len(cand),
                   "n_replicate_candidates": len(repl), "replicate_ratio": ratio if repl else None}
    return chosen, replicate_of, diagnostics


def sampling_probabilities(score: np.ndarray, uniform_share: float) -> np.ndarray:
    """Each candidate's probability of being drawn: ``score``'s share, mixed with the
    uniform ``1 / M`` so that no probability falls below ``uniform_share / M`` (no
    universe's weight exceeds ``1 / uniform_share``)."""
    score = np.clip(np.nan_to_num(np.asarray(score, dtype=float), nan=0.0), 0.0, None)
    M = len(score)
    share = score / score.sum() if score.sum() > 0 else np.full(M, 1.0 / M)
    return (1.0 - uniform_share) * share + uniform_share / M


def randomised_draws(space: SearchSpace, score, n: int, seed: int, n_candidates: int,
                     uniform_share: float) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """A randomised round: ``n`` independent draws from a uniform candidate set (Sobol
    points over the numeric dimensions crossed with every level combination, finished
    universes included, so that the set stays a uniform sample of the multiverse), each
    candidate with probability :func:`sampling_probabilities` of ``score(candidates)``.
    Active statistical inference (Zrnic & Candès 2024) draws where the surrogate is
    unsure, with probabilities it knows, so that the design-based answer
    (:mod:`multiverse.design_based`) can weight each universe by their inverse.

    Returns the drawn universes (a candidate drawn twice is trained twice, as two
    independent draws), for each ``{"probability", "candidates", "weight", "draws"}``
    (``weight = 1 / (M p)``: the inverse of its density relative to the uniform
    multiverse), and diagnostics."""
    cand = space.enumerated(n_candidates, derive_seed(seed, 1))
    p = sampling_probabilities(score(cand), uniform_share)
    rng = np.random.default_rng(derive_seed(seed, 7))
    picks = rng.choice(len(cand), size=n, p=p)
    M = len(cand)
    info = [{"probability": float(p[j]), "candidates": M, "weight": float(1.0 / (M * p[j])), "draws": 1} for j in picks]
    diagnostics = {"sampling": "randomised", "candidates": M, "probability_sum": float(p.sum()),
                   "uniform_share": uniform_share, "weight_range": [float(1 / (M * p.max())), float(1 / (M * p.min()))]}
    return [dict(cand[j]) for j in picks], info, diagnostics


def predictive_sd(fits: Mapping[str, "OutcomeFit"], space: SearchSpace, universes: Sequence[Mapping[str, Any]],
                  weights: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """The root mean standardised predictive variance (posterior plus a new
    observation's noise) of the outcomes at ``universes``, each outcome's variance
    times its ``weights`` (default 1): what a randomised round's probabilities follow."""
    import torch

    from multiverse.gp import features

    total = np.zeros(len(universes))
    for name, f in fits.items():
        with torch.no_grad():
            var = f.model.posterior(features(space, universes, f.model)).variance.reshape(-1).numpy()
        v = var / f.scale**2 + float(f.noise)
        total += v * (1.0 if weights is None else np.asarray(weights[name], dtype=float) ** 2)
    return np.sqrt(total / max(1, len(fits)))


def _new_distinct(draw, n: int, done: set, space: SearchSpace, what: str) -> list[dict]:
    """The first ``n`` universes of ``draw(k)`` (k = 0, 1, ...) that are neither finished
    nor drawn before; raises when the space runs out."""
    out, seen = [], set(done)
    for k in range(1000):
        for u in draw(k):
            if space.key(u) not in seen:
                seen.add(space.key(u))
                out.append(u)
                if len(out) == n:
                    return out
    raise ValueError(f"{what}: could not find {n} universes not already in the design")


def design_round(
    round_: int,
    sizes: Sequence[int],
    space: SearchSpace,
    design: Mapping[str, Any],
    seed: int,
    previous: Sequence[Mapping[str, Any]],
) -> tuple[list[dict], list[str | None], dict[str, Any]]:
    """The universes of design round ``round_`` given the records of earlier rounds.

    ``sizes`` holds the number of universes of rounds ``0..round_``; ``previous`` one
    metrics record per finished universe and seed read (``params``, ``status``,
    ``metrics``, and ``id`` / ``replicate_of``). Returns the new universes' parameters,
    for each the id of the universe it replicates (None for a new one), and
    diagnostics for the round's state file.
    """
    n, start = sizes[round_], sum(sizes[:round_])
    strategy = design["strategy"]
    claims = design.get("claims", []) if strategy == "gp-claims" else []
    names = list(dict.fromkeys(list(design.get("outcomes", [])) + claim_metrics(claims)))
    universes, ids, values = universe_outcomes(space, previous, names)
    done = {space.key(u) for u in universes}
    new = [None] * n
    if strategy == "random":
        draw = lambda k: space.random(n, derive_seed(seed, 3, round_, k))  # noqa: E731
        return _new_distinct(draw, n, done, space, "design.strategy random"), new, {"strategy": "random"}
    if strategy == "grid":
        grid = space.grid(design["grid_levels"], derive_seed(seed, 4))
        todo = [u for u in grid if space.key(u) not in done]
        if len(todo) < n:
            raise ValueError(f"config key 'design.grid_levels': the grid has {len(grid)} universes, "
                             f"fewer than the {start + n} the rounds ask for")
        return todo[:n], new, {"strategy": "grid", "grid_size": len(grid)}
    info: dict[str, Any] = {}
    # Failed universes have no outcome; a surrogate needs MIN_FIT finite ones.
    finite = {m: v for m, v in values.items() if np.isfinite(v).any(axis=1).sum() >= MIN_FIT}
    if strategy in ("gp-ivr", "gp-claims") and round_ > 0 and not finite:
        info = {"fallback": f"fewer than {MIN_FIT} finite outcomes to fit a GP"}
    if strategy == "sobol" or round_ == 0 or not finite:
        # Later Sobol rounds continue the same sequence rather than restarting it.
        draw = lambda k: space.sobol(start + n * (k + 1), derive_seed(seed, 0))[start:]  # noqa: E731
        return _new_distinct(draw, n, done, space, "design.strategy sobol"), new, {"strategy": "sobol", **info}
    if design.get("sampling") == "randomised":
        return randomised_round(space, universes, finite, claims if strategy == "gp-claims" else None, n,
                                derive_seed(seed, round_), design)
    if strategy == "gp-claims":
        from multiverse.design_claims import gp_claims_round

        chosen, repl, info = gp_claims_round(
            space, universes, finite, claims, n, derive_seed(seed, round_), design["candidates"],
            design["reference"], design["explore_share"], design["replicates"], design["categorical"],
            exploration=[m for m in design.get("outcomes", []) if m in finite],
        )
        return chosen, repl, {"strategy": "gp-claims", **info}
    chosen, repl, info = gp_ivr_round(
        space, universes, finite, n, derive_seed(seed, round_), design["candidates"],
        design["reference"], design["replicates"], design["categorical"],
    )
    return chosen, [None if r is None else ids[r] for r in repl], {"strategy": "gp-ivr", **info}


def claim_relevance(space: SearchSpace, claims: Sequence[Mapping[str, Any]], universes: Sequence[Mapping[str, Any]],
                    ) -> dict[str, np.ndarray]:
    """How much each universe's residual of each claim metric weighs in the claims'
    statistics, up to a constant: a comparison's or expected best's universes in its two
    groups (1; 0 elsewhere), a trend's by their distance from the middle of its dimension
    (a slope's influence), a correlation's all (1). Per metric, the root sum of squares
    over the claims that read it."""
    from multiverse.claims import kind

    out: dict[str, np.ndarray] = {}
    for c in claims:
        t = c.get("type", "comparison")
        if t in ("comparison", "expected_best"):
            levels = list(c["a"]) + list(c["b"])
            r = np.array([float(u[c["dimension"]] in levels) for u in universes])
        elif t == "trend":
            d = space[c["dimension"]]
            r = np.array([abs(float(d.to_unit([u[d.name]])[0]) - 0.5) * 2 if d.is_active(u) else 0.0 for u in universes])
        else:
            r = np.ones(len(universes))
        for m in kind(c).metrics(c):
            out[m] = np.sqrt(out.get(m, 0.0) ** 2 + r**2)
    return out


def randomised_round(space: SearchSpace, observed: Sequence[Mapping[str, Any]], outcomes: Mapping[str, Any],
                     claims: Sequence[Mapping[str, Any]] | None, n: int, seed: int, design: Mapping[str, Any],
                     ) -> tuple[list[dict], list[None], dict[str, Any]]:
    """A randomised GP round (``design.sampling: randomised``): :func:`randomised_draws`
    with probabilities that follow the surrogate's predictive uncertainty: under gp-ivr,
    of the design's outcomes; under gp-claims (``claims``), of the claims' metrics, each
    universe's weighted by how much it weighs in the claims' statistics
    (:func:`claim_relevance`). Mixed with uniform by ``design.uniform_share``."""
    fits = fit_outcomes(space, observed, outcomes, seed, 1, design["categorical"])
    if claims:
        metrics = [m for m in claim_metrics(claims) if m in fits]
        fits = {m: fits[m] for m in metrics} or fits
        score = lambda cand: predictive_sd(fits, space, cand, claim_relevance(space, claims, cand) if metrics else None)  # noqa: E731
    else:
        fits = {m: f for m, f in fits.items() if m in design.get("outcomes", fits)} or fits
        score = lambda cand: predictive_sd(fits, space, cand)  # noqa: E731
    chosen, info, diag = randomised_draws(space, score, n, seed, design["candidates"], design["uniform_share"])
    return chosen, [None] * n, {"strategy": design["strategy"], "outcomes": {m: f.info for m, f in fits.items()},
                                "draws": info, **diag}


def sampling_record(round_: int, strategy: str, info: Mapping[str, Any], n: int) -> list[dict[str, Any]]:
    """Each universe's sampling record for the design file: how it was drawn, with what
    probability (``probability`` among ``candidates``), its inverse-probability
    ``weight`` relative to the uniform multiverse (1 for a uniform draw; None when a
    greedy GP round or a grid chose it) and ``draws``."""
    if "draws" in info:
        return [{"sampling": "randomised", **d} for d in info["draws"]]
    if strategy in ("sobol", "random"):
        return [{"sampling": "uniform", "probability": None, "candidates": None, "weight": 1.0, "draws": 1}] * n
    return [{"sampling": "greedy" if strategy != "grid" else "grid", "probability": None, "candidates": None,
             "weight": None, "draws": None}] * n


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
    parameters, and the universe each replicates, if any), the strategy and its
    diagnostics."""
    space = SearchSpace.from_config(space_config)
    universes, replicate_of, info = design_round(round_, sizes, space, design, seed, previous)
    strategy = info.pop("strategy")
    sampling = sampling_record(round_, strategy, info, len(universes))
    info.pop("draws", None)
    return {
        "round": round_,
        "strategy": strategy,
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
                "replicate_of": rep,
                "params": u,
                **sampling[i],
            }
            for i, (u, rep) in enumerate(zip(universes, replicate_of))
        ],
    }
