"""The export to MLflow (report.trackers: [mlflow], multiverse.trackers): runs built from a
study's files, written to a real MLflow file store and read back with MLflow's own client;
the config check before any job; the rule in the DAG only when named; (slow) the tiny
study exported after its report."""
import json
import logging
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_checkout, planned_jobs, snakemake, write_config
from multiverse.aggregate import multiverse_table, write_table
from multiverse.claims.contract import ClaimResult, Reading
from multiverse.errors import ConfigError
from multiverse.failures import failed_record
from multiverse.metrics import recorded_metrics_shard
from multiverse.report import to_jsonable
from multiverse.runtime import read_json, write_json
from multiverse.spec import check_config, load_config, with_defaults
from multiverse.trackers import claims_run, export_mlflow, universe_runs

SPACE = ["optimizer", "lr", "momentum"]
METRICS = ["val_acc", "val_loss"]
OUT = Path("results/tiny")


def universe(k: int, params: dict, replicate: int = 0) -> dict:
    return {"id": f"r0u00{k}", "round": 0, "index": k, "shard": 0, "slot": k, "replicate": replicate,
            "seed": 100 + 10 * k + replicate, "replicate_of": None, "params": params}


def epochs(*val_acc: float) -> list[dict]:
    return [{"epoch": e, "val_acc": a, "val_loss": 1 - a, "seconds": 0.5 * e} for e, a in enumerate(val_acc, 1)]


@pytest.fixture
def study(tmp_path) -> dict:
    """A study folder as the workflow leaves it, written by the project's own writers: four
    train records (a user's training: ok under two seeds, diverged, failed for lack of
    memory), their metrics records (rule metrics), the table (rule aggregate) and
    claims.json (rule report)."""
    out = tmp_path / "results" / "study"
    sgd = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9}
    adam = {"optimizer": "adam", "lr": 0.001, "momentum": None}
    trained = [
        (universe(0, sgd), {"status": "ok", "metrics": {"val_acc": 0.8, "val_loss": 0.2}, "history": epochs(.5, .7, .8),
                            "epochs_run": 3, "train_seconds": 1.5}),
        (universe(0, sgd, replicate=1), {"status": "ok", "metrics": {"val_acc": 0.75, "val_loss": 0.25},
                                         "history": epochs(.4, .6, .75), "epochs_run": 3, "train_seconds": 1.5}),
        (universe(1, adam), {"status": "diverged", "diverged_epoch": 2, "metrics": {"val_acc": 0.1, "val_loss": math.nan},
                             "history": epochs(.3) + [{"epoch": 2, "val_acc": 0.1, "val_loss": math.nan, "seconds": 1.0}],
                             "epochs_run": 2, "train_seconds": 1.0}),
        (universe(2, {**adam, "lr": 0.5}), {**failed_record(MemoryError("CUDA out of memory"), "out of memory"),
                                            "metrics": {m: math.nan for m in METRICS}}),
    ]
    records = []
    for u, outcome in trained:
        folder = out / f"universes/r0/s0/u{u['slot']}/seed{u['replicate']}"
        write_json(folder / "train.json", {**u, **outcome, "versions": {"numpy": "2.4.6"}})
        recorded_metrics_shard([str(folder / "train.json")], [str(folder / "metrics.json")], logging.getLogger("test"))
        records.append(str(folder / "train.json"))
    rows = [{**read_json(Path(p).with_name("metrics.json")), "strategy": "sobol"} for p in records]
    write_table(multiverse_table(rows, SPACE, {"config_hash": "c0ffee"}, metrics=METRICS),
                str(out / "multiverse.parquet"), str(out / "multiverse.csv"))
    claim = ClaimResult(
        name="sgd_vs_adam", type="comparison", statement="SGD's val_acc > Adam's",
        claim={"name": "sgd_vs_adam", "metric": "val_acc", "dimension": "optimizer", "a": ["sgd"], "b": ["adam"],
               "relation": ">"},
        readings=[Reading(
            label="marginal",
            gp={"effect": 0.4, "effect_lo": 0.1, "effect_hi": 0.7, "p_holds": 0.97, "verdict": "holds"},
            observed={"effect": math.nan, "effect_lo": math.nan, "effect_hi": math.nan, "p_holds": math.nan,
                      "verdict": "too few universes"},
            design={"effect": 0.5, "effect_lo": 0.2, "effect_hi": 0.8, "p_holds": 0.99, "verdict": "holds", "n": 3},
            summary="holds (design-based: +0.50 [+0.20, +0.80], P(holds) 0.99)", verdict="holds", rests_on="design")],
    )
    write_json(out / "report" / "claims.json", to_jsonable({"claims": [claim.to_dict()], "n_universes": 3, "n_runs": 4}))
    return {"out": out, "records": records}


