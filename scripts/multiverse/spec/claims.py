"""What each claim type is at parse time: its name, the statistic it reads, the metrics
a claim of it reads, its statement in words and its config checks.

This is the claim types' registry (:data:`SPECS`, by the config's ``type``). Each
type's analysis, figures and design target live in its module of
:mod:`multiverse.claims`, which reads its :class:`ClaimSpec` from here: the Snakefile
checks every claim when it is parsed without loading numpy, a GP or a plot. Adding a
claim type means its entry here, its module there and its entry in the config schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from multiverse import OPTIONAL_METRICS
from multiverse.errors import ConfigError
from multiverse.spec.records import Claim

#: The claim type of a claim that names none.
DEFAULT_TYPE = "comparison"


def claim_type(claim: Claim) -> str:
    return claim.get("type", DEFAULT_TYPE)


def relation(claim: Claim) -> str:
    """The claim's relation (``>``, ``>=``, ...; a trend's ``direction``)."""
    return claim.get("relation") or claim.get("direction") or ">="


def margin(claim: Claim) -> float:
    """The claim's region of practical equivalence, in its statistic's units (0: none)."""
    return float(claim.get("margin") or 0.0)


def levels_text(levels: Sequence[Any]) -> str:
    return "/".join(map(str, levels))


class Checks:
    """The checks a claim type's ``check`` uses: a metric the study has (``metrics``: the
    study's declarations by name, :func:`multiverse.spec.config.study_metrics`), a
    dimension of the right kind, levels of a categorical dimension."""

    def __init__(self, space: Mapping[str, Mapping[str, Any]], metrics: Mapping[str, Any] | Sequence[str]):
        self.space, self.metrics = space, metrics

    def metric(self, name: str, key: str) -> None:
        check_metric(name, key, self.metrics)

    def dimension(self, value: Any, key: str, categorical: bool | None) -> None:
        if value not in self.space:
            raise ConfigError(key, f"a dimension among {list(self.space)}", value)
        if categorical is not None and (self.space[value]["type"] == "categorical") != categorical:
            raise ConfigError(key, f"a {'categorical' if categorical else 'numeric'} dimension", value)

    def groups(self, claim: Claim, key: str) -> None:
        """``dimension`` is categorical and ``a``, ``b`` are disjoint sets of its levels."""
        dim = claim["dimension"]
        self.dimension(dim, f"{key}.dimension", categorical=True)
        for side in ("a", "b"):
            for level in claim[side]:
                if level not in self.space[dim]["choices"]:
                    raise ConfigError(f"{key}.{side}", f"levels of '{dim}' among {self.space[dim]['choices']}", level)
        if set(claim["a"]) & set(claim["b"]):
            raise ConfigError(f"{key}.b", "levels disjoint from a", claim["b"])


def check_metric(name: str, key: str, metrics: Mapping[str, Any] | Sequence[str]) -> None:
    """``name`` is one of the study's ``metrics`` (:func:`multiverse.spec.config.study_metrics`)."""
    if name not in metrics:
        hint = f" ({name} needs config key '{OPTIONAL_METRICS[name]}')" if name in OPTIONAL_METRICS else ""
        raise ConfigError(key, f"a metric among {list(metrics)}{hint} (declared under config key 'metrics')", name)


@dataclass(frozen=True)
class ClaimSpec:
    """A claim type as the config knows it.

    ``name``: its config ``type``. ``statistic``: what its effect is, in words (the
    tables' ``statistic`` column, the forest's axis). ``metrics(claim)``: the metrics
    the claim is read on, the first one's surrogate foremost. ``statement(claim)``: the
    claim in words when the config gives none. ``check(claim, key, checks)``: the checks
    that depend on the space and metrics (:class:`Checks`), raising
    :class:`multiverse.errors.ConfigError`. ``design_reads_one_run``: whether its
    design-based answer estimates the statistic of each universe's one training run,
    seed noise included (Kendall's tau is not linear in the outcomes), rather than of the
    seed means; the calibration benchmark's design truth follows it.
    ``reads_sensitivity``: whether its analysis reads the report's Sobol indices of its
    metrics, which the report then computes first."""

    name: str
    statistic: str
    metrics: Callable[[Claim], list[str]]
    statement: Callable[[Claim], str]
    check: Callable[[Claim, str, Checks], None]
    design_reads_one_run: bool = False
    reads_sensitivity: bool = False


def _one_metric(claim: Claim) -> list[str]:
    return [claim["metric"]]


def _comparison_statement(claim: Claim) -> str:
    a, b = levels_text(claim["a"]), levels_text(claim["b"])
    return f"{claim['metric']} of {claim['dimension']} {a} {claim['relation']} {b}"


