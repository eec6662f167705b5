"""User projects end to end at tiny sizes, each with the installed package: (a) the SVM
example through an entry point, with the workflow used as a Snakemake module whose
Snakefile is a copy of workflow/ alone, as Snakemake's source cache holds a remote module
(snakefile: github(...)), no scripts/ or envs/ beside it; (b) a project that
`multiverse init --template command` writes (a plain torch script through a command)."""
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import ROOT, make_checkout, planned_jobs, snakemake

from multiverse.cli import init

REPORT_SIZES = {"samples": 64, "reference": 16, "bootstrap": 200, "sobol_points": 64}


def run(cmd, cwd, timeout=900):
    res = subprocess.run([sys.executable, "-m", "snakemake", *cmd], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return res


@pytest.mark.slow
def test_the_svm_example_runs_with_a_remote_module_copy_of_workflow_alone(tmp_path):
    """The module's Snakefile is in a folder holding workflow/ only: the rules take the
    library, the step scripts and the env files from the installed package."""
    cache = tmp_path / "source-cache" / "multiverse"
    shutil.copytree(ROOT / "workflow", cache / "workflow", ignore=shutil.ignore_patterns("__pycache__"))
    assert sorted(p.name for p in cache.iterdir()) == ["workflow"]
    project = tmp_path / "svm_breast_cancer"
    shutil.copytree(ROOT / "examples" / "svm_breast_cancer", project,
                    ignore=shutil.ignore_patterns("__pycache__", "results", ".snakemake"))
    snakefile = (project / "Snakefile").read_text()
    assert "workflow_snakefile()" in snakefile  # the example as shipped: the installed workflow
    (project / "Snakefile").write_text(snakefile.replace("workflow_snakefile()", repr(str(cache / "workflow" / "Snakefile"))))
    # a partial overlay (no `study` key): merged into the project's config key by key
    overlay = {"design": {"initial": 8, "rounds": 1, "batch": 8, "candidates": 32, "reference": 16},
               "report": REPORT_SIZES}
    (project / "tiny.yaml").write_text(yaml.safe_dump(overlay))
    res = run(["--cores", "2", "--configfile", "tiny.yaml"], project)
    out = project / "results" / "svm_breast_cancer"
    table = pd.read_csv(out / "multiverse.csv")
    assert len(table) == 16 and (table["status"] == "ok").all()
    assert {"kernel", "C", "gamma", "train_acc", "val_acc", "test_acc", "support_share"} <= set(table.columns)
    assert table.loc[table["kernel"] == "linear", "gamma"].isna().all()
    assert table["test_acc"].between(0, 1).all()
    claims = pd.read_csv(out / "report" / "claims.csv")
    assert len(claims) == 2 and claims["verdict"].notna().all()
    assert (out / "data" / "dataset.pkl").exists() and (out / "report.html").exists()
    # rerunning does nothing: the module's rules find their outputs
    res = run(["--cores", "2", "--configfile", "tiny.yaml", "-n"], project)
    assert "Nothing to be done" in res.stdout + res.stderr


@pytest.mark.slow
def test_a_command_template_project_runs_a_torch_script_per_universe(tmp_path):
    project = tmp_path / "script_study"
    init(project, "command")
    config = yaml.safe_load((project / "config" / "config.yaml").read_text())
    assert config["study"] == "script_study"
    overlay = {"training": {"command": config["training"]["command"].replace("--epochs 30", "--epochs 3")},
               "design": {"initial": 4, "rounds": 1, "batch": 4, "candidates": 32, "reference": 16},
               "report": REPORT_SIZES}
    (project / "tiny.yaml").write_text(yaml.safe_dump(overlay))
    run(["--cores", "2", "--configfile", "tiny.yaml"], project)
    out = project / "results" / "script_study"
    table = pd.read_csv(out / "multiverse.csv")
    assert len(table) == 8 and (table["status"] == "ok").all() and (table["epochs_run"] == 3).all()
    assert table.loc[table["optimizer"] == "adam", "momentum"].isna().all()
    assert table.loc[table["optimizer"] == "sgd", "momentum"].notna().all()
    assert len(pd.read_csv(out / "report" / "claims.csv")) == 2
    log = (out / "logs" / "train" / "r0_s0_seed0.log").read_text()
    assert "r0u000 | epoch 3: train_loss" in log and "--momentum" in log
    assert (out / "universes" / "r0" / "s0" / "u0" / "seed0" / "run" / "metrics.json").exists()


def test_a_study_file_with_other_kinds_of_dimensions_is_not_merged_into_the_default(tmp_path):
    """A whole study in --configfile stands alone: a categorical weight decay where the
    default study's is a float range used to fail the schema ('high', 'log', 'low' were
    unexpected)."""
    cwd = make_checkout(tmp_path)
    study = yaml.safe_load((cwd / "tiny.yaml").read_text())
    study["space"]["weight_decay"] = {"type": "categorical", "choices": [1.0e-5, 1.0e-3]}
    (cwd / "tiny.yaml").write_text(yaml.safe_dump(study))
    res = snakemake(cwd, "-n", "--cores", "1")
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert planned_jobs(res)["train"] == 2  # a shard of 2 universes per round
