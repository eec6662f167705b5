"""The study's config: checks the schema cannot express, hashing, and the round layout.

This module is imported when the Snakefile is parsed, so it needs only PyYAML.
The JSON schema (``workflow/schemas/config.schema.yaml``) is applied by snakemake's
``validate`` first, which also fills in every default: the schema is the one place
they are written, and the code reads ``config[...]`` as the Snakefile sees it.
:func:`check_config` then checks what depends on several keys at once. Both run when
the workflow is parsed, before any job. A config written by hand (a test, a benchmark)
gets the same defaults from :func:`with_defaults`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import yaml

from multiverse import METRICS, OPTIONAL_METRICS

#: Datasets bundled with an installed package, and those read from ``data.path``.
BUNDLED_DATASETS = ("digits",)
LOCAL_DATASETS = ("mnist", "cifar10", "cifar100")
DATASETS = BUNDLED_DATASETS + LOCAL_DATASETS
#: Space dimensions the trainer reads (:func:`multiverse.train.train_universe`); the
#: first four are required. ``epochs`` or ``steps`` makes the budget a choice.
TRAINING_DIMENSIONS = ("optimizer", "lr", "weight_decay", "batch_size", "momentum", "eps", "lr_scaling",
                       "warmup_epochs", "epochs", "steps")
#: Levels of an ``lr_scaling`` dimension (:data:`multiverse.train.LR_SCALING`).
LR_SCALING_RULES = ("none", "linear", "sqrt")
#: The config's JSON schema, the one place its defaults are written.
SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


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


def with_defaults(config: Mapping[str, Any]) -> dict:
    """A copy of ``config`` validated against :data:`SCHEMA` with its defaults filled in,
    as the Snakefile sees it (snakemake's ``validate``; its ``WorkflowError`` names what
    the schema rejects)."""
    from snakemake.utils import validate  # not at import: parsing the workflow needs only PyYAML

    config = copy.deepcopy(dict(config))
    validate(config, str(SCHEMA))
    return config


def config_hash(config: Mapping[str, Any]) -> str:
    """Short sha256 of the config's canonical JSON form."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def multiverse_hash(config: Mapping[str, Any]) -> str:
    """Hash of what defines the universes and their results: everything but the claims,
    the report settings and the parallelism (threads), so that editing a claim does not
    change the provenance of the table."""
    skip = {"claims", "report"}
    core = {k: v for k, v in config.items() if k not in skip}
    for section in ("training", "design"):
        if section in core:
            core[section] = {k: v for k, v in core[section].items() if k not in ("threads", "retries")}
    return config_hash(core)


