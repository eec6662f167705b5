"""Claim verdicts: from the GP surrogate, and model-free from the observed universes.

A claim compares a metric between two groups of levels of one categorical dimension,
integrated over the rest of the multiverse, e.g. ``test_acc`` of ``[adam]`` >=
``[sgd]``. Its *effect* is ``mean(metric | a) - mean(metric | b)`` and it holds when
the effect has the claimed sign.

- GP: joint posterior samples of the surrogate at a Sobol reference set of the other
  dimensions, each point evaluated under every level of ``a`` and ``b``. Each sample
  gives one effect and one fraction of the multiverse where the claim holds, so the
  intervals account for the correlation between points.
- Observed: a bootstrap over universes, stratified by group, of the difference in
  group means. It is model-free but not paired: the groups were sampled at
  different points of the other dimensions.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

#: A verdict's probability thresholds: ``holds`` at or above, ``fails`` at or below.
P_HOLDS, P_FAILS = 0.95, 0.05
TOO_FEW = "too few universes"


def claim_sign(relation: str) -> int:
    """+1 when the claim is that ``a`` is larger, -1 when smaller."""
    return {">": 1, ">=": 1, "<": -1, "<=": -1}[relation]


def verdict(p_holds: float) -> str:
    if p_holds >= P_HOLDS:
        return "holds"
    if p_holds <= P_FAILS:
        return "fails"
    return "uncertain"


def interval(x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(x, [a, 1 - a])
    return float(lo), float(hi)


def summarise(effects: np.ndarray, sign: int) -> dict[str, float | str]:
    """Mean, 95% interval and probability of the claimed sign for samples of an effect."""
    lo, hi = interval(effects)
    p = float(np.mean(sign * effects > 0))
    return {"effect": float(np.mean(effects)), "effect_lo": lo, "effect_hi": hi, "p_holds": p, "verdict": verdict(p)}


def observed_verdict(
    values: np.ndarray, groups: Sequence[str], claim: Mapping[str, Any], n_boot: int, seed: int
) -> dict[str, Any]:
    """Model-free verdict by a bootstrap stratified by group.

    Args:
        values: ``n`` observed metric values (non-finite ones are dropped).
        groups: ``n`` levels of the claim's dimension.
    """
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=object)
    ok = np.isfinite(values)
    a = values[ok & np.isin(groups, list(claim["a"]))]
    b = values[ok & np.isin(groups, list(claim["b"]))]
    out: dict[str, Any] = {"n_a": int(len(a)), "n_b": int(len(b))}
    if len(a) < 2 or len(b) < 2:
        return {**out, "effect": float("nan"), "effect_lo": float("nan"), "effect_hi": float("nan"),
                "p_holds": float("nan"), "verdict": TOO_FEW}
    rng = np.random.default_rng(seed)
    boot = (
        rng.choice(a, (n_boot, len(a))).mean(1) - rng.choice(b, (n_boot, len(b))).mean(1)
    )
    return {**out, **summarise(boot, claim_sign(claim["relation"])), "effect": float(a.mean() - b.mean())}


def comparison_universes(space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Every base universe under every level of ``a`` then ``b``: ``(len(a)+len(b)) * len(base)``."""
    levels = list(claim["a"]) + list(claim["b"])
    return [{**u, claim["dimension"]: lv} for lv in levels for u in base]


def gp_verdict(
    model, space, claim: Mapping[str, Any], base: Sequence[Mapping[str, Any]], n_samples: int, seed: int
) -> dict[str, Any]:
    """Verdict from joint posterior samples of the GP at :func:`comparison_universes`.

    ``base`` is a reference set covering the other dimensions (the claim's own
    dimension is overwritten). Returns the effect summary and the fraction of the
    multiverse where the claim holds, each with a 95% credible interval.
    """
    import torch

    from multiverse.gp import features

    na, nb = len(claim["a"]), len(claim["b"])
    X = features(space, comparison_universes(space, claim, base), model)
    torch.manual_seed(seed)
    with torch.no_grad():
        f = model.posterior(X).rsample(torch.Size([n_samples])).squeeze(-1).numpy()
    f = f.reshape(n_samples, na + nb, len(base))
    diff = f[:, :na].mean(1) - f[:, na:].mean(1)  # samples x base points
    sign = claim_sign(claim["relation"])
    frac = (sign * diff > 0).mean(1)
    flo, fhi = interval(frac)
    return {
        **summarise(diff.mean(1), sign),
        "fraction_holds": float(frac.mean()),
        "fraction_holds_lo": flo,
        "fraction_holds_hi": fhi,
    }


def judge(gp: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """Put the two verdicts side by side; say so when they disagree instead of choosing.

    ``agree`` is None when the observed universes are too few to cross-check.
    """
    if gp["verdict"] == TOO_FEW:
        return {"agree": None, "summary": f"no surrogate (too few finished universes); observed universes say {observed['verdict']}"}
    if observed["verdict"] == TOO_FEW:
        return {"agree": None, "summary": f"GP says {gp['verdict']}; too few observed universes to cross-check"}
    if gp["verdict"] == observed["verdict"]:
        return {"agree": True, "summary": f"{gp['verdict']} (GP and observed universes agree)"}
    return {
        "agree": False,
        "summary": f"GP says {gp['verdict']}, observed universes say {observed['verdict']}: they disagree",
    }
