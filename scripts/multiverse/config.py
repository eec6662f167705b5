"""The study's config: checks the schema cannot express, hashing, and the round layout.

This module is imported when the Snakefile is parsed, so it needs only PyYAML.
The JSON schema (``workflow/schemas/config.schema.yaml``) is applied by snakemake's
``validate`` first; :func:`check_config` then checks what depends on several keys at
once. Both run when the workflow is parsed, before any job.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import yaml

from multiverse import METRICS

DATASETS = ("digits",)


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and what was expected."""

    def __init__(self, key: str, expected: str, got: Any = None):
        msg = f"config key '{key}': expected {expected}"
        if got is not None:
            msg += f", got {got!r}"
        super().__init__(msg)
        self.key = key


def load_config(path: str | Path) -> dict:
    """Load a YAML config as plain data (safe loader: no Python objects)."""
    with open(path) as fh:
        return yaml.safe_load(fh)


def config_hash(config: Mapping[str, Any]) -> str:
    """Short sha256 of the config's canonical JSON form."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def check_config(config: Mapping[str, Any]) -> None:
    """Cross-key checks; raises :class:`ConfigError` naming the first bad key."""
    if config["data"]["dataset"] not in DATASETS:
        raise ConfigError("data.dataset", f"one of {list(DATASETS)}", config["data"]["dataset"])
    split = config["data"]["split"]
    total = split["train"] + split["validation"] + split["test"]
    if abs(total - 1.0) > 1e-9:
        raise ConfigError("data.split", "train + validation + test == 1", total)

    space = config["space"]
    for name, spec in space.items():
        key = f"space.{name}"
        if spec["type"] == "categorical":
            if len(set(map(str, spec["choices"]))) != len(spec["choices"]):
                raise ConfigError(f"{key}.choices", "distinct choices", spec["choices"])
            continue
        if spec["low"] >= spec["high"]:
            raise ConfigError(f"{key}.low", f"low < high ({spec['high']})", spec["low"])
        if spec.get("log") and spec["low"] <= 0:
            raise ConfigError(f"{key}.low", "a bound > 0 for a log scale", spec["low"])
    if "optimizer" not in space or space["optimizer"]["type"] != "categorical":
        raise ConfigError("space.optimizer", "a categorical dimension of optimizers")
    for opt in space["optimizer"]["choices"]:
        if opt not in OPTIMIZERS:
            raise ConfigError("space.optimizer.choices", f"optimizers among {list(OPTIMIZERS)}", opt)
    for name in ("lr", "weight_decay", "batch_size"):
        if name not in space:
            raise ConfigError(f"space.{name}", "a dimension (the trainer needs it)")
    if space["batch_size"]["type"] != "int":
        raise ConfigError("space.batch_size.type", "'int'", space["batch_size"]["type"])

    design = config["design"]
    shard = config["training"]["shard_size"]
    for key, n in (("design.initial", design["initial"]), ("design.batch", design["batch"])):
        if n % shard:
            raise ConfigError(key, f"a multiple of training.shard_size ({shard})", n)
    for i, name in enumerate(design["outcomes"]):
        if name not in METRICS:
            raise ConfigError(f"design.outcomes[{i}]", f"a metric among {list(METRICS)}", name)

    for i, claim in enumerate(config.get("claims", [])):
        key = f"claims[{i}]"
        if claim["metric"] not in METRICS:
            raise ConfigError(f"{key}.metric", f"a metric among {list(METRICS)}", claim["metric"])
        dim = claim["dimension"]
        if dim not in space:
            raise ConfigError(f"{key}.dimension", f"a dimension among {list(space)}", dim)
        if space[dim]["type"] != "categorical":
            raise ConfigError(f"{key}.dimension", "a categorical dimension", dim)
        for side in ("a", "b"):
            for level in claim[side]:
                if level not in space[dim]["choices"]:
                    raise ConfigError(f"{key}.{side}", f"levels of '{dim}' among {space[dim]['choices']}", level)
        if set(claim["a"]) & set(claim["b"]):
            raise ConfigError(f"{key}.b", "levels disjoint from a", claim["b"])
    names = [c["name"] for c in config.get("claims", [])]
    if len(set(names)) != len(names):
        raise ConfigError("claims", "distinct claim names", names)


#: Optimizers the trainer knows (see ``multiverse.train.make_optimizer``).
OPTIMIZERS = ("sgd", "momentum", "adam", "rmsprop")


# --- the layout of design rounds -----------------------------------------------
def round_sizes(config: Mapping[str, Any]) -> list[int]:
    """Universes per design round: round 0 is the Sobol sample, rounds 1..R the GP's."""
    d = config["design"]
    return [d["initial"]] + [d["batch"]] * d["rounds"]


def n_shards(config: Mapping[str, Any], round_: int) -> int:
    return round_sizes(config)[round_] // config["training"]["shard_size"]


def report_metrics(config: Mapping[str, Any]) -> list[str]:
    """Metrics the report shows: those the claims name, then the design's outcomes."""
    names = [c["metric"] for c in config.get("claims", [])] + list(config["design"]["outcomes"])
    return list(dict.fromkeys(names))


def universe_id(round_: int, index: int) -> str:
    return f"r{round_}u{index:03d}"


def shard_of(config: Mapping[str, Any], index: int) -> tuple[int, int]:
    """Universe ``index`` within its round -> (shard, slot within the shard)."""
    s = config["training"]["shard_size"]
    return index // s, index % s


def derive_seed(seed: int, *keys: int) -> int:
    """A 31-bit seed derived from the study seed and integer keys (round, index, ...)."""
    import numpy as np  # here, so that parsing the Snakefile needs no numpy

    return int(np.random.SeedSequence([int(seed), *map(int, keys)]).generate_state(1)[0] >> 1)
