"""The multiverse's search space: its dimensions, sampling and GP encoding.

A *universe* is a dict ``{dimension name: value}``. Three encodings are used:

- the unit cube ``[0, 1)^k`` over the numeric dimensions, in which Sobol and
  candidate points are drawn (log dimensions are uniform in log space);
- the GP's feature space (``SearchSpace.encode``): ``log10`` of log-scaled
  dimensions, raw values of linear ones, one-hot columns for categorical ones.
  ``SearchSpace.bounds`` gives that space's box, which the GP's ``Normalize``
  input transform maps to the unit cube.
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

    def encode(self, values: Sequence[Any]) -> np.ndarray:
        """``n`` values -> ``n x n_features`` GP features."""
        if self.is_categorical:
            idx = [self.choices.index(v) for v in values]
            return np.eye(len(self.choices))[idx]
        return self._warp(np.asarray(values, dtype=float))[:, None]


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
            if spec["type"] == "categorical":
                dims.append(Dimension(name, "categorical", choices=tuple(spec["choices"])))
            else:
                dims.append(
                    Dimension(
                        name,
                        spec["type"],
                        low=spec["low"],
                        high=spec["high"],
                        log=bool(spec.get("log", False)),
                    )
                )
        return cls(dims)

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

    def feature_names(self) -> list[str]:
        out = []
        for d in self.dimensions:
            out += [f"{d.name}={c}" for c in d.choices] if d.is_categorical else [d.name]
        return out

    @property
    def bounds(self) -> np.ndarray:
        """``2 x n_features`` box of the feature space."""
        lo, hi = [], []
        for d in self.dimensions:
            if d.is_categorical:
                lo += [0.0] * d.n_features
                hi += [1.0] * d.n_features
            else:
                a, b = d.feature_bounds()
                lo.append(a)
                hi.append(b)
        return np.array([lo, hi])

    def encode(self, universes: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """``n`` universes -> ``n x n_features`` array."""
        if not universes:
            return np.zeros((0, self.n_features))
        cols = [d.encode([u[d.name] for u in universes]) for d in self.dimensions]
        return np.concatenate(cols, axis=1)

    # --- construction of universes ----------------------------------------
    def from_unit(self, u: np.ndarray, levels: Sequence[Sequence[Any]]) -> list[dict]:
        """Universes from ``n x len(numeric)`` unit points and ``n`` level tuples."""
        u = np.asarray(u, dtype=float).reshape(len(levels), len(self.numeric))
        values = {d.name: d.from_unit(u[:, j]) for j, d in enumerate(self.numeric)}
        out = []
        for i, lv in enumerate(levels):
            cat = dict(zip((d.name for d in self.categorical), lv))
            out.append({d.name: (cat[d.name] if d.is_categorical else values[d.name][i]) for d in self.dimensions})
        return out

    def level_combinations(self) -> list[tuple[Any, ...]]:
        return list(itertools.product(*(d.choices for d in self.categorical)))

    def sobol(self, n: int, seed: int) -> list[dict]:
        """``n`` universes from one scrambled Sobol sequence over all dimensions.

        A categorical dimension takes the Sobol coordinate's ``floor(u * L)``-th level.
        """
        k = len(self.numeric) + len(self.categorical)
        u = scrambled_sobol(n, k, seed)
        num, cat = u[:, : len(self.numeric)], u[:, len(self.numeric) :]
        levels = [
            tuple(d.choices[min(int(math.floor(c * len(d.choices))), len(d.choices) - 1)] for d, c in zip(self.categorical, row))
            for row in cat
        ]
        return self.from_unit(num, levels)

    def enumerated(self, n: int, seed: int) -> list[dict]:
        """``n`` Sobol points over the numeric dimensions, crossed with every level combination.

        Used for candidate and reference sets, so every categorical level is
        represented equally whatever ``n``.
        """
        u = scrambled_sobol(n, len(self.numeric), seed)
        combos = self.level_combinations()
        levels = [lv for lv in combos for _ in range(n)]
        return self.from_unit(np.tile(u, (len(combos), 1)), levels)

    def key(self, universe: Mapping[str, Any]) -> tuple:
        """A hashable identity of a universe's parameters (for duplicate checks)."""
        return tuple(
            (d.name, universe[d.name] if d.kind != "float" else round(float(universe[d.name]), 12))
            for d in self.dimensions
        )


def scrambled_sobol(n: int, k: int, seed: int) -> np.ndarray:
    """``n x k`` scrambled Sobol points in [0, 1), reproducible from ``seed`` (torch's engine, as BoTorch uses)."""
    from torch.quasirandom import SobolEngine
    import torch

    if k == 0:
        return np.zeros((n, 0))
    return SobolEngine(k, scramble=True, seed=int(seed)).draw(n, dtype=torch.float64).numpy()
