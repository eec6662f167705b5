"""Universe ids and seeds: every random choice of a study derives from its ``seed``."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def universe_id(round_: int, index: int) -> str:
    return f"r{round_}u{index:03d}"


def replicate_seed(seed: int, round_: int, index: int, replicate: int) -> int:
    """The training seed of a universe's replicate; replicate 0's is the design file's ``seed``."""
    return derive_seed(seed, round_, index, 1 + replicate)


def with_replicate(universe: Mapping[str, Any], replicate: int, seed: int) -> dict[str, Any]:
    """A design-file universe as trained under its ``replicate``-th seed."""
    return {**universe, "replicate": replicate, "seed": replicate_seed(seed, universe["round"], universe["index"], replicate)}


def derive_seed(seed: int, *keys: int) -> int:
    """A 31-bit seed derived from the study seed and integer keys (round, index, ...)."""
    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0] >> 1)
