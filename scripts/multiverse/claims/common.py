"""What every claim type shares: the context a claim is analysed in, where a claim holds
(regions labelled by the verdict's own thresholds), and the judgement of the GP's answer
beside the observed universes'.

Imported when the Snakefile is parsed (through the claim types' config checks), so
numpy and the rest load only when a function that needs them runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from multiverse import declaration
from multiverse.claims.contract import ClaimResult, Reading
from multiverse.ids import derive_seed
from multiverse.lazy import np

TOO_FEW = "too few universes"
#: Points of a numeric dimension's grid for trends, granulated tau and maps.
TREND_GRID = 9


def relation(claim: Mapping[str, Any]) -> str:
    return claim.get("relation") or claim.get("direction") or ">="


def margin(claim: Mapping[str, Any]) -> float:
    """The claim's region of practical equivalence, in its statistic's units (0: none)."""
    return float(claim.get("margin") or 0.0)


def levels_text(levels: Sequence[Any]) -> str:
    return "/".join(map(str, levels))


def no_surrogate(n_finite: int) -> dict[str, Any]:
    """The GP's answer when too few universes finished to fit a surrogate."""
    from multiverse import stats  # on use: claim types load when the Snakefile is parsed

    nan = float("nan")
    return {**stats.too_few(n_finite=n_finite), "fraction_holds": nan, "fraction_holds_lo": nan, "fraction_holds_hi": nan}