def mlflow_client(uri: str, monkeypatch):
    """MLflow's own client of the file store ``uri``, as a person reads an export: with
    ``MLFLOW_ALLOW_FILE_STORE=true`` (MLflow 3 refuses a file store without it). The test
    extra installs MLflow; skipped only without it."""
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def export(study: dict, store: Path) -> dict:
    out = study["out"]
    return export_mlflow(str(out / "multiverse.parquet"), str(out / "report" / "claims.json"), study["records"],
                         SPACE, METRICS, experiment="study", tracking_uri=store.resolve().as_uri())


def test_a_universes_run_holds_its_choices_history_final_metrics_and_outcome(study):
    """Built from the files alone (no tracker): params, each history field per epoch, the
    table's metrics at the last epoch, and the outcome as status and tags."""
    table = pd.read_parquet(study["out"] / "multiverse.parquet")
    runs = {r.key: r for r in universe_runs(table, [read_json(p) for p in study["records"]], SPACE, METRICS)}
    assert list(runs) == ["r0u000/seed0", "r0u000/seed1", "r0u001/seed0", "r0u002/seed0"]
    ok, diverged, failed = runs["r0u000/seed1"], runs["r0u001/seed0"], runs["r0u002/seed0"]
    assert ok.params == {"optimizer": "sgd", "lr": "0.1", "momentum": "0.9", "round": "0", "index": "0", "shard": "0",
                         "slot": "0", "seed": "101", "replicate": "1", "universe": "r0u000", "strategy": "sobol"}
    assert "momentum" not in diverged.params  # a conditional dimension Adam does not use
    history = [(k, s) for k, _, s in ok.metrics if k.startswith("epoch/")]
    assert sorted(history) == sorted((f"epoch/{k}", e) for e in (1, 2, 3) for k in ("val_acc", "val_loss", "seconds"))
    assert [(k, v, s) for k, v, s in ok.metrics if not k.startswith("epoch/")] == [("val_acc", 0.75, 3),
                                                                                    ("val_loss", 0.25, 3)]
    assert (ok.status, ok.tags["status"], ok.tags["config_hash"]) == ("FINISHED", "ok", "c0ffee")
    assert "failure" not in ok.tags and "error" not in ok.tags
    # a diverged universe is a result (FINISHED); its NaN loss is not logged, the table keeps it
    assert (diverged.status, diverged.tags["status"], diverged.tags["diverged_epoch"]) == ("FINISHED", "diverged", "2")
    assert ("val_loss", 2) not in [(k, s) for k, _, s in diverged.metrics]
    assert ("epoch/val_loss", 2) not in [(k, s) for k, _, s in diverged.metrics]
    assert (failed.status, failed.tags["status"], failed.tags["failure"]) == ("FAILED", "failed", "out of memory")
    assert "CUDA out of memory" in failed.tags["error"] and failed.metrics == []


