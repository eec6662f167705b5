"""The user projects under examples/, run end to end at tiny sizes from a copy laid out
as in the repository: (a) the SVM through an entry point, with the workflow used as a
Snakemake module from the project's own Snakefile; (b) a plain torch script through a
command, with this repository's Snakefile run on the project's folder (-s, --directory)."""
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import ROOT, make_checkout, planned_jobs, snakemake

REPORT_SIZES = {"samples": 64, "reference": 16, "bootstrap": 200, "sobol_points": 64}


def copy_project(tmp_path, name):
    """The workflow's files and one example, in the repository's layout."""
    for d in ("workflow", "scripts", "envs"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    dest = tmp_path / "examples" / name
    shutil.copytree(ROOT / "examples" / name, dest, ignore=shutil.ignore_patterns("__pycache__", "results", ".snakemake"))
    return dest


def run(cmd, cwd, timeout=900):
    res = subprocess.run([sys.executable, "-m", "snakemake", *cmd], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    return res


@pytest.mark.slow
def test_the_svm_example_runs_as_a_module_of_the_users_own_snakefile(tmp_path):
    project = copy_project(tmp_path, "svm_breast_cancer")
    # a partial overlay (no `study` key): merged into the project's config key by key
    overlay = {"design": {"initial": 8, "rounds": 1, "batch": 8, "candidates": 32, "reference": 16},
               "report": REPORT_SIZES}
    (project / "tiny.yaml").write_text(yaml.safe_dump(overlay))
    run(["--cores", "2", "--configfile", "tiny.yaml"], project)
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
def test_the_torch_script_example_runs_from_its_own_folder_with_the_repositorys_snakefile(tmp_path):
    project = copy_project(tmp_path, "torch_script")
    config = yaml.safe_load((project / "config" / "config.yaml").read_text())
    overlay = {"training": {"command": config["training"]["command"].replace("--epochs 30", "--epochs 3")},
               "design": {"initial": 4, "rounds": 1, "batch": 4, "candidates": 32, "reference": 16},
               "report": REPORT_SIZES}
    (project / "tiny.yaml").write_text(yaml.safe_dump(overlay))
    # run from elsewhere: the study's paths resolve against --directory
    run(["-s", str(tmp_path / "workflow" / "Snakefile"), "--directory", str(project), "--cores", "2",
         "--configfile", str(project / "tiny.yaml")], tmp_path)
    out = project / "results" / "torch_script"
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
