"""A claim's one verdict: the rule that decides it from the design-based answer, with
the model-based (GP) answer beside it (:func:`decide`), the GP's answer judged beside the
observed universes' (:func:`judge`), and the estimate cells the tables print.

The verdict's thresholds are :mod:`multiverse.stats`'s (``P_HOLDS``, ``P_FAILS``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from multiverse.claims.contract import Reading
from multiverse.spec.records import Answer
from multiverse.stats import INCLUSIVE, TOO_FEW


def opposite(a: str, b: str, rel: str) -> bool:
    """Whether two verdicts contradict each other: holds and fails always; for a strict
    relation (superiority) equivalent and holds, for an inclusive one
    (non-inferiority) equivalent and fails."""
    pair = {a, b}
    if pair == {"holds", "fails"}:
        return True
    return pair == ({"equivalent", "fails"} if rel in INCLUSIVE else {"equivalent", "holds"})


def _est(x: Answer) -> str:
    return f"{x['effect']:+.3f} [{x['effect_lo']:+.3f}, {x['effect_hi']:+.3f}]"


def estimate(x: Answer) -> str:
    """An answer's estimate with its 95% interval as the tables print it (``n/a`` without one)."""
    if not np.isfinite(x.get("effect", np.nan)):
        return "n/a"
    return _est(x)


def decide(design: Answer, gp: Answer, rel: str, surrogate_ok: bool = True) -> dict[str, Any]:
    """The claim's one verdict, said the same way in the badge, the table and its section.

    It rests on the design-based answer (:mod:`multiverse.estimators`), whose interval
    holds whatever the surrogate. The model-based answer (the GP's) is given beside it;
    where the two disagree (opposite verdicts or intervals that exclude each other), the
    summary says so and why the verdict rests on the design-based one. Without a
    design-based answer (too few universes drawn with known probability) the verdict is
    the GP's, except that a surrogate that fits poorly never gives a confident one alone.

    Returns ``{"verdict", "rests_on": "design" | "model", "summary"}``.
    """
    d, g = design.get("verdict", TOO_FEW), gp.get("verdict", TOO_FEW)
    if d != TOO_FEW:
        text = f"{d} (design-based: {_est(design)}, P(holds) {design['p_holds']:.2f})"
        if g == TOO_FEW:
            return {"verdict": d, "rests_on": "design", "summary": text + "; no model-based answer (too few universes)"}
        disjoint = gp["effect_hi"] < design["effect_lo"] or design["effect_hi"] < gp["effect_lo"]
        if opposite(d, g, rel) or disjoint:
            text += (f"; the model-based answer (GP) says {g}, {_est(gp)}: they disagree, and the verdict rests on the "
                     "design-based answer, whose interval holds whatever the surrogate")
        elif g == d:
            text += f"; the model-based answer (GP) agrees, {_est(gp)}"
        elif d == "uncertain":
            text += (f"; the model-based answer (GP) says {g}, {_est(gp)}, a narrower interval that rests on the "
                     "surrogate being right")
        else:
            text += f"; the model-based answer (GP) is {g}, {_est(gp)}"
        return {"verdict": d, "rests_on": "design", "summary": text}
    if g == TOO_FEW:
        return {"verdict": TOO_FEW, "rests_on": "model", "summary": "too few universes"}
    why = "too few universes drawn with known probability for a design-based answer"
    if g in ("holds", "fails", "equivalent") and not surrogate_ok:
        return {"verdict": "uncertain", "rests_on": "model",
                "summary": f"uncertain: the model-based answer (GP) says {g}, {_est(gp)}, but its surrogate fits "
                           f"poorly, and {why}"}
    return {"verdict": g, "rests_on": "model", "summary": f"{g} (model-based only, GP: {_est(gp)}; {why})"}


def judge(gp: Answer, observed: Answer, rel: str = ">") -> dict[str, Any]:
    """Put the two answers side by side.

    They *disagree* only when credibly opposite: one holds and the other fails (or
    one says equivalent where the other's verdict excludes it), or their intervals
    exclude each other. A different label that is not opposite (one confident, the
    other uncertain) is a difference in power: the summary says that the other side
    cannot tell. Two confident labels that are different but not opposite (holds and
    equivalent under an inclusive relation, fails and equivalent under a strict one)
    are compatible: both exclude the claim's opposite. ``agree`` is True (the same or
    compatible), False (disagree), or None (cannot tell, or too few universes to
    cross-check).
    """
    g, o = gp["verdict"], observed["verdict"]
    if g == TOO_FEW:
        return {"agree": None, "summary": f"no surrogate (too few universes); observed universes say {o}"}
    if o == TOO_FEW:
        return {"agree": None, "summary": f"GP says {g}; too few observed universes to cross-check"}
    if g == o:
        return {"agree": True, "summary": f"{g} (GP and observed universes agree)"}
    disjoint = gp["effect_hi"] < observed["effect_lo"] or observed["effect_hi"] < gp["effect_lo"]
    if opposite(g, o, rel) or disjoint:
        return {"agree": False, "summary": f"GP says {g}, observed universes say {o}: they disagree"}
    if "uncertain" not in (g, o):
        return {"agree": True, "summary": f"GP says {g}, observed universes say {o}: compatible under '{rel}'"}
    if g == "uncertain":
        return {"agree": None, "summary": f"observed universes say {o}; the GP cannot tell (uncertain)"}
    return {"agree": None, "summary": f"GP says {g}; the observed universes cannot tell ({o})"}


def reading(gp: Answer, observed: Answer, design: Answer | None, rel: str,
            label: str = "marginal") -> Reading:
    """One :class:`Reading` of a claim: its three answers, the GP's and the observed
    universes' judged side by side (:func:`judge`)."""
    return Reading(label, dict(gp), dict(observed), None if design is None else dict(design), **judge(gp, observed, rel))


def estimate_cells(gp: Answer, observed: Answer) -> tuple[str, str]:
    """``table_cells`` of a claim whose cells are its two estimates, the GP's and the observed universes'."""
    return estimate(gp), estimate(observed)
