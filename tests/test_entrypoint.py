"""A user's own training: entry points and commands, declared metrics, free dimension
names, the checks before any job, and the failures recorded as data at run time."""
import copy
import json
import logging
import math
import sys
import textwrap

import pytest
from conftest import user_project

from multiverse import entrypoint as E
from multiverse.spec import ConfigError, check_config, check_sizes, compose, study_metrics, with_defaults

SPACE = {
    "kernel": {"type": "categorical", "choices": ["rbf", "linear"]},
    "C": {"type": "float", "low": 1e-3, "high": 1e3, "log": True},
    "gamma": {"type": "float", "low": 1e-5, "high": 10.0, "log": True, "when": {"kernel": ["rbf"]}},
}
METRICS = {"val_acc": {"range": [0, 1], "goal": "maximize"}, "loss": {"range": [0, None], "goal": "minimize"}}
DECLARED = {"val_acc": {"range": (0, 1)}, "loss": {"range": (0, None)}}

USER_CODE = '''
import json, math, os, sys

def train(kernel, C, gamma, seed, run_dir, progress):
    """Fails where the test asks it to, by C."""
    if C > 900:
        raise ValueError("C too large for this test")
    if 500 < C <= 900:
        return [C]
    if 100 < C <= 500:
        return {"val_acc": 0.5}
    if 50 < C <= 100:
        return {"val_acc": math.nan, "loss": 1.0}
    if 10 < C <= 50:
        return {"val_acc": 1.5, "loss": 1.0}
    if 5 < C <= 10:  # fails on its first attempt only
        marker = os.path.join(run_dir, "tried")
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("first attempt")
    for epoch in (1, 2):
        progress(epoch=epoch, val_acc=0.1 * epoch)
    return {"val_acc": min(1.0, C / 10), "loss": 1 / C, "extra": "not declared"}

def load(seed):
    return {"seed": seed}

not_callable = 3

def needs(unknown_argument):
    return {}
'''

