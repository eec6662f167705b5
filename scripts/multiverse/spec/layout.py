"""The layout of a study's jobs: its design rounds' sizes, their shards, and what one
train job and one cluster submission hold. Imported when the Snakefile is parsed (the
rules' wildcards and resources come from here), so it needs only the standard library."""

from __future__ import annotations

import math
from typing import Any, Mapping

from multiverse.errors import ConfigError


def budget_rounds(budget: int, shard_size: int) -> dict[str, int]:
    """``initial``, ``rounds`` and ``batch`` for a budget of ``budget`` trainings in shards
    of ``shard_size`` (the rule the schema's ``design.budget`` states): batch a sixth of
    the budget and round 0 a third, each a multiple of the shard (at least one), as many
    rounds as the rest holds, and round 0 takes up the remainder, rounded up to a shard
    (so the total is the budget, or at most ``shard_size - 1`` over it). 48 in shards of 4
    gives the default study's 16 + 4 x 8."""
    def shards(n: float) -> int:
        return shard_size * max(1, math.ceil(n / shard_size - 1e-9))

    batch = shard_size * max(1, round(budget / (6 * shard_size)))
    rounds = max(0, (budget - shards(max(2, budget / 3))) // batch)
    return {"initial": shards(max(2, budget - rounds * batch)), "rounds": rounds, "batch": batch}


def derive_rounds(config: dict) -> None:
    """Fill in what ``design.budget`` derives of ``initial``, ``rounds`` and ``batch``
    (:func:`budget_rounds`); keys the config gives win. A config validated against the
    schema has the budget or all three."""
    design = config["design"]
    if "budget" in design:
        for key, value in budget_rounds(design["budget"], config["training"]["shard_size"]).items():
            design.setdefault(key, value)


def round_sizes(config: Mapping[str, Any]) -> list[int]:
    """Universes per design round: round 0 is the Sobol sample, rounds 1..R the GP's."""
    d = config["design"]
    return [d["initial"]] + [d["batch"]] * d["rounds"]


def n_shards(config: Mapping[str, Any], round_: int) -> int:
    return round_sizes(config)[round_] // config["training"]["shard_size"]


def gpus_per_job(config: Mapping[str, Any]) -> int:
    """GPUs a train or metrics job asks for: ``training.gpus``, else 1 with ``device: cuda``."""
    training = config["training"]
    if training.get("gpus") is not None:
        return int(training["gpus"])
    return 1 if training["device"] == "cuda" else 0


def train_job_size(config: Mapping[str, Any]) -> dict[str, int]:
    """What one train job asks for: ``threads`` and ``mem_mb`` are one universe's
    (``training.threads``, ``training.mem_mb``) times ``training.per_device``, the
    universes it trains at once; ``gpus`` is :func:`gpus_per_job` (they share it)."""
    training = config["training"]
    k = training.get("per_device", 1)
    return {"threads": training["threads"] * k, "mem_mb": training["mem_mb"] * k, "gpus": gpus_per_job(config)}


def shards_per_submission(config: Mapping[str, Any]) -> int:
    """How many shards (a train job and its metrics job each) one cluster submission holds:
    as many as fit the declared node (``cluster``) side by side, by a train job's GPUs,
    CPU cores and memory (:func:`train_job_size`; a metrics job, which follows it, asks
    for no more); 1 without a declared node. Raises :class:`ConfigError` when one job
    alone does not fit the node."""
    node = config.get("cluster")
    if not node:
        return 1
    size = train_job_size(config)
    times = "" if config["training"].get("per_device", 1) == 1 else " x training.per_device"
    need = {"gpus": (size["gpus"], node.get("gpus_per_node", 0), "training.gpus", "cluster.gpus_per_node"),
            "cpus": (size["threads"], node["cpus_per_node"], "training.threads" + times, "cluster.cpus_per_node"),
            "mem": (size["mem_mb"], node["mem_mb_per_node"], "training.mem_mb" + times, "cluster.mem_mb_per_node")}
    fits = []
    for job, capacity, key, node_key in need.values():
        if job > capacity:
            raise ConfigError(key, f"at most the node's {capacity} ({node_key}): one job must fit one node", job)
        if job:
            fits.append(capacity // job)
    return max(1, min(fits))


def low_fidelity(config: Mapping[str, Any]) -> dict[str, Any]:
    """``design.fidelity``'s low fidelity, what rule train's universes stop at: ``{"epochs": k}``
    or ``{"fraction": q}`` (:func:`multiverse.fidelity.low_epochs`)."""
    f = config["design"]["fidelity"]
    return {k: f[k] for k in ("epochs", "fraction") if k in f}


def continuation_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """``design.fidelity``'s continuation draw (rule continuation): ``share``, ``probability``,
    ``floor`` (None: half the share, :func:`multiverse.fidelity.default_floor`) and the
    ``metric`` the active probabilities follow (default: the first of ``design.outcomes``)."""
    f = config["design"]["fidelity"]
    return {"share": f["share"], "probability": f["probability"], "floor": f.get("floor"),
            "metric": f.get("metric") or config["design"]["outcomes"][0]}