def _comparison_check(claim: Claim, key: str, checks: Checks) -> None:
    checks.metric(claim["metric"], f"{key}.metric")
    checks.groups(claim, key)


def _trend_statement(claim: Claim) -> str:
    return f"{claim['metric']} is {claim['direction']} in {claim['dimension']}"


def _trend_check(claim: Claim, key: str, checks: Checks) -> None:
    checks.metric(claim["metric"], f"{key}.metric")
    dim = claim["dimension"]
    checks.dimension(dim, f"{key}.dimension", categorical=False)
    for j, g in enumerate(claim.get("given", [])):
        checks.dimension(g, f"{key}.given[{j}]", categorical=None)
        if g == dim:
            raise ConfigError(f"{key}.given[{j}]", f"a dimension other than '{dim}'", g)
    if claim.get("scaled"):
        s = claim["scaled"]["dimension"]
        checks.dimension(s, f"{key}.scaled.dimension", categorical=False)
        space = checks.space
        if s == dim or not (space[s].get("log") and space[dim].get("log")):
            raise ConfigError(f"{key}.scaled.dimension", f"a log-scaled numeric dimension other than '{dim}' "
                              f"(and '{dim}' log-scaled too)", s)


def _correlation_metrics(claim: Claim) -> list[str]:
    return [claim["x"], claim["y"]]


def _correlation_statement(claim: Claim) -> str:
    return f"{claim['x']} and {claim['y']} are {claim['relation']}ly correlated across universes"


def _correlation_check(claim: Claim, key: str, checks: Checks) -> None:
    checks.metric(claim["x"], f"{key}.x")
    checks.metric(claim["y"], f"{key}.y")
    if claim["x"] == claim["y"]:
        raise ConfigError(f"{key}.y", "a metric other than x", claim["y"])


def _expected_best_statement(claim: Claim) -> str:
    a, b = levels_text(claim["a"]), levels_text(claim["b"])
    return f"expected best {claim['metric']} of {a} {claim['relation']} {b} at every budget >= {claim.get('min_budget', 1)}"


def _expected_best_check(claim: Claim, key: str, checks: Checks) -> None:
    _comparison_check(claim, key, checks)
    goal = (checks.metrics.get(claim["metric"]) or {}).get("goal") if isinstance(checks.metrics, Mapping) else None
    if goal == "minimize":
        # the estimator is of the expected maximum: for a metric where smaller is better,
        # the "best" of k universes would be read as their worst
        raise ConfigError(f"{key}.metric", "a metric whose goal is maximize (expected_best reads the expected "
                          "maximum of k universes)", claim["metric"])
    if claim.get("max_budget") and claim["max_budget"] < claim.get("min_budget", 1):
        raise ConfigError(f"{key}.max_budget", f"at least min_budget ({claim.get('min_budget', 1)})", claim["max_budget"])


COMPARISON = ClaimSpec("comparison", "difference of means, a - b", _one_metric, _comparison_statement,
                       _comparison_check)
TREND = ClaimSpec("trend", "slope: change across the dimension's range", _one_metric, _trend_statement, _trend_check)
CORRELATION = ClaimSpec("correlation", "Kendall tau", _correlation_metrics, _correlation_statement,
                        _correlation_check, design_reads_one_run=True, reads_sensitivity=True)
#: One metric compared between two groups, as in a comparison.
EXPECTED_BEST = ClaimSpec("expected_best", "expected-best difference a - b at the least favourable budget",
                          _one_metric, _expected_best_statement, _expected_best_check)

#: The claim types by their config ``type``.
SPECS: dict[str, ClaimSpec] = {s.name: s for s in (COMPARISON, TREND, CORRELATION, EXPECTED_BEST)}


def spec_of(claim: Claim) -> ClaimSpec:
    """The claim's type (:data:`SPECS`)."""
    return SPECS[claim_type(claim)]


def claim_metrics(claims: Sequence[Claim]) -> list[str]:
    """The metrics the claims read, each once, in order."""
    return list(dict.fromkeys(m for c in claims for m in spec_of(c).metrics(c)))


def check_claim(claim: Claim, key: str, space: Mapping[str, Mapping[str, Any]],
                metrics: Mapping[str, Any] | Sequence[str]) -> None:
    """A claim names metrics, dimensions and levels that exist, of the kind its type
    needs (its type's ``check``)."""
    if claim.get("margin") is not None and claim["margin"] < 0:
        raise ConfigError(f"{key}.margin", "a margin >= 0 in the statistic's units", claim["margin"])
    spec_of(claim).check(claim, key, Checks(space, metrics))
