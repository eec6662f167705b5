"""What every claim type's module defines: the :class:`ClaimType` protocol.

A claim type is a module of :mod:`multiverse.claims` (``comparison``, ``trend``, ...)
registered in :data:`multiverse.claims.TYPES`. Adding one means that module, its entry
in the registry and its entry in the config schema; the config checks, the design, the
report, its figures and the calibration benchmark reach it only through these names.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable


@runtime_checkable
class ClaimType(Protocol):
    #: The claim's ``type`` in the config.
    NAME: str
    #: What its effect is, in words (the tables' ``statistic`` column, the forest's axis).
    STATISTIC: str

    def metrics(self, claim: Mapping[str, Any]) -> list[str]:
        """The metrics the claim is read on, the first one's surrogate foremost."""

    def statement(self, claim: Mapping[str, Any]) -> str:
        """The claim in words, when the config gives no ``statement``."""

    def check(self, claim: Mapping[str, Any], key: str, checks: Any) -> None:
        """The config checks that depend on the space and metrics (``checks``:
        :class:`multiverse.config.Checks`); raises :class:`multiverse.errors.ConfigError`."""

    def analyse(self, claim: Mapping[str, Any], ctx: Any, i: int, influence: Any) -> dict[str, Any]:
        """The claim's answers in context ``ctx`` (:class:`multiverse.claims.common.Context`;
        ``i``: its place among the claims, which seeds its samples): the GP's (``gp``), the
        observed universes' (``observed``), the design-based one (``design``), their
        judgement side by side (:func:`multiverse.claims.common.judge`) and the data its
        figures draw (``figures``)."""

    def rows(self, result: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Its rows of the summary table, each ``{label, gp, observed, design, summary}``
        (one per condition of a trend)."""

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

    def figure(self, c: Mapping[str, Any], space: Any, df: Any, path: str) -> None:
        """Draw the figure behind its verdict to ``path`` (``c``: the report's result)."""

    def where_figure(self, c: Mapping[str, Any], space: Any, df: Any, path: str) -> None:
        """Draw where in the multiverse it holds to ``path``."""