def test_the_claims_run_holds_each_verdict_and_the_estimate_it_rests_on(study):
    run = claims_run(read_json(study["out"] / "report" / "claims.json"))
    assert (run.key, run.name, run.status) == ("claims", "claims", "FINISHED")
    assert run.tags["sgd_vs_adam.verdict"] == "holds" and run.tags["sgd_vs_adam.rests_on"] == "design"
    metrics = {k: v for k, v, _ in run.metrics}
    # the verdict rests on the design-based answer: its estimate at the top, each answer by its name
    assert [metrics[f"sgd_vs_adam.{f}"] for f in ("effect", "effect_lo", "effect_hi", "p_holds")] == [.5, .2, .8, .99]
    assert metrics["sgd_vs_adam.gp.effect"] == 0.4 and metrics["sgd_vs_adam.design.p_holds"] == 0.99
    assert not any(k.startswith("sgd_vs_adam.observed") for k in metrics)  # too few universes: no numbers
    assert metrics["n_universes"] == 3 and metrics["n_runs"] == 4


def test_an_export_reads_back_with_mlflows_client_and_exporting_again_duplicates_nothing(study, tmp_path,
                                                                                           monkeypatch):
    ViewType = pytest.importorskip("mlflow.entities").ViewType  # the test extra installs MLflow

    store = tmp_path / "mlruns"
    client = mlflow_client(store.resolve().as_uri(), monkeypatch)
    first = export(study, store)
    assert first["replaced"] == 0 and first["statuses"] == {"diverged": 1, "failed": 1, "ok": 2}
    experiment = client.get_experiment_by_name("study")
    assert experiment.experiment_id == first["experiment_id"]
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"r0u000/seed0", "r0u000/seed1", "r0u001/seed0", "r0u002/seed0", "claims"}
    assert {k: runs[k].info.run_id for k in runs} == first["runs"]
    ok = runs["r0u000/seed0"]
    assert ok.info.status == "FINISHED" and ok.data.tags["multiverse.run"] == "r0u000/seed0"
    assert ok.data.params["optimizer"] == "sgd" and ok.data.params["momentum"] == "0.9"
    assert ok.data.params["seed"] == "100" and ok.data.params["strategy"] == "sobol"
    history = client.get_metric_history(ok.info.run_id, "epoch/val_acc")
    assert [(m.step, m.value) for m in history] == [(1, 0.5), (2, 0.7), (3, 0.8)]
    assert [(m.step, m.value) for m in client.get_metric_history(ok.info.run_id, "val_acc")] == [(3, 0.8)]
    assert len(client.get_metric_history(runs["r0u001/seed0"].info.run_id, "epoch/val_acc")) == 2
    failed = runs["r0u002/seed0"]
    assert failed.info.status == "FAILED" and failed.data.tags["failure"] == "out of memory"
    assert failed.data.tags["status"] == "failed" and "MemoryError" in failed.data.tags["error"]
    assert runs["r0u001/seed0"].info.status == "FINISHED" and runs["r0u001/seed0"].data.tags["status"] == "diverged"
    claims = runs["claims"]
    assert claims.data.tags["sgd_vs_adam.verdict"] == "holds"
    assert claims.data.metrics["sgd_vs_adam.effect_lo"] == 0.2 and claims.data.metrics["sgd_vs_adam.effect_hi"] == 0.8
    # a run of the experiment that no export wrote stays; the export's own are replaced
    mine = client.create_run(experiment.experiment_id, run_name="by hand").info.run_id
    second = export(study, store)
    assert second["replaced"] == 5 and second["experiment_id"] == first["experiment_id"]
    active = client.search_runs([experiment.experiment_id])
    assert sorted(r.info.run_name for r in active) == sorted([*runs, "by hand"])
    assert {r.info.run_id for r in active} == {*second["runs"].values(), mine}
    assert len(client.search_runs([experiment.experiment_id], run_view_type=ViewType.DELETED_ONLY)) == 5


def test_a_named_tracker_whose_library_is_missing_is_refused_naming_the_key(config, monkeypatch):
    import importlib.util

    config["report"]["trackers"] = ["mlflow"]
    found = {"mlflow": importlib.util.find_spec("json")}  # a module spec where mlflow is installed
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: found[name] if name in found else real(name, *a))
    check_config(config)
    found["mlflow"] = None
    with pytest.raises(ConfigError, match=r"report\.trackers\[0\].*pip install \"multiverse-analysis\[mlflow\]\"") \
            as err:
        check_config(config)
    assert err.value.key == "report.trackers[0]"
    check_config(config, conda=True)  # the jobs' conda envs install it (envs/export.yaml)
    config["report"]["trackers"] = []
    check_config(config)


