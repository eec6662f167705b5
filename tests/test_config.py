"""Config checks: the JSON schema through snakemake's validate, then the cross-key checks."""
import copy
from pathlib import Path

import pytest
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from multiverse.spec import ConfigError, check_config, config_hash, multiverse_hash, round_sizes, with_defaults
from multiverse.ids import derive_seed

SCHEMA = str(Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml")


def test_default_config_is_valid(config):
    validate(config, SCHEMA)
    check_config(config)
    assert sum(round_sizes(config)) == 48


def test_schema_rejects_unknown_dimension_type(config):
    config["space"]["lr"]["type"] = "floaty"
    with pytest.raises(WorkflowError, match="floaty"):
        validate(config, SCHEMA)


def test_schema_rejects_empty_choices(config):
    config["space"]["optimizer"]["choices"] = []
    with pytest.raises(WorkflowError, match="choices"):
        validate(config, SCHEMA)


def test_schema_rejects_unknown_top_level_key(config):
    config["trainig"] = {}
    with pytest.raises(WorkflowError, match="trainig"):
        validate(config, SCHEMA)


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda c: c["space"]["lr"].update(low=1.0, high=1e-4), "space.lr.low"),
        (lambda c: c["space"]["weight_decay"].update(low=0.0), "space.weight_decay.low"),
        (lambda c: c["data"]["split"].update(train=0.7), "data.split"),
        (lambda c: c["design"].update(batch=6), "design.batch"),
        (lambda c: c["design"].update(outcomes=["test_accuracy"]), "design.outcomes[0]"),
        (lambda c: c["claims"][0].update(dimension="momentum"), "claims[0].dimension"),
        (lambda c: c["claims"][0].update(a=["adamw"]), "claims[0].a"),
        (lambda c: c["claims"][1].update(metric="sharpness"), "claims[1].metric"),
        (lambda c: c["space"]["optimizer"].update(choices=["sgd", "lion"]), "space.optimizer.choices"),
        (lambda c: c["space"].update(momentum={"type": "float", "low": 0.5, "high": 0.99, "when": {"lr": [0.1]}}),
         "space.momentum.when"),
        (lambda c: c["space"].update(momentum={"type": "float", "low": 0.5, "high": 0.99, "when": {"optimizer": ["nesterov"]}}),
         "space.momentum.when.optimizer"),
        (lambda c: c["space"].update(momentum={"type": "float", "low": 0.5, "high": 1.5, "when": {"optimizer": ["momentum"]}}),
         "space.momentum"),
        (lambda c: c["space"]["lr"].update(when={"optimizer": ["adam"]}), "space.lr.when"),
        (lambda c: c["design"].update(replicates=2), "design.replicates"),
        (lambda c: c["design"].update(strategy="grid", grid_levels=2), "design.rounds"),
        (lambda c: c["claims"][2].update(dimension="optimizer"), "claims[2].dimension"),
        (lambda c: c["claims"][2].update(given=["batch_size"]), "claims[2].given[0]"),
        (lambda c: c["claims"][2].update(given=["depth"]), "claims[2].given[0]"),
        (lambda c: c["claims"][2]["scaled"].update(dimension="optimizer"), "claims[2].scaled.dimension"),
        (lambda c: c["claims"][3].update(y="sharpness"), "claims[3].y"),
        (lambda c: c["claims"][3].update(y="train_loss"), "claims[3].y"),
        (lambda c: c["claims"][4].update(b=["adam"]), "claims[4].b"),
        (lambda c: c["claims"][4].update(max_budget=1), "claims[4].max_budget"),
        (lambda c: c["design"].update(strategy="gp-ivr", fidelity={"epochs": 10, "share": 0.3}), "design.fidelity"),
        (lambda c: c["design"].update(fidelity={"share": 0.3}), "design.fidelity"),
        (lambda c: c["design"].update(fidelity={"epochs": 10, "fraction": 0.2, "share": 0.3}), "design.fidelity"),
        (lambda c: c["design"].update(fidelity={"epochs": 60, "share": 0.3}), "design.fidelity.epochs"),
        (lambda c: c["design"].update(fidelity={"epochs": 10, "share": 0.3, "metric": "val_accuracy"}),
         "design.fidelity.metric"),
    ],
)
def test_cross_key_errors_name_the_key(config, edit, key):
    edit(config)
    with pytest.raises(ConfigError) as err:
        check_config(with_defaults(config))
    assert err.value.key == key
    assert f"'{key}'" in str(err.value) and "expected" in str(err.value)


def test_the_schema_fills_in_defaults_of_nested_sections_and_of_each_claim(default_config):
    """The schema is the one place defaults are written: validate fills them in at every
    depth, in the items of ``claims`` and in the branch of a claim's type."""
    momentum = {"type": "float", "low": 0.5, "high": 0.99, "when": {"optimizer": ["momentum"]}}
    raw = {**default_config, "space": {**default_config["space"], "momentum": momentum},
           "metrics": {"sharpness": {"rho": 0.05}}}
    raw["claims"] = [{k: v for k, v in c.items() if k not in ("type", "given", "min_budget")} if i != 3 else c
                     for i, c in enumerate(raw["claims"])]
    raw["claims"][2]["type"], raw["claims"][4]["type"] = "trend", "expected_best"
    config = with_defaults(raw)
    assert "type" not in raw["claims"][0], "the input is not changed"
    assert config["model"]["arch"] == "mlp" and config["training"]["seeds"] == 1
    assert config["design"]["replicates"] == 1 and config["design"]["categorical"] == "onehot"
    assert config["metrics"]["sharpness"] == {"rho": 0.05, "norm": "linf", "steps": 10, "samples": 256}
    assert config["report"]["metrics"] == [] and config["space"]["momentum"]["log"] is False
    assert "log" not in config["space"]["optimizer"]
    assert [c["type"] for c in config["claims"]] == ["comparison", "comparison", "trend", "correlation", "expected_best"]
    assert config["claims"][2]["given"] == [] and config["claims"][4]["min_budget"] == 1
    assert "given" not in config["claims"][0] and "min_budget" not in config["claims"][2]
    assert with_defaults({k: v for k, v in default_config.items() if k != "claims"})["claims"] == []


