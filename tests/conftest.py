import copy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from multiverse.spec import load_config, with_defaults  # noqa: E402


#: A mixed space with two conditional dimensions, shared by the space and design tests.
MIXED_SPACE = {
    "optimizer": {"type": "categorical", "choices": ["sgd", "momentum", "adam", "rmsprop"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
    "momentum": {"type": "float", "low": 0.5, "high": 0.99, "when": {"optimizer": ["momentum"]}},
    "eps": {"type": "float", "low": 1e-10, "high": 1.0, "log": True, "when": {"optimizer": ["adam", "rmsprop"]}},
}


@pytest.fixture
def one_torch_thread():
    """Torch on one thread while a test forks from pytest's process (a guard's worker, a
    lane, a report worker): earlier tests ran multi-threaded torch in it, GNU OpenMP is
    not fork-safe, and a child forked after an OpenMP parallel region hangs at its first
    one. A train or report job forks before any multi-threaded torch work, so it never
    meets this."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def default_config():
    """The default study's config as written (no defaults filled in)."""
    return load_config(ROOT / "config" / "config.yaml")


@pytest.fixture
def config(default_config):
    """The default study's config as the Snakefile sees it (the schema's defaults
    filled in): a fresh copy, free to edit."""
    return with_defaults(default_config)


def design_config(**design) -> dict:
    """A ``design`` section as the Snakefile sees it: these keys (``outcomes`` among them)
    and the tiny study's strategy (gp-ivr) and rounds, with the schema's defaults for the rest."""
    config = load_config(TINY)
    config["design"] = {**{k: config["design"][k] for k in ("strategy", "initial", "rounds", "batch")}, **design}
    return with_defaults(config)["design"]


@pytest.fixture(scope="session")
def digits():
    from multiverse.data import load_dataset, split_dataset

    return split_dataset(*load_dataset("digits"), {"train": 0.6, "validation": 0.2, "test": 0.2}, seed=0)


# --- running the real workflow ------------------------------------------------------
TINY = ROOT / "tests" / "config" / "tiny.yaml"
#: What a test's copy of the repository holds: the rules, configs and profiles. The step
#: scripts, env files and library come from the installed package (pip install -e .), as
#: for a user's project (multiverse.resources()).
CHECKOUT = ("workflow", "config", "profiles")


def three_universe_shard(tmp_path: Path, digits: dict, config: dict, params: list[dict]):
    """A shard of three small digits universes (``params``) and, for a folder name, the
    keyword arguments of :func:`multiverse.train.train_shard` that write into it."""
    import numpy as np

    np.savez(tmp_path / "data.npz", **digits)
    us = [{"id": f"r0u00{k}", "round": 0, "index": k, "shard": 0, "slot": k, "seed": 3 + k, "params": p}
          for k, p in enumerate(params)]

    def shard_args(folder: str, **extra) -> dict:
        return dict(data_path=str(tmp_path / "data.npz"), universes=us,
                    model={**config["model"], "width": 16, "depth": 1}, training={**config["training"], "epochs": 4},
                    model_paths=[str(tmp_path / folder / f"u{k}" / "model.pt") for k in range(3)],
                    record_paths=[str(tmp_path / folder / f"u{k}" / "train.json") for k in range(3)], **extra)

    return us, shard_args


def user_project(tmp_path: Path, monkeypatch, module: str, files: dict[str, str]):
    """A user's project folder as the working directory: ``files`` (relative paths to
    their text, dedented), with ``module`` (in src/) imported afresh; yields the folder."""
    import sys
    import textwrap

    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    sys.modules.pop(module, None)
    yield tmp_path
    sys.modules.pop(module, None)


def make_checkout(dest: Path, **edits) -> Path:
    """A copy of the workflow's files with the tiny config as ``tiny.yaml``, so a test
    run never touches the repo's results/. ``edits`` update config sections."""
    for d in CHECKOUT:
        shutil.copytree(ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__"))
    write_config(dest, load_config(TINY), **edits)
    return dest


def write_config(cwd: Path, config: dict, **edits) -> dict:
    config = copy.deepcopy(config)
    for section, values in edits.items():
        if isinstance(values, dict):
            config.setdefault(section, {}).update(values)
        else:
            config[section] = values
    (cwd / "tiny.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return config


def snakemake(cwd: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def planned_jobs(res: subprocess.CompletedProcess) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    out, jobs, in_table = res.stdout + res.stderr, {}, False
    for line in out.splitlines():
        parts = line.split()
        if parts[:2] == ["job", "count"]:
            in_table = True
            continue
        if in_table and len(parts) == 2 and parts[1].isdigit() and parts[0] != "total":
            jobs[parts[0]] = int(parts[1])
        elif in_table and parts and parts[0] == "total":
            break
    return jobs


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """The tiny study, run once to the end with 2 cores."""
    cwd = make_checkout(tmp_path_factory.mktemp("tiny"))
    res = snakemake(cwd, "--cores", "2")
    assert res.returncode == 0, res.stderr[-3000:]
    return cwd


def svm_project(dest: Path, files: dict[str, str], overlay: dict) -> Path:
    """The SVM example as shipped (its Snakefile uses the installed package's workflow)
    in ``dest``, with ``files`` added (relative paths to their dedented text) and
    ``overlay`` as ``tiny.yaml``; its folder."""
    import json
    import textwrap

    project = dest / "svm_breast_cancer"
    shutil.copytree(ROOT / "examples" / "svm_breast_cancer", project,
                    ignore=shutil.ignore_patterns("__pycache__", "results", ".snakemake"))
    for rel, text in files.items():
        (project / rel).write_text(textwrap.dedent(text))
    (project / "tiny.yaml").write_text(json.dumps(overlay))
    return project
