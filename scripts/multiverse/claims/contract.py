"""What every claim type's module defines: the :class:`ClaimType` protocol.

A claim type is a module of :mod:`multiverse.claims` (``comparison``, ``trend``, ...)
registered in :data:`multiverse.claims.TYPES`. Adding one means that module, its entry
in the registry and its entry in the config schema; the config checks, the design, the
report, its figures and the calibration benchmark reach it only through these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

#: One answer to a claim (the GP's, the observed universes' or the design-based one):
#: what :func:`multiverse.stats.summarise` gives (``effect``, ``effect_lo``, ``effect_hi``,
#: ``p_holds``, ``p_equivalent``, ``verdict``, ``n``) and what its type adds (a
#: comparison's ``regions`` and ``fraction_holds``, a correlation's ``granulated``, an
#: expected best's ``budgets``...). Numbers stay numbers; claims.json writes them as they are.
Answer = dict[str, Any]


@dataclass
class Reading:
    """A claim's answers at one condition (``label``: ``marginal`` for the claim itself, or
    a trend's condition): one row of the summary table.

    ``summary`` is first the GP beside the observed universes (:func:`.common.judge`,
    with ``agree``); the report then decides the one ``verdict`` (:func:`.common.decide`),
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
    #: The claim's ``type`` in the config.
    NAME: str
    #: What its effect is, in words (the tables' ``statistic`` column, the forest's axis).
    STATISTIC: str
    #: Whether its design-based answer estimates the statistic of each universe's one
    #: training run, seed noise included (Kendall's tau, not linear in the outcomes),
    #: rather than of the seed means; the calibration benchmark's design truth follows it.
    DESIGN_READS_ONE_RUN: bool
    #: Whether its analysis reads the report's Sobol indices of its metrics
    #: (``Context.sensitivity``), which the report then computes before it.
    READS_SENSITIVITY: bool

    def metrics(self, claim: Mapping[str, Any]) -> list[str]:
        """The metrics the claim is read on, the first one's surrogate foremost."""

    def statement(self, claim: Mapping[str, Any]) -> str:
        """The claim in words, when the config gives no ``statement``."""

    def check(self, claim: Mapping[str, Any], key: str, checks: Any) -> None:
        """The config checks that depend on the space and metrics (``checks``:
        :class:`multiverse.config.Checks`); raises :class:`multiverse.errors.ConfigError`."""

    def analyse(self, claim: Mapping[str, Any], ctx: Any, i: int, influence: Any) -> ClaimResult:
        """The claim's answers in context ``ctx`` (:class:`multiverse.claims.common.Context`;
        ``i``: its place among the claims, which seeds its samples): per reading the GP's
        (``gp``), the observed universes' (``observed``) and the design-based one
        (``design``), with the first two's judgement side by side
        (:func:`multiverse.claims.common.judge`), and the data its figures draw."""

    def table_cells(self, gp: Mapping[str, Any], observed: Mapping[str, Any]) -> tuple[str, str]:
        """A row's GP and observed estimate cells of the summary table."""

    def design_target(self, space: Any, claim: Mapping[str, Any], n: int, seed: int,
                      mean_at: Any) -> list[Any]:
        """What the claim-targeted design reduces for it
        (:class:`multiverse.claims.common.DesignTarget`, one per metric's GP)."""

    def relevance(self, space: Any, claim: Mapping[str, Any], universes: Sequence[Mapping[str, Any]]) -> Any:
        """How much each universe's residual weighs in the claim's statistic, up to a
        constant (a randomised gp-claims round's probabilities follow it)."""

    def grid_statistic(self, claim: Mapping[str, Any], space: Any, axes: Mapping[str, Sequence[Any]],
                       values: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
        """Its statistic over a whole full-factorial grid (``axes``: each dimension's values;
        ``values``: ``{metric: array over axes}``), the calibration benchmark's truth."""

    def figure(self, c: ClaimResult, space: Any, df: Any, path: str) -> None:
        """Draw the figure behind its verdict to ``path`` (``c``: the report's result)."""

    def where_figure(self, c: ClaimResult, space: Any, df: Any, path: str) -> None:
        """Draw where in the multiverse it holds to ``path``."""
