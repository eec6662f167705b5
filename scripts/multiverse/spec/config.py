"""The study's config: loading and composing it, the checks the schema cannot express,
and its hashes.

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
import importlib.util
import inspect
import json
import os
import shlex
from pathlib import Path
from string import Formatter
from typing import Any, Mapping

import yaml

from multiverse import METRICS, OPTIONAL_METRICS, declaration, resources
from multiverse.errors import ConfigError
from multiverse.spec.claims import check_claim, check_metric, claim_metrics
from multiverse.spec.layout import derive_rounds, shards_per_submission
from multiverse.spec.strategies import STRATEGIES

#: Settings of the built-in trainer's metrics (config key ``metrics``).
BUILTIN_SETTINGS = ("sharpness",)

#: Datasets bundled with an installed package, and those read from ``data.path``.
BUNDLED_DATASETS = ("digits",)
LOCAL_DATASETS = ("mnist", "cifar10", "cifar100")
DATASETS = BUNDLED_DATASETS + LOCAL_DATASETS
#: Space dimensions the trainer reads (:func:`multiverse.train.train_universe`); the
#: first four are required. ``epochs`` or ``steps`` makes the budget a choice.
TRAINING_DIMENSIONS = ("optimizer", "lr", "weight_decay", "batch_size", "momentum", "eps", "lr_scaling",
                       "warmup_epochs", "epochs", "steps", "width", "depth", "dropout")
#: Optimizers the built-in trainer knows (:func:`multiverse.train.make_optimizer`).
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "rmsprop")
#: Levels of an ``lr_scaling`` dimension (:data:`multiverse.nets.LR_SCALING`).
LR_SCALING_RULES = ("none", "linear", "sqrt")
#: The experiment trackers a study can be exported to (config key ``report.trackers``,
#: :mod:`multiverse.trackers`): the module each needs and how to install it (an extra).
TRACKERS = {"mlflow": {"module": "mlflow", "install": 'pip install "multiverse-analysis[mlflow]"'}}
#: The config's JSON schema, the one place its defaults are written.
SCHEMA = resources() / "workflow" / "schemas" / "config.schema.yaml"


def load_config(path: str | Path) -> dict:
    """Load a YAML config as plain data (safe loader: no Python objects)."""
    with open(path) as fh:
        return yaml.safe_load(fh)


def compose(layers, cli: Mapping[str, Any] | None = None) -> dict:
    """The study's config from its config files in order, then the command line's
    ``--config`` values: a file holding a whole study (a ``study`` key) stands alone and
    replaces everything before it; a file without one (an overlay, such as
    ``config/studies/cluster/*.yaml``) is merged key by key into it, as are the ``cli``
    values (snakemake's ``update_config``)."""
    from snakemake.utils import update_config  # snakemake's own: spec needs only PyYAML when imported

    out: dict = {}
    for layer in layers:
        if "study" in layer:
            out = copy.deepcopy(dict(layer))
        else:
            update_config(out, copy.deepcopy(dict(layer)))
    if cli:
        update_config(out, copy.deepcopy(dict(cli)))
    return out


def with_defaults(config: Mapping[str, Any]) -> dict:
    """A copy of ``config`` validated against :data:`SCHEMA` with its defaults filled in,
    as the Snakefile sees it (snakemake's ``validate``; its ``WorkflowError`` names what
    the schema rejects)."""
    from snakemake.utils import validate  # snakemake's own: spec needs only PyYAML when imported

    config = copy.deepcopy(dict(config))
    validate(config, str(SCHEMA))
    derive_rounds(config)
    return config


def config_hash(config: Mapping[str, Any]) -> str:
    """Short sha256 of the config's canonical JSON form."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def multiverse_hash(config: Mapping[str, Any]) -> str:
    """Hash of what defines the universes and their results: everything but the claims,
    the report settings, the parallelism (threads, per_device) and the scheduling (retries, time
    limits, checkpoints, resources, the cluster's node), so that editing a claim or moving to a
    cluster does not change the provenance of the table. Under a strategy that reads the
    claims (``gp-claims``: :mod:`multiverse.spec.strategies`) the claims and
    ``explore_share`` choose the universes, so they count; under any other strategy
    ``explore_share`` is not read and does not. ``design.budget``
    does not count: the round sizes it derives (:func:`derive_rounds`) do."""
    skip = {"claims", "report", "resources", "cluster"}
    core = {k: v for k, v in config.items() if k not in skip}
    for section in ("training", "design"):
        if section in core:
            core[section] = {k: v for k, v in core[section].items() if k not in (
                "threads", "per_device", "retries", "timeout", "checkpoint_every", "gpus", "budget")}
    if "design" in core:
        if STRATEGIES[core["design"]["strategy"]].reads_claims:
            core["claims"] = config.get("claims", [])
        else:
            core["design"] = {k: v for k, v in core["design"].items() if k != "explore_share"}
        if core["design"].get("sampling", "greedy") == "greedy":  # greedy rounds read neither
            core["design"] = {k: v for k, v in core["design"].items() if k not in ("sampling", "uniform_share")}
    return config_hash(core)


#: The two forms of a user's training entry point (config keys under ``training``).
USER_TRAINERS = ("entrypoint", "command")
#: What a training entry point may take, besides its dimensions by name
#: (:func:`multiverse.entrypoint.train_user_shard`).
ENTRYPOINT_ARGS = ("params", "seed", "device", "run_dir", "data", "progress", "stop_after")
#: Placeholders of a ``training.command`` besides the dimensions.
COMMAND_FIELDS = ("seed", "out", "run_dir", "device", "data", "python", "stop_after")
#: Columns of the multiverse table (and record fields) that no dimension or metric may be named.
RESERVED_NAMES = ("id", "round", "index", "shard", "slot", "replicate", "replicate_of", "seed", "strategy",
                  "universe", "status", "error", "diverged_epoch", "epochs_run", "config_hash", "params",
                  "metrics", "history", "attempts", "versions", "out", "run_dir", "device", "data",
                  "progress", "python")


def trainer(config: Mapping[str, Any]) -> str:
    """How the study's universes are trained: ``builtin`` (:mod:`multiverse.train`), or
    a user's ``entrypoint`` (a Python function) or ``command`` (one process per universe)."""
    training = config["training"]
    return next((k for k in USER_TRAINERS if training.get(k)), "builtin")


def data_step(config: Mapping[str, Any]) -> str | None:
    """What ``prepare_data`` runs: the built-in ``dataset``, a user's data ``entrypoint``,
    or nothing (None: the user's training loads its own data)."""
    data = config.get("data") or {}
    return "dataset" if data.get("dataset") else "entrypoint" if data.get("entrypoint") else None


def data_file(config: Mapping[str, Any]) -> str | None:
    """The prepared data's file under the study's results (None without a data step)."""
    step = data_step(config)
    return None if step is None else "data/dataset.npz" if step == "dataset" else "data/dataset.pkl"


def check_config(config: Mapping[str, Any], conda: bool = False) -> None:
    """Cross-key checks of a validated config (defaults filled in: :func:`with_defaults`);
    raises :class:`ConfigError` naming the first bad key. ``conda``: the jobs run in the
    rules' conda envs (``--sdm conda``), not in this environment (:func:`check_trackers`)."""
    check_data(config)
    check_space(config["space"])
    metrics = study_metrics(config)
    if trainer(config) == "builtin":
        check_builtin(config)
    else:
        check_user_trainer(config, metrics)
    check_design(config, metrics)
    for i, claim in enumerate(config["claims"]):
        check_claim(claim, f"claims[{i}]", config["space"], metrics)
    names = [c["name"] for c in config["claims"]]
    if len(set(names)) != len(names):
        raise ConfigError("claims", "distinct claim names", names)
    check_sizes(config)
    shards_per_submission(config)
    check_trackers(config, conda)


def check_trackers(config: Mapping[str, Any], conda: bool = False) -> None:
    """Each tracker of ``report.trackers`` has its library where its export job will run:
    in this environment (found by name, not imported), unless the jobs run in the rules'
    conda envs (``conda``), whose export env installs it."""
    if conda:
        return
    for i, name in enumerate(config["report"]["trackers"]):
        tracker = TRACKERS[name]
        if importlib.util.find_spec(tracker["module"]) is None:
            raise ConfigError(f"report.trackers[{i}]", f"a tracker whose library is installed where snakemake runs "
                              f"(no module '{tracker['module']}': {tracker['install']}), or report.trackers without "
                              f"it", name)


def check_data(config: Mapping[str, Any]) -> None:
    data = config.get("data") or {}
    if data.get("dataset") and data.get("entrypoint"):
        raise ConfigError("data.entrypoint", "either data.dataset (built-in) or data.entrypoint (yours), not both",
                          data["entrypoint"])
    if data.get("entrypoint"):
        check_entrypoint("data.entrypoint", data["entrypoint"], config["training"].get("pythonpath", []), ("seed", "path"))
        return
    if not data.get("dataset"):
        if trainer(config) == "builtin":
            raise ConfigError("data.dataset", f"a dataset for the built-in trainer, one of {list(DATASETS)}")
        return
    if data["dataset"] not in DATASETS:
        raise ConfigError("data.dataset", f"one of {list(DATASETS)}", data["dataset"])
    if data["dataset"] in LOCAL_DATASETS:
        path = data.get("path")
        if not path:
            raise ConfigError("data.path", f"a local folder holding the {data['dataset']} files")
        if not Path(path).exists():
            raise ConfigError("data.path", "an existing local path", path)
    split = data.get("split")
    if split is None:
        raise ConfigError("data.split", "the train, validation and test shares of data.dataset")
    total = split["train"] + split["validation"] + split["test"]
    if abs(total - 1.0) > 1e-9:
        raise ConfigError("data.split", "train + validation + test == 1", total)


def check_space(space: Mapping[str, Mapping[str, Any]]) -> None:
    """What every space needs, whoever trains it: ordered bounds (integers for an int
    dimension, > 0 on a log scale), distinct choices, and conditions on a categorical
    parent that is not itself conditional."""
    for name, spec in space.items():
        key = f"space.{name}"
        if name in RESERVED_NAMES or name.startswith("version_"):
            raise ConfigError(key, f"a dimension name other than the table's own columns {list(RESERVED_NAMES)}", name)
        if spec["type"] == "categorical":
            if len(set(map(str, spec["choices"]))) != len(spec["choices"]):
                raise ConfigError(f"{key}.choices", "distinct choices", spec["choices"])
            continue
        if spec["type"] == "int":
            for bound in ("low", "high"):
                if float(spec[bound]) != int(spec[bound]):
                    raise ConfigError(f"{key}.{bound}", "an integer bound for an int dimension", spec[bound])
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


def check_builtin(config: Mapping[str, Any]) -> None:
    """The built-in trainer's own needs: its dimension names and their kinds, a model,
    an epoch budget, and no metric declarations of its own (it declares its metrics)."""
    if not config.get("model"):
        raise ConfigError("model", "the built-in trainer's network (arch, width, depth)")
    if config["training"].get("epochs") is None:
        raise ConfigError("training.epochs", "an epoch budget for the built-in trainer")
    for name in config.get("metrics") or {}:
        if name not in BUILTIN_SETTINGS:
            raise ConfigError(f"metrics.{name}", f"settings of the built-in trainer's metrics among {list(BUILTIN_SETTINGS)}"
                              " (declaring metrics is for a training.entrypoint or training.command)", name)
    space = config["space"]
    for name, spec in space.items():
        if name not in TRAINING_DIMENSIONS:
            raise ConfigError(f"space.{name}", f"a dimension the built-in trainer uses, among {list(TRAINING_DIMENSIONS)}"
                              " (any name goes with a training.entrypoint or training.command)", name)
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
    if "dropout" in space and not (space["dropout"]["type"] == "float" and 0 <= space["dropout"]["low"] and space["dropout"]["high"] < 1):
        raise ConfigError("space.dropout", "a float dimension within [0, 1)", space["dropout"])
    if "lr_scaling" in space:
        spec = space["lr_scaling"]
        if spec["type"] != "categorical" or not set(spec["choices"]) <= set(LR_SCALING_RULES):
            raise ConfigError("space.lr_scaling", f"a categorical dimension with choices among {list(LR_SCALING_RULES)}",
                              spec.get("choices", spec["type"]))
    if "warmup_epochs" in space and (space["warmup_epochs"]["type"] == "categorical" or space["warmup_epochs"]["low"] < 0):
        raise ConfigError("space.warmup_epochs", "a numeric dimension with low >= 0", space["warmup_epochs"])
    for name in ("epochs", "steps", "width"):
        if name in space and (space[name]["type"] != "int" or space[name]["low"] < 1):
            raise ConfigError(f"space.{name}", "an int dimension with low >= 1", space[name])
    if "depth" in space and (space["depth"]["type"] != "int" or space["depth"]["low"] < 0):
        raise ConfigError("space.depth", "an int dimension with low >= 0", space["depth"])
    if "epochs" in space and "steps" in space:
        raise ConfigError("space.steps", "either an epochs or a steps budget dimension, not both", "steps")
    if space["batch_size"]["type"] != "int":
        raise ConfigError("space.batch_size.type", "'int'", space["batch_size"]["type"])
    if space["batch_size"]["low"] < 1:
        raise ConfigError("space.batch_size.low", "a batch size >= 1", space["batch_size"]["low"])


def check_user_trainer(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> None:
    """A user's training: one form, an entry point that imports and takes what it is
    given, or a command whose placeholders exist; and declared metrics."""
    training, space = config["training"], config["space"]
    forms = [k for k in USER_TRAINERS if training.get(k)]
    if len(forms) > 1:
        raise ConfigError("training.command", "either training.entrypoint or training.command, not both", training["command"])
    if not metrics:
        raise ConfigError("metrics", "the metrics your training returns, e.g. {val_acc: {range: [0, 1], goal: maximize}}")
    for name, decl in metrics.items():
        if name in RESERVED_NAMES or name.startswith("version_") or name in space:
            raise ConfigError(f"metrics.{name}", "a metric name other than a dimension or the table's own columns", name)
        low, high = decl["range"]
        if low is not None and high is not None and low >= high:
            raise ConfigError(f"metrics.{name}.range", "[low, high] with low < high (null: unbounded)", [low, high])
    if forms == ["entrypoint"]:
        check_entrypoint("training.entrypoint", training["entrypoint"], training.get("pythonpath", []),
                         ENTRYPOINT_ARGS + tuple(space))
        return
    try:
        tokens = shlex.split(training["command"])
    except ValueError as err:
        raise ConfigError("training.command", f"a command line ({err})", training["command"]) from None
    fields = []
    for tok in tokens:
        try:
            fields += [f for _, f, _, _ in Formatter().parse(tok) if f is not None]
        except ValueError as err:
            raise ConfigError("training.command", f"a template of {{placeholders}} ({err})", tok) from None
    known = list(space) + list(COMMAND_FIELDS)
    for f in fields:
        if f not in known:
            raise ConfigError("training.command", f"placeholders among the dimensions and {list(COMMAND_FIELDS)}",
                              "{" + f + "}")
    if "out" not in fields:
        raise ConfigError("training.command", "a template with {out}, the metrics JSON file the command writes",
                          training["command"])
    if "data" in fields and data_step(config) is None:
        raise ConfigError("training.command", "{data} only with a data step (data.dataset or data.entrypoint)", "{data}")


def check_entrypoint(key: str, spec: str, pythonpath, accepted) -> None:
    """``spec`` ("module:function") imports from ``pythonpath`` and is callable, and
    every argument it needs without a default is one it is given (``accepted``)."""
    from multiverse.entrypoint import load  # only a user's entry point is loaded; entrypoint imports the training stack

    try:
        fn = load(spec, pythonpath)
    except Exception as err:  # any import error is the user's, and is named
        raise ConfigError(key, f"an importable module:function on training.pythonpath {list(pythonpath)} "
                          f"({type(err).__name__}: {err})", spec) from None
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    for p in sig.parameters.values():
        needed = p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        if needed and p.name not in accepted:
            raise ConfigError(key, f"a function whose arguments without default are among {list(accepted)}", p.name)


def check_design(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> None:
    space, design = config["space"], config["design"]
    shard = config["training"]["shard_size"]
    for key, n in (("design.initial", design["initial"]), ("design.batch", design["batch"])):
        if n % shard:
            raise ConfigError(key, f"a multiple of training.shard_size ({shard})", n)
    if config["training"].get("per_device", 1) > shard:
        raise ConfigError("training.per_device", f"at most training.shard_size ({shard}): a train job trains at most "
                          "its shard's universes at once", config["training"]["per_device"])
    for i, name in enumerate(design["outcomes"]):
        check_metric(name, f"design.outcomes[{i}]", metrics)
    for i, name in enumerate(config["report"]["metrics"]):
        check_metric(name, f"report.metrics[{i}]", metrics)
    seeds = config["training"]["seeds"]
    if design["replicates"] > seeds:
        raise ConfigError("design.replicates", f"at most training.seeds ({seeds})", design["replicates"])
    if design.get("sampling") == "randomised" and design["replicates"] > 1:
        raise ConfigError("design.sampling", "greedy when design.replicates > 1 (a randomised round draws new "
                          "universes only)", "randomised")
    strategy = STRATEGIES[design["strategy"]]
    size = strategy.size(space, design)
    total = design["initial"] + design["rounds"] * design["batch"]
    for key, n in (("design.initial", design["initial"]), ("design.batch", design["batch"])):
        if n > size:
            raise ConfigError(key, f"at most the {size} distinct universes of the space", n)
    if total > size:
        raise ConfigError("design.rounds", f"a budget (initial + rounds * batch) of at most {size} {strategy.size_what}",
                          total)
    combos = level_combinations(space)
    if design["candidates"] * combos < design["batch"]:
        raise ConfigError("design.candidates", f"at least batch / {combos} level combinations", design["candidates"])
    if design.get("fidelity"):
        check_fidelity(config, metrics)


def check_fidelity(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> None:
    """``design.fidelity`` (:mod:`multiverse.fidelity`): every round a uniform draw (a GP
    round would read full-fidelity outcomes that only the continued universes have), a
    user's training that takes ``stop_after`` (the low-fidelity contract,
    :func:`multiverse.entrypoint.train_user_universe`), one low fidelity, and no metric
    named as a low-fidelity column is."""
    design, fidelity = config["design"], config["design"]["fidelity"]
    if not STRATEGIES[design["strategy"]].uniform:
        uniform = [name for name, s in STRATEGIES.items() if s.uniform]
        raise ConfigError("design.fidelity", f"design.strategy among {uniform} (every universe drawn uniformly, so "
                          "that each continued one stands for the others)", design["strategy"])
    training = config["training"]
    if training.get("command") and "{stop_after}" not in training["command"]:
        raise ConfigError("training.command", "a template with {stop_after} under design.fidelity (the low "
                          "fidelity's epochs, left out with its flag at full fidelity)", training["command"])
    if training.get("entrypoint"):
        from multiverse.entrypoint import load  # as check_entrypoint: it imported already

        fn = load(training["entrypoint"], training.get("pythonpath", []))
        try:
            names = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            names = {}
        if names and "stop_after" not in names and not any(p.kind is p.VAR_KEYWORD for p in names.values()):
            raise ConfigError("training.entrypoint", "a function taking stop_after under design.fidelity (the "
                              "low fidelity's epochs; None: resume from run_dir and train to the end)",
                              training["entrypoint"])
    given = [k for k in ("epochs", "fraction") if k in fidelity]
    if len(given) != 1:
        raise ConfigError("design.fidelity", "exactly one of epochs (the low fidelity's epochs) and fraction (of "
                          "each universe's epochs)", given or None)
    if "fraction" in fidelity and training.get("epochs") is None and "epochs" not in config["space"]:
        raise ConfigError("training.epochs", "the universes' epochs (or an epochs dimension), of which "
                          "design.fidelity.fraction is a fraction")
    if "epochs" in fidelity and config["training"].get("epochs") is not None \
            and fidelity["epochs"] >= config["training"]["epochs"]:
        raise ConfigError("design.fidelity.epochs", f"fewer than training.epochs ({config['training']['epochs']})",
                          fidelity["epochs"])
    if fidelity.get("metric"):
        check_metric(fidelity["metric"], "design.fidelity.metric", metrics)
    for name in metrics:
        if name.startswith("low_"):
            raise ConfigError(f"metrics.{name}", "a metric name not starting with low_ (a multi-fidelity table's "
                              "low-fidelity columns do)", name)


def level_combinations(space: Mapping[str, Mapping[str, Any]]) -> int:
    combos = 1
    for spec in space.values():
        combos *= len(spec["choices"]) if spec["type"] == "categorical" else 1
    return combos


def check_sizes(config: Mapping[str, Any], memory: int | None = None) -> None:
    """Refuse design and report settings whose largest arrays would not fit in
    ``memory`` bytes (None: this machine's), naming the key and the estimated size.

    The estimates are of the float64 arrays a step holds at once: the design's joint
    posterior covariance of reference points and candidates, per outcome and its working
    copy (:func:`multiverse.design_gp.greedy_ivr`); the report's joint posterior over the
    reference points of every level combination and its samples, for a claim's two
    compared variants (:mod:`multiverse.claims`)."""
    memory = physical_memory() if memory is None else memory
    design, rep = config["design"], config["report"]
    combos = level_combinations(config["space"])
    points = (design["reference"] + design["candidates"]) * combos
    reference = rep["reference"] * combos
    estimates = {
        "design.candidates": 8 * 2 * points**2 * len(design["outcomes"]),
        "report.samples": 8 * 2 * (reference**2 + rep["samples"] * reference),
    }
    for key, size in estimates.items():
        if size > memory:
            raise ConfigError(key, f"settings whose arrays fit in this machine's {memory / 2**30:.1f} GiB of memory "
                              f"(estimated {size / 2**30:.1f} GiB)", config[key.split(".")[0]][key.split(".")[1]])


def physical_memory() -> int:
    """Bytes of memory of this machine (64 GiB where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 64 * 2**30


def study_metrics(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The metrics of this study's universes, each with its ``range``, ``goal`` and
    ``converged_only`` (:func:`multiverse.declaration`). The built-in trainer's are
    :data:`multiverse.METRICS` plus those of :data:`multiverse.OPTIONAL_METRICS` whose
    config key is set; a user's training declares its own under ``metrics``."""
    if trainer(config) != "builtin":
        return {name: declaration(name, config["metrics"]) for name in config.get("metrics") or {}}
    optional = [m for m, key in OPTIONAL_METRICS.items()
                if (config.get(key.split(".")[0]) or {}).get(key.split(".")[1]) is not None]
    return {m: declaration(m) for m in list(METRICS) + optional}


def report_metrics(config: Mapping[str, Any]) -> list[str]:
    """Metrics the report shows: those the claims name, then the design's outcomes."""
    names = claim_metrics(config["claims"])
    names += list(config["design"]["outcomes"])
    names += list(config["report"]["metrics"])
    return list(dict.fromkeys(names))