def test_the_schema_knows_mlflow_alone_and_defaults_to_no_tracker(default_config):
    from snakemake.exceptions import WorkflowError

    assert with_defaults(default_config)["report"]["trackers"] == []
    with pytest.raises(WorkflowError, match="trackers"):
        with_defaults({**default_config, "report": {"trackers": ["wandb"]}})


def test_the_export_rule_is_in_the_dag_only_when_report_trackers_names_mlflow(tmp_path):
    pytest.importorskip("mlflow")  # the config check needs it where snakemake runs
    cwd = make_checkout(tmp_path)
    off = snakemake(cwd, "-n", "--cores", "2")
    assert off.returncode == 0, off.stderr[-2000:]
    assert "export_mlflow" not in planned_jobs(off) and planned_jobs(off)["report"] == 1
    write_config(cwd, load_config(cwd / "tiny.yaml"), report={"trackers": ["mlflow"]})
    on = snakemake(cwd, "-n", "--cores", "2")
    assert on.returncode == 0, on.stderr[-2000:]
    assert planned_jobs(on) == {**planned_jobs(off), "export_mlflow": 1}
    # without mlflow where snakemake runs: refused when the workflow is parsed, before any job
    hidden = "import sys; sys.modules['mlflow'] = None; from snakemake.cli import main; main()"
    res = subprocess.run([sys.executable, "-c", hidden, "--configfile", "tiny.yaml", "-n", "--cores", "2"], cwd=cwd,
                         capture_output=True, text=True, timeout=300, check=False)
    said = res.stdout + res.stderr
    assert res.returncode != 0 and "Job stats" not in said
    assert "config key 'report.trackers[0]'" in said and 'pip install "multiverse-analysis[mlflow]"' in said


@pytest.mark.slow
def test_the_tiny_study_exports_after_its_report_and_reexports_the_same_runs(tiny_run, tmp_path, monkeypatch):
    """Turning the tracker on for a finished study runs the export alone; every universe's
    run holds its epochs; a forced rerun writes the store afresh, with no duplicate."""
    ViewType = pytest.importorskip("mlflow.entities").ViewType  # the test extra installs MLflow

    cwd = tmp_path / "run"
    shutil.copytree(tiny_run, cwd, symlinks=True)
    write_config(cwd, load_config(cwd / "tiny.yaml"), report={"trackers": ["mlflow"]})
    dry = snakemake(cwd, "-n", "--cores", "2")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert planned_jobs(dry) == {"export_mlflow": 1, "all": 1}
    for extra in ((), ("--forcerun", "export_mlflow")):
        res = snakemake(cwd, "--cores", "2", *extra)
        assert res.returncode == 0, res.stderr[-3000:]
        summary = json.loads((cwd / OUT / "mlflow.json").read_text())
        client = mlflow_client((cwd / OUT / "mlflow").resolve().as_uri(), monkeypatch)
        experiment = client.get_experiment_by_name("tiny")
        runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL)}
        assert set(runs) == {"r0u000/seed0", "r0u001/seed0", "r1u000/seed0", "r1u001/seed0", "claims"}
        assert {k: r.info.run_id for k, r in runs.items()} == summary["runs"] and summary["replaced"] == 0
        table = pd.read_parquet(cwd / OUT / "multiverse.parquet")
        for row in table.itertuples():
            run = runs[f"{row.id}/seed{row.replicate}"]
            assert run.data.params["optimizer"] == row.optimizer and run.data.tags["status"] == row.status
            assert len(client.get_metric_history(run.info.run_id, "epoch/val_acc")) == row.epochs_run
            assert run.data.metrics["test_acc"] == pytest.approx(row.test_acc)
        verdicts = {c["name"]: c["verdict"] for c in json.loads((cwd / OUT / "report/claims.json").read_text())["claims"]}
        assert {k: runs["claims"].data.tags[f"{k}.verdict"] for k in verdicts} == verdicts
