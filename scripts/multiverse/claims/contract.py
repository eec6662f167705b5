"""What every claim type's module defines: the :class:`ClaimType` protocol, and the
records a claim's analysis returns (:class:`Reading`, :class:`ClaimResult`).

A claim type is its spec (:class:`multiverse.spec.claims.ClaimSpec`: name, statistic,
metrics, statement, check) and a module of :mod:`multiverse.claims` (``comparison``,
``trend``, ...) registered in :data:`multiverse.claims.TYPES` that holds it as
``SPEC``; the design, the report, its figures and the calibration benchmark reach it
only through these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from multiverse.spec.claims import ClaimSpec
from multiverse.spec.records import Answer, Claim


@dataclass
class Reading:
    """A claim's answers at one condition (``label``: ``marginal`` for the claim itself, or
    a trend's condition): one row of the summary table.

    ``summary`` is first the GP beside the observed universes (:func:`.verdict.judge`,
    with ``agree``); the report then decides the one ``verdict`` (:func:`.verdict.decide`),
    says which answer it ``rests_on`` (``design`` or ``model``), moves that first summary
    to ``cross_check`` and writes the verdict's sentence in ``summary``."""

    label: str
    gp: Answer
    observed: Answer
    design: Answer | None
    summary: str
    agree: bool | None = None
    verdict: str | None = None
    rests_on: str | None = None
    cross_check: str | None = None


@dataclass
class ClaimResult:
    """A claim's analysis (what :meth:`ClaimType.analyse` returns and the report reads).

    ``readings``: its answers, the claim itself first (:class:`Reading`; a trend adds one
    per condition). ``gp``, ``observed``, ``design``, ``summary``, ``verdict``, ... read
    the first. ``figures`` holds the data its figures draw; ``model`` the fitted model the
    verdict rests on where that is not the metric's own surrogate (a correlation's
    two-outcome GP), which claims.json leaves out; ``diagnostics`` that model's LOO.
    """

    name: str
    type: str
    statement: str
    claim: dict[str, Any]
    readings: list[Reading]
    read_where: str | None = None
    converged_share: float | None = None
    figures: dict[str, Any] | None = None
    family: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None
    model: Any = None
    surrogate_ok: bool = True
    headline: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gp(self) -> Answer:
        return self.readings[0].gp

    @property
    def observed(self) -> Answer:
        return self.readings[0].observed

    @property
    def design(self) -> Answer | None:
        return self.readings[0].design

    @property
    def summary(self) -> str:
        return self.readings[0].summary

    @property
    def verdict(self) -> str | None:
        return self.readings[0].verdict

    @property
    def rests_on(self) -> str | None:
        return self.readings[0].rests_on

    @property
    def by_condition(self) -> bool:
        """Whether its readings are a family of conditions (a trend's)."""
        return self.family is not None

    def to_dict(self) -> dict[str, Any]:
        """As claims.json holds it: the first reading's fields at the top, a family's
        readings under ``conditions``; ``model`` left out."""
        first = {k: v for k, v in vars(self.readings[0]).items() if k != "label"}
        out = {"name": self.name, "type": self.type, "statement": self.statement, "claim": self.claim, **first,
               "read_where": self.read_where, "converged_share": self.converged_share,
               "surrogate_ok": self.surrogate_ok, **self.extra}
        for key in ("figures", "family", "diagnostics", "headline"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.by_condition:
            out["conditions"] = [vars(r).copy() for r in self.readings]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClaimResult":
        """Back from :meth:`to_dict` (claims.json)."""
        names = set(Reading.__dataclass_fields__)
        rows = d.get("conditions") or [{"label": "marginal", **d}]
        readings = [Reading(**{k: v for k, v in r.items() if k in names}) for r in rows]
        own = set(cls.__dataclass_fields__) - {"readings", "extra", "model"}
        top = {k: d[k] for k in own if k in d}
        extra = {k: v for k, v in d.items() if k not in own | names | {"conditions"}}
        return cls(readings=readings, extra=extra, **top)


@runtime_checkable
class ClaimType(Protocol):
    #: What the claim type is at parse time: name, statistic, metrics, statement, check
    #: and its two traits (:class:`multiverse.spec.claims.ClaimSpec`).
    SPEC: ClaimSpec

    def analyse(self, claim: Claim, ctx: Any, i: int, influence: Any) -> ClaimResult:
        """The claim's answers in context ``ctx`` (:class:`multiverse.claims.context.Context`;
        ``i``: its place among the claims, which seeds its samples): per reading the GP's
        (``gp``), the observed universes' (``observed``) and the design-based one
        (``design``), with the first two's judgement side by side
        (:func:`multiverse.claims.verdict.judge`), and the data its figures draw."""

    def table_cells(self, gp: Mapping[str, Any], observed: Mapping[str, Any]) -> tuple[str, str]:
        """A row's GP and observed estimate cells of the summary table."""

    def design_target(self, space: Any, claim: Claim, n: int, seed: int,
                      mean_at: Any) -> list[Any]:
        """What the claim-targeted design reduces for it
        (:class:`multiverse.claims.context.DesignTarget`, one per metric's GP)."""

    def relevance(self, space: Any, claim: Claim, universes: Sequence[Mapping[str, Any]]) -> Any:
        """How much each universe's residual weighs in the claim's statistic, up to a
        constant (a randomised gp-claims round's probabilities follow it)."""

    def grid_statistic(self, claim: Claim, space: Any, axes: Mapping[str, Sequence[Any]],
                       values: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
        """Its statistic over a whole full-factorial grid (``axes``: each dimension's values;
        ``values``: ``{metric: array over axes}``), the calibration benchmark's truth."""

    def figure(self, c: ClaimResult, space: Any, df: Any, path: str) -> None:
        """Draw the figure behind its verdict to ``path`` (``c``: the report's result)."""

    def where_figure(self, c: ClaimResult, space: Any, df: Any, path: str) -> None:
        """Draw where in the multiverse it holds to ``path``."""
