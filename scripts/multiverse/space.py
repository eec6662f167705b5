"""The multiverse's search space: its dimensions, sampling and GP encoding.

A *universe* is a dict ``{dimension name: value}``. Two encodings are used:

- the unit cube ``[0, 1)^k`` over the numeric dimensions, in which Sobol, random,
  grid and candidate points are drawn (log dimensions are uniform in log space);
- the GP's raw features (``SearchSpace.encode``): the values of numeric dimensions
  as they are, and categorical ones one-hot (or as level indices, for a categorical
  kernel). Log scales and integers are the GP's input transform's business
  (:func:`multiverse.gp.input_transform`), not this module's.

A *conditional* dimension (``when: {optimizer: [momentum]}`` in the config) is
active only under some levels of one categorical dimension; elsewhere its value is
``None``. Universes that differ only in inactive dimensions are the same universe
(:meth:`SearchSpace.key`), and the GP sees an inactive dimension at a fixed value, the
middle of its range (Ax's convention for inactive parameters of a hierarchical
search space), so what a universe never used cannot move the surrogate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np


@dataclass(frozen=True)
class Dimension:
    """One choice of the multiverse."""

    name: str
    kind: str  # "float", "int" or "categorical"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    #: ``(parent dimension, levels)`` under which this dimension is active; None: always.
    when: tuple[str, tuple[Any, ...]] | None = None

    def is_active(self, universe: Mapping[str, Any]) -> bool:
        return self.when is None or universe[self.when[0]] in self.when[1]

    @property
    def inactive_value(self) -> Any:
        """The value the GP sees when the dimension is inactive: the middle of its range."""
        if self.is_categorical:
            return self.choices[0]
        return self.from_unit(np.array([0.5]))[0]

    @property
    def is_categorical(self) -> bool:
        return self.kind == "categorical"

    @property
    def n_features(self) -> int:
        return len(self.choices) if self.is_categorical else 1

    def _warp(self, v: np.ndarray) -> np.ndarray:
        return np.log10(v) if self.log else v

    def feature_bounds(self) -> tuple[float, float]:
        return float(self._warp(np.float64(self.low))), float(self._warp(np.float64(self.high)))

    def from_unit(self, u: np.ndarray) -> list[Any]:
        """Map ``u`` in [0, 1] to values; uniform in log space when ``log``."""
        lo, hi = self.feature_bounds()
        z = lo + np.asarray(u, dtype=float) * (hi - lo)
        v = 10.0**z if self.log else z
        if self.kind == "int":
            v = np.clip(np.rint(v), self.low, self.high)
            return [int(x) for x in v]
        return [float(x) for x in np.clip(v, self.low, self.high)]

    def to_unit(self, values: Sequence[Any]) -> np.ndarray:
        lo, hi = self.feature_bounds()
        return (self._warp(np.asarray(values, dtype=float)) - lo) / (hi - lo)

    def encode(self, values: Sequence[Any], categorical: str = "onehot") -> np.ndarray:
        """``n`` values -> ``n x n_features`` raw GP features (None: the inactive value).

        ``categorical``: ``onehot`` columns, or ``index``, one column of level indices.
        """
        values = [self.inactive_value if v is None else v for v in values]
        if self.is_categorical:
            idx = [self.choices.index(v) for v in values]
            return np.eye(len(self.choices))[idx] if categorical == "onehot" else np.array(idx, dtype=float)[:, None]
        return np.asarray(values, dtype=float)[:, None]

    def n_encoded(self, categorical: str = "onehot") -> int:
        return self.n_features if categorical == "onehot" else 1


class SearchSpace:
    """An ordered collection of dimensions, built from the config's ``space``."""

    def __init__(self, dimensions: Sequence[Dimension]):
        self.dimensions = list(dimensions)
        self.numeric = [d for d in self.dimensions if not d.is_categorical]
        self.categorical = [d for d in self.dimensions if d.is_categorical]

    @classmethod
    def from_config(cls, space: Mapping[str, Mapping[str, Any]]) -> "SearchSpace":
        dims = []
        for name, spec in space.items():
            when = None
            if spec.get("when"):
                ((parent, levels),) = spec["when"].items()
                when = (parent, tuple(levels))
            if spec["type"] == "categorical":
                dims.append(Dimension(name, "categorical", choices=tuple(spec["choices"]), when=when))
            else:
                dims.append(
                    Dimension(
                        name,
                        spec["type"],
                        low=spec["low"],
                        high=spec["high"],
                        log=bool(spec.get("log", False)),
                        when=when,
                    )
                )
        return cls(dims)

    def canonical(self, universe: Mapping[str, Any]) -> dict[str, Any]:
        """The universe with every inactive dimension set to None."""
        return {d.name: (universe[d.name] if d.is_active(universe) else None) for d in self.dimensions}

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    def __getitem__(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise KeyError(name)

    # --- features ---------------------------------------------------------
    @property
    def n_features(self) -> int:
        return sum(d.n_features for d in self.dimensions)

    def feature_names(self, categorical: str = "onehot") -> list[str]:
        out = []
        for d in self.dimensions:
            if d.is_categorical and categorical == "onehot":
                out += [f"{d.name}={c}" for c in d.choices]
            else:
                out.append(d.name)
        return out

    def columns(self, categorical: str = "onehot") -> dict[str, list[int]]:
        """Each dimension's feature columns in :meth:`encode`'s output."""
        out, i = {}, 0
        for d in self.dimensions:
            k = d.n_encoded(categorical)
            out[d.name], i = list(range(i, i + k)), i + k
        return out

    def bounds(self, categorical: str = "onehot") -> np.ndarray:
        """``2 x n_features`` box of the features after the log transform (log10 of
        log-scaled dimensions): the bounds the GP's ``Normalize`` maps to the unit cube.
        Categorical columns get ``[0, 1]``, which leaves them as they are."""
        lo, hi = [], []
        for d in self.dimensions:
            if d.is_categorical:
                lo += [0.0] * d.n_encoded(categorical)
                hi += [1.0] * d.n_encoded(categorical)
            else:
                a, b = d.feature_bounds()
                lo.append(a)
                hi.append(b)
        return np.array([lo, hi])

    def encode(self, universes: Sequence[Mapping[str, Any]], categorical: str = "onehot") -> np.ndarray:
        """``n`` universes -> ``n x n_features`` raw features (inactive dimensions at their
        :attr:`Dimension.inactive_value`)."""
        width = sum(d.n_encoded(categorical) for d in self.dimensions)
        if not universes:
            return np.zeros((0, width))
        cols = [
            d.encode([u[d.name] if d.is_active(u) else None for u in universes], categorical)
            for d in self.dimensions
        ]
        return np.concatenate(cols, axis=1)

    # --- construction of universes ----------------------------------------
    def from_unit(self, u: np.ndarray, levels: Sequence[Sequence[Any]], canonical: bool = True) -> list[dict]:
        """Universes from ``n x len(numeric)`` unit points and ``n`` level tuples.

        With ``canonical=False`` every dimension keeps a value, for reference sets whose
        categorical levels a caller overwrites (a dimension inactive under one level is
        active under another)."""
        u = np.asarray(u, dtype=float).reshape(len(levels), len(self.numeric))
        values = {d.name: d.from_unit(u[:, j]) for j, d in enumerate(self.numeric)}
        out = []
        for i, lv in enumerate(levels):
            cat = dict(zip((d.name for d in self.categorical), lv))
            u = {d.name: (cat[d.name] if d.is_categorical else values[d.name][i]) for d in self.dimensions}
            out.append(self.canonical(u) if canonical else u)
        return out

    def level_combinations(self) -> list[tuple[Any, ...]]:
        return list(itertools.product(*(d.choices for d in self.categorical)))

    def sobol(self, n: int, seed: int) -> list[dict]:
        """``n`` universes from one scrambled Sobol sequence over all dimensions.

        A categorical dimension takes the Sobol coordinate's ``floor(u * L)``-th level.
        """
        return self.from_cube(scrambled_sobol(n, len(self.dimensions), seed))

    def cube_names(self) -> list[str]:
        """The dimension of each column of :meth:`from_cube`'s cube: numeric, then categorical."""
        return [d.name for d in self.numeric] + [d.name for d in self.categorical]

    def from_cube(self, u: np.ndarray) -> list[dict]:
        """Universes from ``n x k`` points of the unit cube with one column per dimension
        (in :meth:`cube_names` order); a categorical column in ``[l/L, (l+1)/L)`` picks
        level ``l``, so the cube's uniform measure is the space's."""
        u = np.asarray(u, dtype=float).reshape(-1, len(self.dimensions))
        num, cat = u[:, : len(self.numeric)], u[:, len(self.numeric) :]
        levels = [
            tuple(d.choices[min(int(math.floor(c * len(d.choices))), len(d.choices) - 1)] for d, c in zip(self.categorical, row))
            for row in cat
        ]
        return self.from_unit(num, levels)

    def enumerated(self, n: int, seed: int, canonical: bool = True) -> list[dict]:
        """``n`` Sobol points over the numeric dimensions, crossed with every level combination.

        Used for candidate and reference sets, so every categorical level is
        represented equally whatever ``n``.
        """
        u = scrambled_sobol(n, len(self.numeric), seed)
        combos = self.level_combinations()
        levels = [lv for lv in combos for _ in range(n)]
        return self.from_unit(np.tile(u, (len(combos), 1)), levels, canonical)

    def random(self, n: int, seed: int) -> list[dict]:
        """``n`` universes drawn independently and uniformly (log dimensions uniform in log space)."""
        rng = np.random.default_rng(seed)
        u = rng.random((n, len(self.numeric)))
        levels = [tuple(d.choices[rng.integers(len(d.choices))] for d in self.categorical) for _ in range(n)]
        return self.from_unit(u, levels)

    def grid(self, levels: int, seed: int) -> list[dict]:
        """The full factorial grid, ``levels`` evenly spaced values per numeric dimension
        (on its own scale) times every level combination, in a seeded random order so
        that any prefix of it is spread over the space. Universes that the grid makes
        twice (integers rounding together, inactive dimensions) appear once."""
        axis = np.linspace(0.0, 1.0, levels)
        u = np.array(list(itertools.product(axis, repeat=len(self.numeric)))).reshape(-1, len(self.numeric))
        combos = self.level_combinations()
        points = self.from_unit(np.tile(u, (len(combos), 1)), [lv for lv in combos for _ in range(len(u))])
        unique = list({self.key(p): p for p in points}.values())
        order = np.random.default_rng(seed).permutation(len(unique))
        return [unique[i] for i in order]

    def key(self, universe: Mapping[str, Any]) -> tuple:
        """A hashable identity of a universe's parameters (for duplicate checks);
        inactive dimensions do not count."""
        def value(d: Dimension) -> Any:
            v = universe.get(d.name)
            if v is None or not d.is_active(universe):
                return None
            return round(float(v), 12) if d.kind == "float" else v

        return tuple((d.name, value(d)) for d in self.dimensions)

    def universe(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A universe from a table row or JSON record: ints as int, floats as float,
        missing or NaN values of inactive dimensions as None."""
        out = {}
        for d in self.dimensions:
            v = values.get(d.name)
            if v is None or (not d.is_categorical and isinstance(v, float) and math.isnan(v)):
                out[d.name] = None
            elif d.is_categorical:
                out[d.name] = v
            else:
                out[d.name] = int(v) if d.kind == "int" else float(v)
        return self.canonical(out)


def scrambled_sobol(n: int, k: int, seed: int) -> np.ndarray:
    """``n x k`` scrambled Sobol points in [0, 1), reproducible from ``seed`` (torch's engine, as BoTorch uses)."""
    import torch  # deferred: torch takes ~1 s to import and only this function of space needs it
    from torch.quasirandom import SobolEngine  # deferred: as torch above

    if k == 0:
        return np.zeros((n, 0))
    return SobolEngine(k, scramble=True, seed=int(seed)).draw(n, dtype=torch.float64).numpy()
