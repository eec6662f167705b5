"""The package: what the wheel holds, `multiverse init` and its templates, and (slow) the
whole path a new user takes: pip install of the built wheel into a fresh venv, then
`multiverse init demo && cd demo && snakemake --cores 2`, with no edit."""
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

import multiverse
from multiverse.cli import TEMPLATES, init, main
from multiverse.spec import check_config, with_defaults


def test_the_installed_workflow_is_found():
    snakefile = Path(multiverse.workflow_snakefile())
    assert snakefile.is_file() and snakefile.parent.name == "workflow"
    for folder, name in (("scripts", "train.py"), ("envs", "torch.yaml"), ("workflow", "schemas/config.schema.yaml")):
        assert (multiverse.resources() / folder / name).is_file()


@pytest.mark.parametrize("template", TEMPLATES)
def test_init_writes_a_project_whose_config_is_valid_as_written(tmp_path, monkeypatch, template):
    project = tmp_path / f"study-{template}"
    written = init(project, template)
    names = {p.relative_to(project).as_posix() for p in written}
    assert {"Snakefile", ".gitignore", "config/config.yaml"} <= names
    assert ("src/train.py" in names) == (template != "builtin")
    assert "workflow_snakefile()" in (project / "Snakefile").read_text()
    raw = yaml.safe_load((project / "config" / "config.yaml").read_text())
    assert raw["study"] == f"study_{template}"
    assert "report" not in raw and "shard_size" not in raw.get("training", {})  # defaults: only what a user decides
    assert set(raw["design"]) == {"budget"}
    monkeypatch.chdir(project)  # entry points resolve against the project's folder
    config = with_defaults(raw)
    check_config(config)
    design = config["design"]
    assert design["initial"] + design["rounds"] * design["batch"] == design["budget"]


def test_init_refuses_a_folder_that_holds_something(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(SystemExit) as err:
        main(["init", str(tmp_path)])
    assert err.value.code == 2 and "not empty" in capsys.readouterr().err
    assert (tmp_path / "mine.txt").read_text() == "keep me" and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(SystemExit):
        main(["init", str(tmp_path / "new"), "--template", "notebook"])
    assert not (tmp_path / "new").exists()


def build_wheel(dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", str(ROOT),
                    "-w", str(dest)], check=True, capture_output=True)
    (wheel,) = dest.glob("multiverse_analysis-*.whl")
    return wheel


def test_the_wheel_holds_the_workflow_envs_step_scripts_and_templates(tmp_path):
    wheel = build_wheel(tmp_path)
    assert wheel.name == f"multiverse_analysis-{multiverse.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = [f"multiverse/workflow/{p.relative_to(ROOT / 'workflow').as_posix()}"
               for p in (ROOT / "workflow").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    shipped += [f"multiverse/envs/{p.name}" for p in (ROOT / "envs").glob("*.yaml")]
    shipped += [f"multiverse/scripts/{p.name}" for p in (ROOT / "scripts").glob("*.py")]
    shipped += [f"multiverse/templates/{t}/config.yaml" for t in TEMPLATES]
    shipped += [f"multiverse/{p.relative_to(ROOT / 'scripts' / 'multiverse').as_posix()}"
                for p in (ROOT / "scripts" / "multiverse").rglob("*.py") if "__pycache__" not in p.parts]
    assert not set(shipped) - names, sorted(set(shipped) - names)
    entry_points = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/entry_points.txt").decode()
    assert "multiverse = multiverse.cli:main" in entry_points


@pytest.mark.slow
def test_a_new_user_installs_the_wheel_in_a_fresh_venv_and_runs_init_demo(tmp_path):
    """From a fresh venv: pip install <wheel>, then multiverse init demo && cd demo &&
    snakemake --cores 2 gives a report, with nothing from this checkout on the path."""
    wheel = build_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], capture_output=True, text=True,
                         timeout=1800)
    assert pip.returncode == 0, pip.stderr[-3000:]
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    user = tmp_path / "home"
    user.mkdir()
    shell = f"cd {user} && multiverse init demo && cd demo && snakemake --cores 2"
    res = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    out = user / "demo" / "results" / "demo"
    assert (out / "report.html").stat().st_size > 10_000
    claims = (out / "report" / "claims.csv").read_text().splitlines()
    assert len(claims) == 3  # a header and the template's two claims
    # the rules ran the installed package's step scripts, not this checkout's
    site = next((venv / "lib").glob("python3.*/site-packages"))
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import multiverse; print(multiverse.resources())"],
                           capture_output=True, text=True, env=env, cwd=user, check=True).stdout.strip()
    assert Path(where) == site / "multiverse"
