"""Where in the multiverse a claim holds: each reference universe's local verdict by the
claim's own thresholds, the share of the multiverse where it holds, and rules in the
space's own terms (a shallow decision tree) that say where it holds, fails or is
uncertain; the grids of the maps that draw it."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from multiverse import stats
from multiverse.gp import dimension_grid
from multiverse.spec.claims import margin, relation
from multiverse.spec.records import Claim


# --- local verdicts and where a claim holds ----------------------------------------
def local_summary(local, claim: Claim) -> dict[str, Any]:
    """Local P(holds) (and P(equivalent)) at each point from ``samples x points`` local
    effects, and each point's verdict label by the claim's thresholds."""
    rel, m = relation(claim), margin(claim)
    p = stats.holds_mask(local, rel, m).mean(0)
    pe = stats.equivalent_mask(local, m).mean(0) if m > 0 else None
    return {"p_holds": p, "p_equivalent": pe, "labels": stats.local_verdicts(p, pe)}


def with_fraction(summary: dict[str, Any], local, claim: Claim) -> dict[str, Any]:
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
    gx = dimension_grid(space, dims[0], n)
    gy = dimension_grid(space, dims[1], n) if len(dims) > 1 else [None]
    cells = [{dims[0]: x, **({dims[1]: y} if y is not None else {})} for y in gy for x in gx]
    return gx, gy if len(dims) > 1 else [], cells