def check_config(config: Mapping[str, Any]) -> None:
    """Cross-key checks of a validated config (defaults filled in: :func:`with_defaults`);
    raises :class:`ConfigError` naming the first bad key."""
    if config["data"]["dataset"] not in DATASETS:
        raise ConfigError("data.dataset", f"one of {list(DATASETS)}", config["data"]["dataset"])
    if config["data"]["dataset"] in LOCAL_DATASETS:
        path = config["data"].get("path")
        if not path:
            raise ConfigError("data.path", f"a local folder holding the {config['data']['dataset']} files")
        if not Path(path).exists():
            raise ConfigError("data.path", "an existing local path", path)
    split = config["data"]["split"]
    total = split["train"] + split["validation"] + split["test"]
    if abs(total - 1.0) > 1e-9:
        raise ConfigError("data.split", "train + validation + test == 1", total)

    space = config["space"]
    for name, spec in space.items():
        key = f"space.{name}"
        if name not in TRAINING_DIMENSIONS:
            raise ConfigError(key, f"a dimension the trainer uses, among {list(TRAINING_DIMENSIONS)}", name)
        if spec["type"] == "categorical":
            if len(set(map(str, spec["choices"]))) != len(spec["choices"]):
                raise ConfigError(f"{key}.choices", "distinct choices", spec["choices"])
            continue
        if spec["low"] >= spec["high"]:
            raise ConfigError(f"{key}.low", f"low < high ({spec['high']})", spec["low"])
        if spec["log"] and spec["low"] <= 0:
            raise ConfigError(f"{key}.low", "a bound > 0 for a log scale", spec["low"])
    for name, spec in space.items():
        if not spec.get("when"):
            continue
        key = f"space.{name}.when"
        ((parent, levels),) = spec["when"].items()
        if parent == name or parent not in space or space[parent]["type"] != "categorical":
            raise ConfigError(key, f"a categorical dimension among {[n for n, s in space.items() if s['type'] == 'categorical' and n != name]}", parent)
        if space[parent].get("when"):
            raise ConfigError(key, f"a parent dimension that is not itself conditional ('{parent}' is)", parent)
        for level in levels:
            if level not in space[parent]["choices"]:
                raise ConfigError(f"{key}.{parent}", f"levels of '{parent}' among {space[parent]['choices']}", level)
    if "optimizer" not in space or space["optimizer"]["type"] != "categorical":
        raise ConfigError("space.optimizer", "a categorical dimension of optimizers")
    for opt in space["optimizer"]["choices"]:
        if opt not in OPTIMIZERS:
            raise ConfigError("space.optimizer.choices", f"optimizers among {list(OPTIMIZERS)}", opt)
    for name in ("lr", "weight_decay", "batch_size"):
        if name not in space:
            raise ConfigError(f"space.{name}", "a dimension (the trainer needs it)")
        if space[name].get("when"):
            raise ConfigError(f"space.{name}.when", "no condition (every optimizer uses it)", space[name]["when"])
    if "momentum" in space and not (space["momentum"]["type"] == "float" and 0 <= space["momentum"]["low"] and space["momentum"]["high"] < 1):
        raise ConfigError("space.momentum", "a float dimension within [0, 1)", space["momentum"])
    if "eps" in space and not (space["eps"]["type"] == "float" and space["eps"]["low"] > 0):
        raise ConfigError("space.eps", "a float dimension with low > 0", space["eps"])
    if "lr_scaling" in space:
        spec = space["lr_scaling"]
        if spec["type"] != "categorical" or not set(spec["choices"]) <= set(LR_SCALING_RULES):
            raise ConfigError("space.lr_scaling", f"a categorical dimension with choices among {list(LR_SCALING_RULES)}",
                              spec.get("choices", spec["type"]))
    if "warmup_epochs" in space and (space["warmup_epochs"]["type"] == "categorical" or space["warmup_epochs"]["low"] < 0):
        raise ConfigError("space.warmup_epochs", "a numeric dimension with low >= 0", space["warmup_epochs"])
    for name in ("epochs", "steps"):
        if name in space and (space[name]["type"] != "int" or space[name]["low"] < 1):
            raise ConfigError(f"space.{name}", "an int dimension with low >= 1", space[name])
    if "epochs" in space and "steps" in space:
        raise ConfigError("space.steps", "either an epochs or a steps budget dimension, not both", "steps")
    if space["batch_size"]["type"] != "int":
        raise ConfigError("space.batch_size.type", "'int'", space["batch_size"]["type"])
    if space["batch_size"]["low"] < 1:
        raise ConfigError("space.batch_size.low", "a batch size >= 1", space["batch_size"]["low"])

    design = config["design"]
    shard = config["training"]["shard_size"]
    for key, n in (("design.initial", design["initial"]), ("design.batch", design["batch"])):
        if n % shard:
            raise ConfigError(key, f"a multiple of training.shard_size ({shard})", n)
    metrics = study_metrics(config)
    for i, name in enumerate(design["outcomes"]):
        check_metric(name, f"design.outcomes[{i}]", metrics)
    for i, name in enumerate(config["report"]["metrics"]):
        check_metric(name, f"report.metrics[{i}]", metrics)
    seeds = config["training"]["seeds"]
    if design["replicates"] > seeds:
        raise ConfigError("design.replicates", f"at most training.seeds ({seeds})", design["replicates"])
    size = space_size(space)
    if design["strategy"] == "grid":
        size = grid_size(space, design["grid_levels"])
    total = design["initial"] + design["rounds"] * design["batch"]
    for key, n in (("design.initial", design["initial"]), ("design.batch", design["batch"])):
        if n > size:
            raise ConfigError(key, f"at most the {size} distinct universes of the space", n)
    if total > size:
        what = f"{size} universes of a grid of design.grid_levels values" if design["strategy"] == "grid" else f"{size} universes"
        raise ConfigError("design.rounds", f"a budget (initial + rounds * batch) of at most {what}", total)
    combos = 1
    for spec in space.values():
        combos *= len(spec["choices"]) if spec["type"] == "categorical" else 1
    if design["candidates"] * combos < design["batch"]:
        raise ConfigError("design.candidates", f"at least batch / {combos} level combinations", design["candidates"])

    for i, claim in enumerate(config["claims"]):
        check_claim(claim, f"claims[{i}]", space, metrics)
    names = [c["name"] for c in config["claims"]]
    if len(set(names)) != len(names):
        raise ConfigError("claims", "distinct claim names", names)


