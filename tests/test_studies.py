"""The case-study presets (config/studies/) and what they added: CIFAR loading, the OOD
split, the small CNN and ResNet-18, lr scaling, warmup and step budgets, and sharpness."""
import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ROOT, TINY, make_checkout, snakemake, write_config
from snakemake.utils import update_config

from multiverse.spec import ConfigError, check_config, load_config, round_sizes, with_defaults
from multiverse.data import IMAGE_SHAPES, load_dataset, ood_split, write_cifar
from multiverse.metrics import universe_metrics
from multiverse.sharpness import adaptive_sharpness
from multiverse.train import make_model, scaled_lr, train_universe

STUDIES = ROOT / "config" / "studies"
PRESETS = sorted(p.stem for p in STUDIES.glob("*.yaml"))


def checked(config: dict) -> dict:
    """``config`` as the Snakefile sees it: schema defaults filled in, then cross-checked."""
    config = with_defaults(config)
    check_config(config)
    return config


def write_cifar10(folder: Path, per_file: int = 20, seed: int = 0) -> Path:
    """A small CIFAR-10 folder in the real format: 5 training batches and a test batch."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = np.arange(per_file) % 10
        # class-dependent brightness, so that a network can learn something
        data = np.clip(rng.normal(20 * labels[:, None], 30, (per_file, 3072)), 0, 255)
        write_cifar(folder / name, data, labels)
    return folder


def test_the_four_case_studies_exist():
    assert PRESETS == ["adaptive_optimizers", "id_vs_ood", "large_batch", "sharpness"]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_is_valid_and_self_contained(name, default_config):
    """`--configfile` merges a preset into config/config.yaml key by key: nothing of the
    default study may leak in (no extra dimension, claim or setting)."""
    preset = load_config(STUDIES / f"{name}.yaml")
    assert preset["study"] == name
    merged = copy.deepcopy(default_config)
    update_config(merged, preset)
    assert merged == preset
    config = checked(preset)
    assert config["claims"] and config["data"]["dataset"] == "digits"
    assert sum(round_sizes(config)) >= 48


@pytest.mark.parametrize("name", PRESETS)
def test_cluster_overlay_names_full_scale_settings(name, tmp_path):
    preset = load_config(STUDIES / f"{name}.yaml")
    overlay = load_config(STUDIES / "cluster" / f"{name}.yaml")
    config = copy.deepcopy(preset)
    update_config(config, overlay)
    with pytest.raises(ConfigError, match="data.path"):  # the placeholder path says what to set
        checked(config)
    config["data"]["path"] = str(write_cifar10(tmp_path / "cifar-10-batches-py"))
    config = checked(config)
    assert config["data"]["dataset"] == "cifar10" and config["model"]["arch"] == "resnet18"
    assert config["training"]["device"] == "cuda" and sum(round_sizes(config)) == 320
    preset = checked(preset)
    assert config["space"] == preset["space"] and config["claims"] == preset["claims"]


def test_cifar_folders_load_in_their_own_format(tmp_path):
    X, y = load_dataset("cifar10", write_cifar10(tmp_path / "c10", per_file=12))
    assert X.shape == (72, 3072) and X.dtype == np.float32 and 0 <= X.min() and X.max() <= 1
    assert list(np.bincount(y)) == [12, 12, 6, 6, 6, 6, 6, 6, 6, 6]
    c100 = tmp_path / "c100"
    c100.mkdir()
    for split, n in (("train", 30), ("test", 10)):
        write_cifar(c100 / split, np.full((n, 3072), 255), np.arange(n) % 100, label_key=b"fine_labels")
    X, y = load_dataset("cifar100", c100)
    assert X.shape == (40, 3072) and np.all(X == 1.0) and y.max() == 29
    with pytest.raises(FileNotFoundError, match="data.path"):
        load_dataset("cifar10", c100)


def test_ood_split_is_the_named_deterministic_shift():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (5, 64)).astype(np.float32)
    images = X.reshape(5, 1, 8, 8)
    rot = ood_split(X, (1, 8, 8), "rotate", 90, seed=0).reshape(5, 1, 8, 8)
    assert np.allclose(rot, np.rot90(images, k=1, axes=(2, 3)), atol=1e-5)
    shifted = ood_split(X, (1, 8, 8), "shift", 2, seed=0).reshape(5, 1, 8, 8)
    assert np.allclose(shifted[..., 2:, 2:], images[..., :-2, :-2]) and np.all(shifted[..., :2, :] == 0)
    a, b = (ood_split(X, (1, 8, 8), "noise", 0.2, seed=s) for s in (1, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, ood_split(X, (1, 8, 8), "noise", 0.2, seed=2))
    assert 0 <= a.min() and a.max() <= 1 and 0.1 < np.abs(a - X).mean() < 0.2


def test_cnn_is_deterministic_and_resnet18_is_the_standard_network(digits):
    data = {**digits, "shape": np.asarray(IMAGE_SHAPES["digits"])}
    u = {"optimizer": "adam", "lr": 3e-3, "weight_decay": 1e-5, "batch_size": 64}
    kw = {"seed": 4, "epochs": 10, "width": 8, "depth": 2, "arch": "cnn"}
    (s1, r1), (s2, _) = train_universe(data, u, **kw), train_universe(data, u, **kw)
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    m = universe_metrics(data, s1, r1, width=8, depth=2, arch="cnn")
    assert m["test_acc"] > 0.6  # ten epochs of a small CNN on 8x8 digits
    resnet = make_model(3072, 10, 64, 0, "resnet18", (3, 32, 32))
    assert sum(p.numel() for p in resnet.parameters()) == 11_173_962  # CIFAR ResNet-18
    assert resnet(torch.zeros(2, 3072)).shape == (2, 10)
    with pytest.raises(ValueError, match="image"):
        make_model(64, 10, 8, 2, "cnn", None)


def test_lr_scaling_warmup_and_a_step_budget(digits):
    assert scaled_lr(0.1, 512, "linear", 128) == pytest.approx(0.4)
    assert scaled_lr(0.1, 512, "sqrt", 128) == pytest.approx(0.2)
    assert scaled_lr(0.1, 512, "none", 128) == scaled_lr(0.1, 512, None) == 0.1
    u = {"optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0, "batch_size": 64, "lr_scaling": "linear"}
    per_epoch = math.ceil(len(digits["y_train"]) / 64)
    _, r = train_universe(digits, {**u, "steps": 5, "warmup_epochs": 1}, seed=0, epochs=9, width=8, depth=1)
    assert r["steps_run"] == 5 and r["epochs_run"] == 1 and r["lr_effective"] == pytest.approx(0.025)
    # torch's LinearLR: from lr / warmup steps, up by (1 - 1 / warmup) / warmup per step
    assert r["lr_final"] == pytest.approx(0.025 * (1 / per_epoch + (1 - 1 / per_epoch) * 5 / per_epoch))
    _, r = train_universe(digits, {**u, "epochs": 2, "warmup_epochs": 1}, seed=0, epochs=9, width=8, depth=1)
    assert r["steps_run"] == 2 * per_epoch and r["epochs_run"] == 2 and r["lr_final"] == pytest.approx(0.025)


def test_adaptive_sharpness_is_invariant_to_relu_rescaling(digits):
    torch.manual_seed(0)
    X, y = torch.as_tensor(digits["X_train"][:256]), torch.as_tensor(digits["y_train"][:256])
    net = make_model(64, 10, 32, 1)
    before = [p.detach().clone() for p in net.parameters()]
    s = adaptive_sharpness(net, X, y, rho=0.05, norm="linf", steps=10)
    assert s > 0 and all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    assert adaptive_sharpness(net, X, y, 0.2, "linf", 10) > s > adaptive_sharpness(net, X, y, 0.01, "linf", 10)
    rescaled = copy.deepcopy(net)
    with torch.no_grad():  # the same function: hidden layer x 10, output weights / 10
        rescaled[0].weight.mul_(10), rescaled[0].bias.mul_(10), rescaled[2].weight.div_(10)
    assert torch.allclose(net(X), rescaled(X), atol=1e-4)
    assert adaptive_sharpness(rescaled, X, y, rho=0.05, norm="linf", steps=10) == pytest.approx(s, rel=1e-3)
    assert adaptive_sharpness(net, X, y, rho=0.05, norm="l2", steps=10) > 0


@pytest.mark.parametrize("edit, key", [
    ({"space": {"label_smoothing": {"type": "float", "low": 0.0, "high": 0.5}}}, "space.label_smoothing"),
    ({"space": {"lr_scaling": {"type": "categorical", "choices": ["none", "cubic"]}}}, "space.lr_scaling"),
    ({"space": {"epochs": {"type": "int", "low": 1, "high": 9}, "steps": {"type": "int", "low": 1, "high": 9}}},
     "space.steps"),
    ({"design": {"outcomes": ["ood_acc"]}}, "design.outcomes[0]"),
    ({"claims": [{"name": "c", "type": "correlation", "x": "sharpness", "y": "gap", "relation": "positive"}]},
     "claims[0].x"),
])
def test_bad_study_keys_are_named(config, edit, key):
    for section, value in edit.items():
        if isinstance(value, dict) and section != "claims":
            config[section].update(value)
        else:
            config[section] = value
    with pytest.raises(ConfigError) as err:
        checked(config)
    assert err.value.key == key
    if key in ("design.outcomes[0]", "claims[0].x"):
        assert "needs config key" in str(err.value)


@pytest.mark.slow
def test_a_tiny_cifar_study_with_every_new_part_runs_end_to_end(tmp_path):
    """The real workflow on CIFAR-format files the test writes: ResNet-18, the OOD split,
    sharpness, lr scaling, warmup and a step budget, and correlation claims on them."""
    cifar = write_cifar10(tmp_path / "cifar-10-batches-py", per_file=16)
    space = {
        "optimizer": {"type": "categorical", "choices": ["sgd", "adam"]},
        "lr": {"type": "float", "low": 1e-3, "high": 0.1, "log": True},
        "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-3, "log": True},
        "batch_size": {"type": "int", "low": 8, "high": 64, "log": True},
        "lr_scaling": {"type": "categorical", "choices": ["none", "sqrt"]},
        "warmup_epochs": {"type": "int", "low": 0, "high": 1},
        "steps": {"type": "int", "low": 2, "high": 6},
        "eps": {"type": "float", "low": 1e-8, "high": 1.0, "log": True, "when": {"optimizer": ["adam"]}},
    }
    claims = [
        {"name": "id_ood", "type": "correlation", "x": "test_acc", "y": "ood_acc", "relation": "positive"},
        {"name": "sharp_gap", "type": "correlation", "x": "sharpness", "y": "gap", "relation": "positive"},
        # a trend over a conditional dimension (its map uses the universes where eps is active)
        {"name": "eps_trend", "type": "trend", "metric": "test_acc", "dimension": "eps", "direction": "increasing",
         "given": ["optimizer"]},
    ]
    cwd = make_checkout(tmp_path / "run")
    config = load_config(TINY)
    config.update(space=space, claims=claims, metrics={"sharpness": {"rho": 0.01, "steps": 2, "samples": 16}})
    write_config(cwd, config, data={"dataset": "cifar10", "path": str(cifar), "ood": {"transform": "noise", "amount": 0.1}},
                 model={"arch": "resnet18", "width": 4, "depth": 0}, design={"outcomes": ["test_acc", "ood_acc"]})
    res = snakemake(cwd, "--cores", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    df = pd.read_parquet(cwd / "results/tiny/multiverse.parquet")
    assert len(df) == 4 and df["ood_acc"].between(0, 1).all() and (df["sharpness"].dropna() >= 0).all()
    assert set(df.columns) >= {"lr_scaling", "warmup_epochs", "steps", "ood_loss"}
    record = json.loads(next((cwd / "results/tiny/universes").rglob("train.json")).read_text())
    assert record["steps_run"] == record["params"]["steps"]
    report = json.loads((cwd / "results/tiny/report/claims.json").read_text())
    assert [c["name"] for c in report["claims"]] == ["id_ood", "sharp_gap", "eps_trend"]
    for name in ("sharp_gap", "eps_trend"):
        for suffix in ("", "_where"):
            assert (cwd / f"results/tiny/report/claim_{name}{suffix}.png").stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(p.stem for p in (STUDIES / "cluster").glob("*.yaml")))
def test_every_submission_of_a_cluster_overlay_fits_its_declared_node(name):
    """Snakemake's own group-job resource computation (benchmarks/submissions.py: the
    remote executor's GroupResources.basic_layered) on each overlay's DAG: every group job
    fits the node the overlay declares, and holds as many shards as fit it."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from submissions import overlay_requests

    from multiverse.spec import n_shards, shards_per_submission

    config, groups = overlay_requests(name)
    node, k = config["cluster"], shards_per_submission(config)
    assert k > 1, "a node holds several shards of the full-scale settings"
    for g in groups:
        assert g["gpu"] <= node["gpus_per_node"], g
        assert g["_cores"] <= node["cpus_per_node"], g
        assert g["mem_mb"] <= node["mem_mb_per_node"], g
    shards = sum(n_shards(config, r) for r in range(len(round_sizes(config))))
    assert len(groups) == sum(-(-n_shards(config, r) // k) for r in range(len(round_sizes(config))))
    assert sum((g["jobs"] - 1) // 2 for g in groups) == shards, "each shard's train and metrics jobs, once"
    assert max(g["gpu"] for g in groups) == k * (1 if config["training"]["device"] == "cuda" else 0)


@pytest.mark.parametrize("edit, key", [
    ({"training": {"threads": 64}}, "training.threads"),
    ({"training": {"mem_mb": 300000}}, "training.mem_mb"),
    ({"training": {"gpus": 8}}, "training.gpus"),
])
def test_a_job_larger_than_the_declared_node_is_named(edit, key):
    from multiverse.spec import compose

    config = compose([load_config(STUDIES / "large_batch.yaml"), load_config(STUDIES / "cluster" / "large_batch.yaml")])
    config["data"]["path"] = str(ROOT)
    for section, value in edit.items():
        config[section].update(value)
    with pytest.raises(ConfigError) as err:
        checked(config)
    assert err.value.key == key and "one job must fit one node" in str(err.value)


def test_shards_per_submission_follow_the_node():
    from multiverse.spec import shards_per_submission

    base = {"training": {"device": "cuda", "gpus": None, "threads": 4, "mem_mb": 16000}}
    assert shards_per_submission(base) == 1, "no node declared: one shard per submission"
    node = {"gpus_per_node": 4, "cpus_per_node": 32, "mem_mb_per_node": 256000}
    assert shards_per_submission({**base, "cluster": node}) == 4  # GPUs bound it
    assert shards_per_submission({**base, "cluster": {**node, "gpus_per_node": 8, "cpus_per_node": 20}}) == 5  # cores
    cpu = {"training": {"device": "cpu", "gpus": None, "threads": 2, "mem_mb": 50000}, "cluster": {**node, "gpus_per_node": 0}}
    assert shards_per_submission(cpu) == 5  # memory bounds a CPU study


@pytest.mark.parametrize("name", ["digits", "cifar10"])
def test_prepared_data_is_float32_and_equals_scaling_before_splitting(name, tmp_path):
    """prepare_data splits the stored pixels and scales each split (no float64 copy of the
    whole dataset): the same arrays as scaling first, stored as float32."""
    from multiverse.data import prepare_data, read_data, split_dataset

    source = write_cifar10(tmp_path / "c10", per_file=12) if name == "cifar10" else None
    split = {"train": 0.6, "validation": 0.2, "test": 0.2}
    got = read_data(prepare_data(name, split, 3, tmp_path / "d.npz", source) and tmp_path / "d.npz")
    want = split_dataset(*load_dataset(name, source), split, 3)
    for k, v in want.items():
        assert got[k].dtype == (np.float32 if k.startswith("X_") else np.int64), k
        assert np.array_equal(got[k], v), k