SCRIPT = '''
import argparse, json, sys
p = argparse.ArgumentParser()
p.add_argument("--C", type=float, required=True)
p.add_argument("--gamma", type=float)
p.add_argument("--name")
p.add_argument("--out", required=True)
a = p.parse_args()
print("epoch 1 of 1", flush=True)
if a.C > 900:
    sys.exit(3)
if a.C > 500:
    sys.exit(0)  # writes nothing
json.dump({"val_acc": 0.9, "loss": 0.1, "gamma_given": a.gamma is not None, "name": a.name,
           "history": [{"epoch": 1, "val_acc": 0.9}]}, open(a.out, "w"))
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's project folder with its own module in src/ and a script, as the working directory."""
    yield from user_project(tmp_path, monkeypatch, "user_code", {"src/user_code.py": USER_CODE, "script.py": SCRIPT})


def user_config(**training) -> dict:
    return copy.deepcopy({
        "study": "mine", "seed": 1,
        "training": {"shard_size": 2, "pythonpath": ["src"], **training},
        "metrics": METRICS, "space": SPACE,
        "design": {"initial": 4, "rounds": 1, "batch": 2, "outcomes": ["val_acc"], "candidates": 16, "reference": 8},
        "claims": [{"name": "rbf", "metric": "val_acc", "dimension": "kernel", "a": ["rbf"], "b": ["linear"],
                    "relation": ">="}],
        "report": {},
    })


def checked(config):
    config = with_defaults(config)
    check_config(config)
    return config


def test_a_user_entry_point_takes_any_dimension_names_and_declares_its_metrics(project):
    config = checked(user_config(entrypoint="user_code:train"))
    assert study_metrics(config) == {
        "val_acc": {"range": (0, 1), "goal": "maximize", "converged_only": False},
        "loss": {"range": (0, None), "goal": "minimize", "converged_only": False},
    }


@pytest.mark.parametrize("edit, key, words", [
    (dict(entrypoint="no_such_module:train"), "training.entrypoint", "ModuleNotFoundError"),
    (dict(entrypoint="user_code:missing"), "training.entrypoint", "AttributeError"),
    (dict(entrypoint="user_code:not_callable"), "training.entrypoint", "not a function"),
    (dict(entrypoint="user_code:needs"), "training.entrypoint", "unknown_argument"),
    (dict(command="{python} script.py --C {C} --lr {lr} --out {out}"), "training.command", "{lr}"),
    (dict(command="{python} script.py --C {C}"), "training.command", "{out}"),
    (dict(command="{python} script.py --C {C} --out {out} --data {data}"), "training.command", "{data}"),
    (dict(entrypoint="user_code:train", command="x {out}"), "training.command", "not both"),
])
def test_a_bad_entry_point_or_command_is_named_before_any_job(project, edit, key, words):
    with pytest.raises(ConfigError) as err:
        checked(user_config(**edit))
    assert err.value.key == key and words in str(err.value), str(err.value)


@pytest.mark.parametrize("edit, key", [
    (lambda c: c["claims"][0].update(metric="f1"), "claims[0].metric"),
    (lambda c: c["design"].update(outcomes=["test_acc"]), "design.outcomes[0]"),
    (lambda c: c.update(metrics={}), "metrics"),
    (lambda c: c["metrics"].update(C={"range": [0, 1]}), "metrics.C"),
    (lambda c: c["metrics"].update(status={}), "metrics.status"),
    (lambda c: c["metrics"].update(f1={"range": [1, 0]}), "metrics.f1.range"),
    (lambda c: c["claims"].append({"name": "best", "type": "expected_best", "metric": "loss", "dimension": "kernel",
                                   "a": ["rbf"], "b": ["linear"], "relation": "<", "min_budget": 1}), "claims[1].metric"),
    (lambda c: c["space"].update(seed={"type": "int", "low": 0, "high": 3}), "space.seed"),
    (lambda c: c["space"].update(layers={"type": "int", "low": 1, "high": 3.5}), "space.layers.high"),
    (lambda c: c["data"].update(dataset="digits", entrypoint="user_code:load") if "data" in c
     else c.update(data={"dataset": "digits", "entrypoint": "user_code:load"}), "data.entrypoint"),
])
def test_undeclared_metrics_and_bad_names_are_named(project, edit, key):
    config = user_config(entrypoint="user_code:train")
    edit(config)
    with pytest.raises(ConfigError) as err:
        checked(config)
    assert err.value.key == key, str(err.value)


def test_the_built_in_trainer_keeps_its_checked_names(config):
    config["space"]["kernel"] = {"type": "categorical", "choices": ["rbf"]}
    with pytest.raises(ConfigError, match="training.entrypoint or training.command") as err:
        check_config(with_defaults(config))
    assert err.value.key == "space.kernel"


def test_sizes_that_would_not_fit_in_memory_are_refused_with_the_estimate(config):
    config = with_defaults(config)
    check_sizes(config)  # the default study fits
    with pytest.raises(ConfigError, match=r"estimated 0\.\d GiB") as err:
        check_sizes(config, memory=2**20)
    assert err.value.key == "design.candidates"
    config["design"]["candidates"] = 8
    config["report"]["samples"] = 10**6
    with pytest.raises(ConfigError, match="GiB") as err:
        check_sizes(config, memory=2**30)
    assert err.value.key == "report.samples"


def test_command_arguments_are_filled_one_by_one_and_inactive_ones_dropped():
    template = "{python} t.py --lr {lr} --name {name} --momentum {momentum} --eps={eps} --out {out}"
    args = E.command_args(template, {"python": "py", "lr": 0.1, "name": "a b; rm -rf ~", "out": "o.json"},
                          inactive=["momentum", "eps"])
    assert args == ["py", "t.py", "--lr", "0.1", "--name", "a b; rm -rf ~", "--out", "o.json"]


@pytest.mark.parametrize("result, words", [
    ([1.0], "expected a mapping"),
    ({"val_acc": 0.5}, "lacks the declared metric(s) ['loss']"),
    ({"val_acc": math.nan, "loss": 1.0}, "expected a finite number"),
    ({"val_acc": 1.5, "loss": 1.0}, "outside its declared range [0, 1]"),
    ({"val_acc": "high", "loss": 1.0}, "expected a number"),
])
def test_results_are_checked_against_their_declarations(result, words):
    with pytest.raises(E.UniverseError, match=words.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        E.checked_metrics(result, DECLARED)
    assert E.checked_metrics({"val_acc": 1, "loss": 2, "other": "x"}, DECLARED) == {"val_acc": 1.0, "loss": 2.0}


def universes(*Cs):
    return [{"id": f"r0u{i:03d}", "round": 0, "index": i, "shard": 0, "slot": i, "seed": 10 + i,
             "params": {"kernel": "rbf", "C": C, "gamma": 0.1}} for i, C in enumerate(Cs)]


def run_shard(tmp_path, training, Cs, retries=1):
    log_path = tmp_path / "train.log"
    handler = logging.FileHandler(log_path)
    log = logging.getLogger("test_entrypoint")
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    paths = [str(tmp_path / "out" / f"u{i}" / "train.json") for i in range(len(Cs))]
    try:
        E.train_user_shard(universes(*Cs), {"pythonpath": ["src"], **training}, DECLARED, paths, log,
                           retries=retries)
    finally:
        log.removeHandler(handler)
    return [json.loads(open(p).read()) for p in paths], log_path.read_text()


def test_an_entry_point_universes_failures_are_recorded_and_the_shard_goes_on(project):
    Cs = (2.0, 1000.0, 600.0, 200.0, 80.0, 20.0, 8.0)
    records, log = run_shard(project, {"entrypoint": "user_code:train"}, Cs)
    ok, raises, not_mapping, lacks, nan, out_of_range, retried = records
    assert ok["status"] == "ok" and ok["metrics"] == {"val_acc": 0.2, "loss": 0.5} and ok["attempts"] == 1
    for rec, words in ((raises, "ValueError: C too large"), (not_mapping, "expected a mapping"),
                       (lacks, "lacks the declared metric"), (nan, "finite number"), (out_of_range, "declared range")):
        assert rec["status"] == "failed" and words in rec["error"], rec["error"]
        assert rec["attempts"] == 2 and rec["id"].startswith("r0u")
        assert all(math.isnan(v) for v in rec["metrics"].values())
        assert f"universe {rec['id']} failed (attempt 2 of 2)" in log
    assert retried["status"] == "ok" and retried["attempts"] == 2
    # every progress call is a line of the log and an entry of the history
    assert [h["epoch"] for h in ok["history"]] == [1, 2] and ok["history"][1]["val_acc"] == 0.2
    assert all("seconds" in h for h in ok["history"])
    assert "r0u000 epoch 2 val_acc=0.2 (" in log


def test_a_commands_failures_are_recorded_and_values_stay_single_arguments(project):
    template = "{python} script.py --C {C} --gamma {gamma} --name {kernel} --out {out}"
    Cs = (2.0, 1000.0, 600.0)
    us = universes(*Cs)
    records, log = run_shard(project, {"command": template}, Cs)
    ok, exits, silent = records
    assert ok["status"] == "ok" and ok["metrics"] == {"val_acc": 0.9, "loss": 0.1}
    assert ok["history"][0]["epoch"] == 1
    assert exits["status"] == "failed" and "exited with status 3" in exits["error"] and "epoch 1 of 1" in exits["error"]
    assert silent["status"] == "failed" and "wrote no metrics JSON" in silent["error"]
    assert "r0u000 | epoch 1 of 1" in log
    # an inactive dimension's argument is left out; a value with spaces is one argument
    u = {**us[0], "params": {"kernel": "a kernel; echo hi", "C": 2.0, "gamma": None}}
    paths = [str(project / "one" / "train.json")]
    E.train_user_shard([u], {"command": template}, DECLARED, paths, logging.getLogger("x"))
    written = json.loads((project / "one" / "run" / "metrics.json").read_text())
    assert written["gamma_given"] is False and written["name"] == "a kernel; echo hi"


def test_a_data_entry_point_runs_once_and_its_output_reaches_training(project):
    out = project / "data" / "dataset.pkl"
    E.prepare_user_data("user_code:load", ["src"], 5, None, str(out))
    assert E.read_prepared(str(out)) == {"seed": 5}


def test_a_study_file_stands_alone_and_an_overlay_is_merged():
    default = {"study": "default", "space": {"lr": {"type": "float", "low": 0.1, "high": 1.0}}, "training": {"epochs": 5}}
    study = {"study": "mine", "space": {"lr": {"type": "categorical", "choices": [0.1, 0.2]}}}
    overlay = {"training": {"device": "cuda"}}
    assert compose([default, study, overlay], {"training": {"threads": 4}}) == {
        "study": "mine", "space": {"lr": {"type": "categorical", "choices": [0.1, 0.2]}},
        "training": {"device": "cuda", "threads": 4}}
    assert compose([default, overlay]) == {**default, "training": {"epochs": 5, "device": "cuda"}}


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks a node without a GPU")
def test_a_user_shard_on_cuda_without_a_gpu_stops_before_any_universe(project):
    from multiverse.runtime import DeviceUnavailable

    with pytest.raises(DeviceUnavailable, match="torch.cuda.is_available"):
        run_shard(project, {"entrypoint": "user_code:train", "device": "cuda"}, (2.0,))
    assert not (project / "out" / "u0" / "train.json").exists()


COUNTED = '''
import os