def study_metrics(config: Mapping[str, Any]) -> list[str]:
    """The metrics of this study's universes: :data:`multiverse.METRICS`, plus those of
    :data:`multiverse.OPTIONAL_METRICS` whose config key is set."""
    optional = [m for m, key in OPTIONAL_METRICS.items()
                if config[key.split(".")[0]].get(key.split(".")[1]) is not None]
    return list(METRICS) + optional


def check_metric(name: str, key: str, metrics: list[str]) -> None:
    """``name`` is one of the study's ``metrics`` (:func:`study_metrics`)."""
    if name not in metrics:
        hint = f" ({name} needs config key '{OPTIONAL_METRICS[name]}')" if name in OPTIONAL_METRICS else ""
        raise ConfigError(key, f"a metric among {metrics}{hint}", name)


class Checks:
    """The checks a claim type's ``check`` uses (:mod:`multiverse.claims`): a metric the
    study has, a dimension of the right kind, levels of a categorical dimension."""

    def __init__(self, space: Mapping[str, Mapping[str, Any]], metrics: list[str]):
        self.space, self.metrics = space, metrics

    def metric(self, name: str, key: str) -> None:
        check_metric(name, key, self.metrics)

    def dimension(self, value: Any, key: str, categorical: bool | None) -> None:
        if value not in self.space:
            raise ConfigError(key, f"a dimension among {list(self.space)}", value)
        if categorical is not None and (self.space[value]["type"] == "categorical") != categorical:
            raise ConfigError(key, f"a {'categorical' if categorical else 'numeric'} dimension", value)

    def groups(self, claim: Mapping[str, Any], key: str) -> None:
        """``dimension`` is categorical and ``a``, ``b`` are disjoint sets of its levels."""
        dim = claim["dimension"]
        self.dimension(dim, f"{key}.dimension", categorical=True)
        for side in ("a", "b"):
            for level in claim[side]:
                if level not in self.space[dim]["choices"]:
                    raise ConfigError(f"{key}.{side}", f"levels of '{dim}' among {self.space[dim]['choices']}", level)
        if set(claim["a"]) & set(claim["b"]):
            raise ConfigError(f"{key}.b", "levels disjoint from a", claim["b"])


def check_claim(claim: Mapping[str, Any], key: str, space: Mapping[str, Mapping[str, Any]], metrics: list[str]) -> None:
    """A claim names metrics, dimensions and levels that exist, of the kind its type
    needs (each claim type's own ``check``)."""
    from multiverse.claims import kind

    if claim.get("margin") is not None and claim["margin"] < 0:
        raise ConfigError(f"{key}.margin", "a margin >= 0 in the statistic's units", claim["margin"])
    kind(claim).check(claim, key, Checks(space, metrics))


def space_size(space: Mapping[str, Mapping[str, Any]]) -> float:
    """Number of distinct universes: infinite with any float dimension."""
    return _count(space, lambda spec: float("inf") if spec["type"] == "float" else spec["high"] - spec["low"] + 1)


def grid_size(space: Mapping[str, Mapping[str, Any]], levels: int) -> float:
    """Universes of the grid strategy's full factorial grid (at most; integers that round
    together count once)."""
    return _count(space, lambda spec: levels if spec["type"] == "float" else min(levels, spec["high"] - spec["low"] + 1))


def _count(space: Mapping[str, Mapping[str, Any]], values) -> float:
    """Distinct universes when numeric dimension ``spec`` takes ``values(spec)`` values:
    summed over the level combinations, since an inactive dimension takes none."""
    import itertools

    cats = [n for n, s in space.items() if s["type"] == "categorical"]
    total = 0.0
    for combo in itertools.product(*(space[n]["choices"] for n in cats)):
        level = dict(zip(cats, combo))
        size = 1.0
        for spec in space.values():
            if spec["type"] == "categorical":
                continue
            (parent, active), = (spec.get("when") or {None: None}).items()
            if parent is None or level[parent] in active:
                size *= values(spec)
        total += size
    return total


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
    names = [m for c in config["claims"] for m in ((c["x"], c["y"]) if "x" in c else (c["metric"],))]
    names += list(config["design"]["outcomes"])
    names += list(config["report"]["metrics"])
    return list(dict.fromkeys(names))