def test_unknown_dataset_is_named(config):
    config["data"]["dataset"] = "imagenet"
    with pytest.raises(WorkflowError, match="imagenet"):
        with_defaults(config)
    with pytest.raises(ConfigError, match="'data.dataset'"):  # the cross-check, too, names the key
        check_config(config)


def test_schema_declares_strategies_and_conditions(config):
    for strategy in ("gp-ivr", "sobol", "random", "grid"):
        validate({**config, "design": {**config["design"], "strategy": strategy}}, SCHEMA)
    config["space"]["eps"] = {"type": "float", "low": 1e-10, "high": 1.0, "log": True, "when": {"optimizer": ["adam", "rmsprop"]}}
    validate(config, SCHEMA)
    check_config(config)
    config["design"]["strategy"] = "bayes"
    with pytest.raises(WorkflowError, match="bayes"):
        validate(config, SCHEMA)
    config["design"]["strategy"] = "gp-ivr"
    config["space"]["eps"]["when"] = {"optimizer": ["adam"], "lr": [1.0]}
    with pytest.raises(WorkflowError, match="when"):
        validate(config, SCHEMA)


@pytest.mark.parametrize(
    "claim, missing",
    [
        ({"name": "t", "type": "trend", "metric": "gap", "dimension": "batch_size"}, "direction"),
        ({"name": "c", "type": "correlation", "x": "train_loss", "y": "gap"}, "relation"),
        ({"name": "c", "type": "correlation", "x": "train_loss", "y": "gap", "relation": ">"}, "positive"),
        ({"name": "e", "type": "expected_best", "metric": "val_acc", "dimension": "optimizer", "a": ["adam"],
          "relation": ">="}, "b"),
        ({"name": "c", "metric": "gap", "dimension": "optimizer", "a": ["adam"], "b": ["sgd"]}, "relation"),
        ({"name": "c", "type": "sign", "metric": "gap"}, "sign"),
    ],
)
def test_schema_checks_what_each_claim_type_needs(config, claim, missing):
    config["claims"] = [claim]
    with pytest.raises(WorkflowError, match=missing):
        validate(config, SCHEMA)


def test_hash_and_seeds_are_stable(config):
    assert config_hash(config) == config_hash(dict(reversed(list(config.items()))))
    assert derive_seed(1, 2, 3) == derive_seed(1, 2, 3) != derive_seed(1, 3, 2)


def test_parsing_the_workflow_needs_no_heavy_imports():
    """common.smk imports multiverse.spec in snakemake's own environment (no torch there with --sdm conda)."""
    import subprocess
    import sys

    scripts = Path(SCHEMA).parents[2] / "scripts"
    code = (
        f"import sys; sys.path.insert(0, {str(scripts)!r}); import multiverse.spec; "
        "heavy = [m for m in ('numpy', 'torch', 'botorch', 'pandas') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_config_reference_is_generated_from_the_schema():
    """config/README.md is what `python -m multiverse.config_reference` writes, and every
    key of the schema has a description there."""
    import yaml

    from multiverse.config_reference import markdown, rows

    schema = yaml.safe_load(Path(SCHEMA).read_text())
    assert (Path(SCHEMA).parents[2] / "config" / "README.md").read_text() == markdown(schema), (
        "config/README.md is stale: PYTHONPATH=scripts python -m multiverse.config_reference > config/README.md")
    undescribed = [key for key, _, _, meaning in rows(schema) if not meaning]
    assert not undescribed, undescribed


def test_a_budget_derives_the_round_sizes_and_explicit_keys_win(default_config):
    from multiverse.spec import budget_rounds

    assert budget_rounds(48, 4) == {"initial": 16, "rounds": 4, "batch": 8}  # the default study's
    assert budget_rounds(24, 4) == {"initial": 8, "rounds": 4, "batch": 4}
    for budget in range(2, 400):
        for shard in (1, 2, 4, 8):
            sizes = budget_rounds(budget, shard)
            total = sizes["initial"] + sizes["rounds"] * sizes["batch"]
            assert sizes["initial"] % shard == sizes["batch"] % shard == 0 and sizes["initial"] >= 2
            assert budget <= total < budget + max(shard, 2), (budget, shard, sizes)
    raw = copy.deepcopy(default_config)
    raw["design"] = {k: v for k, v in raw["design"].items() if k not in ("initial", "rounds", "batch")}
    derived = with_defaults({**raw, "design": {**raw["design"], "budget": 48}})
    explicit = with_defaults(default_config)
    assert {k: derived["design"][k] for k in ("initial", "rounds", "batch")} == {"initial": 16, "rounds": 4, "batch": 8}
    assert multiverse_hash(derived) == multiverse_hash(explicit)  # the same universes, the same table
    mixed = with_defaults({**raw, "design": {**raw["design"], "budget": 48, "batch": 4}})
    assert (mixed["design"]["batch"], mixed["design"]["rounds"]) == (4, 4)  # the explicit key wins
    with pytest.raises(WorkflowError, match="budget"):
        with_defaults(raw)  # neither a budget nor the three sizes


def test_report_and_shard_size_have_defaults(default_config):
    raw = copy.deepcopy(default_config)
    del raw["report"], raw["training"]["shard_size"]
    config = with_defaults(raw)
    assert config["training"]["shard_size"] == 4 and config["report"]["samples"] == 512
