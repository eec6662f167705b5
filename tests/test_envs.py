"""Static checks of the pinned environments (conda channels cannot be reached here)."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: conda-forge package name -> PyPI name, where they differ
PIP_NAME = {"pytorch": "torch", "matplotlib-base": "matplotlib"}


def pip_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower()] = version
    return pins


def test_every_rule_names_a_pinned_env():
    for smk in (ROOT / "workflow/rules").glob("*.smk"):
        for block in re.split(r"^rule ", smk.read_text(), flags=re.M)[1:]:
            name = block.split(":")[0]
            m = re.search(r'conda:\s*\n(?:\s*#.*\n)?\s*(?:user_env\(config\) or )?"([^"]+)"', block)
            assert m, f"rule {name} has no conda env"
            assert (smk.parent / m.group(1)).resolve().exists(), f"rule {name}: {m.group(1)} is missing"


def test_conda_envs_pin_exact_versions_from_conda_forge_that_match_pip():
    """envs/*.yaml, and the examples' own train envs (training.conda)."""
    pins = pip_pins()
    envs = sorted((ROOT / "envs").glob("*.yaml"))
    examples = sorted((ROOT / "examples").glob("*/envs/*.yaml"))
    assert envs and examples
    envs += examples
    for env in envs:
        spec = yaml.safe_load(env.read_text())
        assert spec["channels"] == ["conda-forge", "nodefaults"], env.name
        for dep in spec["dependencies"]:
            name, version = (s.strip() for s in dep.split("="))
            assert re.fullmatch(r"\d+(\.\d+)*", version), f"{env.name}: {dep} is not an exact pin"
            if name == "python":
                continue
            pip = PIP_NAME.get(name, name)
            assert pins.get(pip) == version, f"{env.name}: {name} {version} vs requirements.txt {pins.get(pip)}"


def test_torch_is_pinned_for_pip():
    assert pip_pins()["torch"] == "2.13.0"