CALLS = []

def train(C, seed, progress):
    CALLS.append(C)
    if os.path.exists("kill_at") and float(open("kill_at").read()) == C:
        raise KeyboardInterrupt  # as a kill stops the job: no retry, no record
    progress(epoch=1, val_acc=0.5)
    return {"val_acc": 0.5, "loss": C}
'''


def test_a_killed_user_shard_keeps_the_universes_it_finished(project):
    (project / "src" / "counted.py").write_text(textwrap.dedent(COUNTED))
    sys.modules.pop("counted", None)
    (project / "kill_at").write_text("2.0")
    with pytest.raises(KeyboardInterrupt):
        run_shard(project, {"entrypoint": "counted:train"}, (1.0, 2.0, 3.0))
    first = json.loads((project / "out" / "u0" / "train.json").read_text())
    assert (project / "out" / "u0" / "run" / E.KEPT_RECORD).exists()
    (project / "kill_at").unlink()
    calls = sys.modules["counted"].CALLS
    calls.clear()
    records, log = run_shard(project, {"entrypoint": "counted:train"}, (1.0, 2.0, 3.0))
    assert calls == [2.0, 3.0] and "r0u000 kept: finished by an earlier run of this shard" in log
    assert records[0] == first and [r["metrics"]["loss"] for r in records] == [1.0, 2.0, 3.0]
    assert not list(project.glob(f"out/*/run/{E.KEPT_RECORD}")), "a finished shard's records are its outputs alone"
    sys.modules.pop("counted", None)


def test_the_shard_eta_counts_the_epochs_left_at_the_mean_epoch_time(monkeypatch, caplog):
    now = iter([0.0, 2.0, 4.0, 10.0, 11.0])
    monkeypatch.setattr(E.time, "perf_counter", lambda: next(now))
    log = logging.getLogger("eta")
    clock = E.ShardClock([2, 3])
    with caplog.at_level(logging.INFO, logger="eta"):
        first = E.Progress("r0u000", log, clock, 0)  # t = 0
        first(epoch=1, train_loss=1.0, val_acc=0.5)  # t = 2: 1 + 3 epochs left at 2 s
        first(epoch=2, train_loss=0.5, val_acc=0.6)  # t = 4: 3 left at 2 s
        clock.finish(0, 2)
        second = E.Progress("r0u001", log, clock, 1)  # t = 10
        second(epoch=1, train_loss=0.9, val_acc=0.7, seconds=1.0)  # t = 11: 2 left at (2 + 2 + 1) / 3 s
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "r0u000 epoch 1/2 train_loss=1 val_acc=0.5 (2.0s; universe 1/2, shard ETA 8s)",
        "r0u000 epoch 2/2 train_loss=0.5 val_acc=0.6 (4.0s; universe 1/2, shard ETA 6s)",
        "r0u001 epoch 1/3 train_loss=0.9 val_acc=0.7 (1.0s; universe 2/2, shard ETA 3s)",
    ]
    # a user's training: its length is guessed from the finished universes', once there is one
    unknown = E.ShardClock([None, None])
    unknown.epoch(0, 1, 5.0)
    assert unknown.eta() is None
    unknown.finish(0, 4)
    unknown.epoch(1, 1, 3.0)
    assert unknown.eta() == 3 * 4.0 and E.duration(3725) == "1h02m" and E.duration(185) == "3m05s"