# --- the context a claim is analysed in ---------------------------------------------
def reference_universes(space, n: int, seed: int, fix: str | None = None, per_level: bool = False) -> list[dict]:
    """A Sobol reference set of ``n`` points per level combination; with ``fix``, that
    dimension is held at its first level (callers overwrite it), so no point is repeated;
    with ``per_level`` (trends), ``n`` points in all, shared out over the combinations."""
    if per_level:
        return space.enumerated(max(4, n // max(1, len(space.level_combinations()))), seed, canonical=False)
    ref = space.enumerated(n, seed, canonical=fix is None)
    if fix is not None:
        first = space[fix].choices[0]
        ref = [u for u in ref if u[fix] == first]
    return ref


@dataclass
class DesignTarget:
    """What the claim-targeted design (:mod:`multiverse.design_claims`) reduces for one
    claim on one metric's GP, given by each claim type's ``design_target``.

    ``points`` are universes; ``statistic`` (``len(points)`` weights) makes the claim's
    statistic a weighted sum of the metric there (criterion a: its posterior variance);
    ``local`` (``len(points) x n_base`` weights) makes each base point's local effect
    one (criterion b: the Bernoulli variance of whether it satisfies ``relation`` with
    ``margin``); ``integrated``: the posterior variance of the metric itself at every
    point (a correlation's stand-in)."""

    claim: str
    metric: str
    points: list
    statistic: Any = None
    local: Any = None
    relation: str = ">="
    margin: float = 0.0
    integrated: bool = False


@dataclass
class Context:
    """The study's observed universes, its surrogates and the report's settings.

    ``seed`` is the report's seed; every sample a claim draws derives from it.
    """

    space: Any
    df: Any
    surrogates: Mapping[str, Any]
    divergence: Any
    samples: int
    reference: int
    bootstrap: int
    seed: int
    universes: list = field(default_factory=list)
    #: the study's metric declarations (:func:`multiverse.config.study_metrics`; None:
    #: the built-in trainer's)
    declared: Any = None
    #: hyperparameter chains of a correlation's two-outcome model, each from its own MAP
    #: fit (``report.hyperparameter_starts``; :func:`multiverse.two_outcome.fit_multitask_gp`)
    hyperparameter_starts: int = 1
    #: the report's Sobol indices per metric (:func:`multiverse.sensitivity.sobol_indices`;
    #: None where the report leaves them out), which a correlation's per-dimension tau reads
    sensitivity: Mapping[str, Any] | None = None
    _drawn: Any = None

    def drawn(self):
        """The universes drawn with known probability and their predictors
        (:class:`multiverse.design_based.Drawn`), built once per context."""
        if self._drawn is None:
            from multiverse.design_based import Drawn  # on use: claim types load when the Snakefile is parsed
            self._drawn = Drawn(self.df, self.space, self.universes, self.values, derive_seed(self.seed, 600),
                                self.declared)
        return self._drawn

    def values(self, metric: str):
        """Each observed universe's mean over its seeds (NaN where not usable)."""
        from multiverse.surrogate import universe_means  # on use: claim types load when the Snakefile is parsed

        return universe_means(self.df, self.space, metric, self.declared)

    def declaration(self, metric: str) -> dict:
        """``metric``'s range, goal and ``converged_only`` (:func:`multiverse.declaration`)."""
        return declaration(metric, self.declared)

    def reference_set(self, fix: str | None = None, per_level: bool = False) -> list[dict]:
        """The Sobol reference set of the integrals: ``reference`` points per level
        combination (``fix``: that dimension held at its first level, callers overwrite
        it), or per level-combination-share (``per_level``) for trends."""
        return reference_universes(self.space, self.reference, derive_seed(self.seed, 1), fix, per_level)

    def converging(self, metrics: Sequence[str], universes: Sequence[Mapping[str, Any]],
                   variants: Sequence[Mapping[str, Any]] = ({},)) -> tuple[list[dict], float]:
        """The reference universes where a claim on ``metrics`` is read: for a metric of
        a metric declared ``converged_only``, only those the divergence model expects to
        converge under every one of ``variants`` (e.g. each compared level). Returns
        them and their share of ``universes``."""
        from multiverse.surrogate import converging  # on use: claim types load when the Snakefile is parsed

        universes = list(universes)
        if self.divergence is None or not any(self.declaration(m)["converged_only"] for m in metrics) or not universes:
            return universes, 1.0
        ok = np.ones(len(universes), dtype=bool)
        for v in variants:
            ok &= converging(self.divergence, [{**u, **v} for u in universes])
        kept = [u for u, k in zip(universes, ok) if k]
        return kept, float(ok.mean())


def where_read(share: float) -> str:
    """The note a claim on converged-only metrics carries."""
    if share >= 1.0:
        return ""
    return f"read where universes converge ({share:.0%} of the multiverse; P(diverge) < 0.5)"


# --- local verdicts and where a claim holds ----------------------------------------
def local_summary(local, claim: Mapping[str, Any]) -> dict[str, Any]:
    """Local P(holds) (and P(equivalent)) at each point from ``samples x points`` local
    effects, and each point's verdict label by the claim's thresholds."""
    from multiverse import stats  # on use: claim types load when the Snakefile is parsed

    rel, m = relation(claim), margin(claim)
    p = stats.holds_mask(local, rel, m).mean(0)
    pe = stats.equivalent_mask(local, m).mean(0) if m > 0 else None
    return {"p_holds": p, "p_equivalent": pe, "labels": stats.local_verdicts(p, pe)}


def with_fraction(summary: dict[str, Any], local, claim: Mapping[str, Any]) -> dict[str, Any]:
    """Add the share of the multiverse where the claim holds, from ``samples x points``
    local effects: the share of reference points where it holds with posterior
    probability above one half (each point labelled by its more likely side), bracketed
    by the share where it surely holds (P >= ``P_HOLDS``) and the share where it possibly
    holds (P > ``P_FAILS``), the local verdicts' thresholds.

    Not the posterior mean of the per-sample share: a sampled function wiggles around
    the mean, so wherever a local effect is near the threshold half the samples cross
    it, which pulls that share towards one half (on the calibration benchmark's real
    grids, 20 draws each, its median absolute error was 0.067-0.115 for four of six
    claims; this share's 0.031-0.040 for four of them: docs/benchmarks.md, "Calibration on real
    trainings")."""
    from multiverse import stats  # on use: claim types load when the Snakefile is parsed

    p = stats.holds_mask(local, relation(claim), margin(claim)).mean(0)
    return {**summary, "fraction_holds": float(np.mean(p > 0.5)), "fraction_holds_lo": float(np.mean(p >= stats.P_HOLDS)),
            "fraction_holds_hi": float(np.mean(p > stats.P_FAILS))}


def region_features(space, universes: Sequence[Mapping[str, Any]], exclude: set[str]):
    """Columns a decision tree splits on, in the space's own terms: numeric dimensions
    (log10 where log-scaled) and one 0/1 column per categorical level. Conditional
    dimensions are left out (their value is meaningless where inactive)."""
    cols, meta = [], []
    for d in space.dimensions:
        if d.name in exclude or d.when is not None:
            continue
        if d.is_categorical:
            for lv in d.choices:
                cols.append([float(u[d.name] == lv) for u in universes])
                meta.append((d, lv))
        else:
            v = np.asarray([u[d.name] for u in universes], dtype=float)
            cols.append(np.log10(v) if d.log else v)
            meta.append((d, None))
    return np.array(cols, dtype=float).T.reshape(len(universes), len(meta)), meta


def _condition(meta, threshold: float, left: bool) -> str:
    d, level = meta
    if level is not None:
        return f"{d.name} {'is not' if left else 'is'} {level}"
    t = 10**threshold if d.log else threshold
    if d.kind == "int":
        return f"{d.name} <= {int(np.floor(t))}" if left else f"{d.name} >= {int(np.floor(t)) + 1}"
    return f"{d.name} {'<' if left else '>='} {t:.2g}"


def _rule(path: Sequence[tuple]) -> str:
    """A leaf's conditions in the space's terms, two splits on one numeric dimension
    merged into the tighter bound (``lr >= 0.03 and lr >= 0.19`` is ``lr >= 0.19``)."""
    tightest: dict[tuple, tuple] = {}
    order = []
    for meta, thr, left in path:
        key = (meta[0].name, meta[1], left) if meta[1] is None else (meta[0].name, meta[1], None)
        if key not in tightest:
            order.append(key)
            tightest[key] = (meta, thr, left)
        elif meta[1] is None:
            keep = min if left else max
            tightest[key] = (meta, keep(thr, tightest[key][1]), left)
    return " and ".join(_condition(*tightest[k]) for k in order) or "everywhere"


#: The order verdict labels are listed in.
LABEL_ORDER = ("holds", "equivalent", "fails", "uncertain")


def describe_regions(space, universes: Sequence[Mapping[str, Any]], labels, exclude: set[str],
                     depth: int = 2) -> dict[str, Any]:
    """Where a claim holds, fails or is uncertain, as rules on the space's dimensions.

    ``labels`` is each reference universe's local verdict (:func:`local_summary`: holds
    at local P(holds) >= 0.95, fails at <= 0.05, equivalent with a margin, else
    uncertain). The share of the multiverse under each label is counted directly; a
    shallow decision tree (scikit-learn) with leaves of at least 10% of the reference
    set then describes where each label lies. Returns the shares, each point's label,
    the leaves (rule, label, share, and purity: the share of the leaf's points that
    carry its label) and the tree's accuracy.
    """
    from sklearn.tree import DecisionTreeClassifier  # on use: claim types load when the Snakefile is parsed

    labels = np.asarray(labels, dtype=object)
    order = [lb for lb in LABEL_ORDER if np.any(labels == lb)] + sorted(set(labels) - set(LABEL_ORDER))
    shares = {lb: float(np.mean(labels == lb)) for lb in order}
    share_text = ", ".join(f"{lb} on {s:.0%}" for lb, s in shares.items())
    base = {"shares": shares, "share_holds": shares.get("holds", 0.0), "labels": [str(lb) for lb in labels]}
    if len(shares) == 1:
        (only,) = shares
        return {**base, "text": f"{only} everywhere in the multiverse", "leaves": [], "accuracy": 1.0}
    X, meta = region_features(space, universes, exclude)
    if X.shape[1] == 0:
        return {**base, "text": share_text + " of the multiverse", "leaves": [], "accuracy": max(shares.values())}
    tree = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=max(1, len(labels) // 10), random_state=0)
    tree.fit(X, labels)
    t = tree.tree_
    leaf_of = tree.apply(X)
    leaves = []

    def label(node: int) -> str | None:
        """A node's class if every leaf under it has the same one, else None."""
        if t.children_left[node] == -1:
            return str(tree.classes_[int(np.argmax(t.value[node][0]))])
        a, b = label(t.children_left[node]), label(t.children_right[node])
        return a if a is not None and a == b else None

    def under(node: int) -> set[int]:
        if t.children_left[node] == -1:
            return {node}
        return under(t.children_left[node]) | under(t.children_right[node])

    def walk(node: int, rules: list[str]) -> None:
        lb = label(node)
        if lb is not None:  # a leaf, or siblings that agree: one rule
            inside = np.isin(leaf_of, list(under(node)))
            leaves.append({"rule": _rule(rules), "label": lb, "holds": lb == "holds",
                           "share": float(inside.mean()), "purity": float(np.mean(labels[inside] == lb))})
            return
        m, thr = meta[t.feature[node]], float(t.threshold[node])
        walk(t.children_left[node], rules + [(m, thr, True)])
        walk(t.children_right[node], rules + [(m, thr, False)])

    walk(0, [])
    acc = float(tree.score(X, labels))
    parts = []
    for lb in order:
        mine = [leaf for leaf in leaves if leaf["label"] == lb]
        if mine and len(leaves) > 1:
            parts.append(f"{lb} for " + "; or ".join(f"{leaf['rule']} ({leaf['share']:.0%})" for leaf in mine))
    text = share_text + " of the multiverse"
    if parts:
        text += ": " + "; ".join(parts) + f" [rules describe {acc:.0%} of it]"
    return {**base, "text": text, "leaves": leaves, "accuracy": acc}


def map_dimensions(space, influence: Mapping[str, float] | None, exclude: Sequence[str], k: int = 2) -> list[str]:
    """The ``k`` most influential numeric, unconditional dimensions (for 2-D maps)."""
    numeric = [d.name for d in space.numeric if d.name not in exclude and d.when is None]
    return sorted(numeric, key=lambda n: -(influence or {}).get(n, 0.0))[:k]


def map_cells(space, dims: Sequence[str], n: int = 12) -> tuple[list, list, list[dict]]:
    """A grid over one or two dimensions: its axes and one ``{dim: value}`` per cell."""
    from multiverse.gp import dimension_grid  # on use: claim types load when the Snakefile is parsed

    gx = dimension_grid(space, dims[0], n)
    gy = dimension_grid(space, dims[1], n) if len(dims) > 1 else [None]
    cells = [{dims[0]: x, **({dims[1]: y} if y is not None else {})} for y in gy for x in gx]
    return gx, gy if len(dims) > 1 else [], cells


# --- the design-based answer --------------------------------------------------------
def design_based(ctx, metrics: Sequence[str], estimate, relation: str, margin_: float = 0.0, pairs: bool = False,
                 **extra: Any) -> dict[str, Any]:
    """A claim's design-based answer (:mod:`multiverse.design_based`): ``estimate`` maps
    the drawn universes' design-based means of ``h`` (``ctx.drawn().means(metrics, h)``,
    or over pairs) to the statistic. ``estimate`` is ``(h, phi)``: the components and the
    statistic of them. Too few drawn universes: no answer."""
    from multiverse import design_based as DB  # on use: claim types load when the Snakefile is parsed
    from multiverse import stats  # on use: claim types load when the Snakefile is parsed

    drawn = ctx.drawn()
    n = len(drawn.sample)
    if n < DB.MIN_DRAWN:
        return stats.too_few(n=n, note=drawn.sample.note)
    h, phi = estimate
    m = drawn.pair_means(metrics, h) if pairs else drawn.means(metrics, h)
    point, se = DB.estimate(phi, m)
    return DB.summarise(float(point), float(se), n - 1, relation, margin_, n=n, note=drawn.sample.note, **extra)


def defined(values):
    """Where a metric is defined (finite), and the values with the rest set to 0."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    return ok, np.where(ok, v, 0.0)


# --- the two answers side by side ---------------------------------------------------
#: Verdict pairs that contradict each other: for a strict relation (superiority),
#: "equivalent" contradicts "holds"; for an inclusive one (non-inferiority), "fails".
def opposite(a: str, b: str, rel: str) -> bool:
    from multiverse.stats import INCLUSIVE  # on use: claim types load when the Snakefile is parsed

    pair = {a, b}
    if pair == {"holds", "fails"}:
        return True
    return pair == ({"equivalent", "fails"} if rel in INCLUSIVE else {"equivalent", "holds"})


def _est(x: Mapping[str, Any]) -> str:
    return f"{x['effect']:+.3f} [{x['effect_lo']:+.3f}, {x['effect_hi']:+.3f}]"


def estimate(x: Mapping[str, Any]) -> str:
    """An answer's estimate with its 95% interval as the tables print it (``n/a`` without one)."""
    if not np.isfinite(x.get("effect", np.nan)):
        return "n/a"
    return _est(x)


def decide(design: Mapping[str, Any], gp: Mapping[str, Any], rel: str, surrogate_ok: bool = True) -> dict[str, Any]:
    """The claim's one verdict, said the same way in the badge, the table and its section.

    It rests on the design-based answer (:mod:`multiverse.design_based`), whose interval
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


def judge(gp: Mapping[str, Any], observed: Mapping[str, Any], rel: str = ">") -> dict[str, Any]:
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


# --- contract members that several claim types share (claims/contract.py) -----------
def reading(gp: Mapping[str, Any], observed: Mapping[str, Any], design: Mapping[str, Any] | None, rel: str,
            label: str = "marginal") -> Reading:
    """One :class:`Reading` of a claim: its three answers, the GP's and the observed
    universes' judged side by side (:func:`judge`)."""
    return Reading(label, dict(gp), dict(observed), None if design is None else dict(design), **judge(gp, observed, rel))


def result(claim: Mapping[str, Any], kind: str, statement: str, readings: Sequence[Reading],
           **fields: Any) -> ClaimResult:
    """A claim type's :class:`ClaimResult` (``kind``: its type's name; ``statement``: the
    claim in words when the config gives none; ``fields``: the rest of the result's)."""
    return ClaimResult(name=claim["name"], type=kind, statement=claim.get("statement") or statement,
                       claim=dict(claim), readings=list(readings), **fields)


def group_relevance(space, claim: Mapping[str, Any], universes: Sequence[Mapping[str, Any]]):
    """``relevance`` of a claim between groups ``a`` and ``b`` of a dimension
    (:func:`multiverse.design.claim_relevance`): 1 in its two groups, 0 elsewhere."""
    levels = list(claim["a"]) + list(claim["b"])
    return np.array([float(u[claim["dimension"]] in levels) for u in universes])


def estimate_cells(gp: Mapping[str, Any], observed: Mapping[str, Any]) -> tuple[str, str]:
    """``table_cells`` of a claim whose cells are its two estimates, the GP's and the observed universes'."""
    return estimate(gp), estimate(observed)


def mean_grid_statistic(local_effects):
    """``grid_statistic`` of a claim whose statistic is the mean of ``local_effects`` (the
    type's ``grid_local_effects``) over a whole full-factorial grid."""
    def grid_statistic(claim: Mapping[str, Any], space, axes: Mapping[str, Sequence[Any]],
                       values: Mapping[str, Any], budgets: Sequence[int] = ()) -> float:
        """Its statistic over a whole full-factorial grid (the calibration benchmark's
        truth), from ``values`` (``{metric: array over axes}``)."""
        return float(np.mean(local_effects(claim, space, axes, values[claim["metric"]])))

    return grid_statistic
