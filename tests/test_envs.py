"""Static checks of the pinned environments (conda channels cannot be reached here)."""
import re
import tomllib
from pathlib import Path

import yaml

import multiverse

ROOT = Path(__file__).resolve().parents[1]
#: conda-forge package name -> PyPI name, where they differ
PIP_NAME = {"pytorch": "torch", "pytorch-gpu": "torch", "matplotlib-base": "matplotlib"}
#: conda-only packages, with no counterpart in requirements.txt
CONDA_ONLY = {"python", "cuda-version", "pip"}
#: the package itself, pip-installed in every env at the version of the rules
PACKAGE = "multiverse-analysis"


def pip_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def extra_pins() -> dict[str, str]:
    """The pins of pyproject.toml's extras (the mlflow extra's mlflow-skinny, the tests')."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins: dict[str, str] = {}
    for extra, deps in extras.items():
        for dep in deps:
            name, version = dep.split("==")
            assert pins.setdefault(name.lower(), version) == version, f"extra {extra}: {dep} vs {pins[name.lower()]}"
    return pins


def test_the_extras_pin_exact_versions_that_agree_with_requirements():
    """Every extra's dependency is an exact pin, one version of a package in every extra
    and in requirements.txt; the mlflow extra's is the test extra's too, so CI runs the
    export against the pinned client."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins, runtime = extra_pins(), pip_pins()
    assert all(re.fullmatch(r"\d+(\.\d+)*", v) for v in pins.values()), pins
    assert {k: v for k, v in pins.items() if k in runtime and runtime[k] != v} == {}
    assert set(extras["mlflow"]) <= set(extras["test"])


def test_every_rule_names_a_pinned_env():
    """Every rule that runs a script names an env of the installed package through
    common.smk's env_file() (or torch_env(), which picks one by training.device)."""
    common = (ROOT / "workflow/rules/common.smk").read_text()
    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        for block in re.split(r"^rule ", smk.read_text(), flags=re.M)[1:]:
            name = block.split(":")[0]
            if re.search(r"^\s+run:", block, flags=re.M):
                continue  # Python inside Snakemake's own process (rule submission's marker): no env
            if not re.search(r"^\s+(script|shell):", block, flags=re.M):
                continue  # a target (rule partial_report), as rule all
            if re.search(r"conda:\s*\n(?:\s*#.*\n)?\s*(?:user_env\(config\) or )?torch_env\(\)", block):
                envs = re.findall(r'env_file\("([^"]+)"\)', common.split("def torch_env")[1].split("\ndef ")[0])
                assert sorted(envs) == ["torch-cuda.yaml", "torch.yaml"], envs
            else:
                m = re.search(r'conda:\s*\n(?:\s*#.*\n)?\s*(?:user_env\(config\) or )?env_file\("([^"]+)"\)', block)
                assert m, f"rule {name} has no conda env"
                envs = m.groups()
            for env in envs:
                assert (ROOT / "envs" / env).exists(), f"rule {name}: envs/{env} is missing"


def test_conda_envs_pin_exact_versions_from_conda_forge_that_match_pip():
    """envs/*.yaml, and the examples' own train envs (training.conda): a package pinned by
    requirements.txt or by an extra (envs/export.yaml's mlflow-skinny) at that version."""
    pins = pip_pins() | extra_pins()
    envs = sorted((ROOT / "envs").glob("*.yaml"))
    examples = sorted((ROOT / "examples").glob("*/envs/*.yaml"))
    assert envs and examples
    envs += examples
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        assert spec["channels"] == ["conda-forge", "nodefaults"], env.name
        pip = [dep for dep in spec["dependencies"] if isinstance(dep, dict)]
        assert pip == [{"pip": [f"{PACKAGE} =={multiverse.__version__}"]}], f"{env.name}: {pip}"
        for dep in spec["dependencies"]:
            if isinstance(dep, dict):
                continue
            name, version = (s.strip() for s in dep.split("="))
            assert re.fullmatch(r"\d+(\.\d+)*", version), f"{env.name}: {dep} is not an exact pin"
            if name in CONDA_ONLY:
                continue
            pip = PIP_NAME.get(name, name)
            assert pins.get(pip) == version, f"{env.name}: {name} {version} vs requirements.txt {pins.get(pip)}"


def test_torch_is_pinned_for_pip():
    assert pip_pins()["torch"] == "2.13.0"


def test_cuda_torch_env_is_the_cpu_one_with_a_cuda_build():
    """envs/torch-cuda.yaml (train on a GPU node): envs/torch.yaml's pins, torch's version from
    requirements.txt, plus conda-forge's pytorch-gpu (the cuda* build) and a CUDA 12 pin."""
    def deps(name):
        spec = yaml.safe_load((ROOT / "envs" / name).read_text())
        return dict((s.strip() for s in dep.split("=")) for dep in spec["dependencies"] if isinstance(dep, str))

    cpu, cuda = deps("torch.yaml"), deps("torch-cuda.yaml")
    assert {k: v for k, v in cuda.items() if k not in ("pytorch-gpu", "cuda-version")} == cpu
    assert cuda["pytorch"] == cuda["pytorch-gpu"] == pip_pins()["torch"]
    assert cuda["cuda-version"].split(".")[0] == "12"
