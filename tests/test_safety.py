"""Bad configs fail before any job runs; safe loading; outputs stay under results/."""
import ast
import gzip
from pathlib import Path

import numpy as np
import pytest
from conftest import CHECKOUT, ROOT, load_config, make_checkout, snakemake, write_config

from multiverse.spec import ConfigError, check_config, with_defaults
from multiverse.data import load_dataset, write_idx

SOURCES = sorted((ROOT / "scripts").rglob("*.py")) + sorted((ROOT / "workflow").rglob("*.smk"))


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"space": {"lr": {"type": "logfloat", "low": 1e-4, "high": 1.0}}}, "logfloat"),
        ({"space": {"lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}}}, "config key 'space.lr.low'"),
        ({"data": {"dataset": "mnist", "path": "no/such/folder"}}, "config key 'data.path'"),
        ({"claims": [{"name": "x", "metric": "test_acc", "dimension": "optimizer", "a": ["adam"],
                      "b": ["lion"], "relation": ">"}]}, "config key 'claims[0].b'"),
    ],
    ids=["unknown-type", "log-bound", "missing-data-path", "unknown-level"],
)
def test_bad_config_stops_snakemake_before_any_job(tmp_path, edit, message):
    cwd = make_checkout(tmp_path)
    config = load_config(cwd / "tiny.yaml")
    if "space" in edit:
        edit = {"space": {**config["space"], **edit["space"]}}
    write_config(cwd, config, **edit)
    res = snakemake(cwd, "--cores", "1")
    assert res.returncode != 0
    assert message in res.stderr
    assert not (cwd / "results").exists(), "no job ran"


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda c: c["space"]["batch_size"].update(low=0, log=False), "space.batch_size.low"),
        # 1 x 2 x 2 x 2 = 8 distinct universes, a batch of 12
        (lambda c: (c.update(space={"optimizer": {"type": "categorical", "choices": ["sgd"]},
                                    "lr": {"type": "int", "low": 1, "high": 2},
                                    "weight_decay": {"type": "int", "low": 1, "high": 2},
                                    "batch_size": {"type": "int", "low": 16, "high": 17}}),
                    c["design"].update(initial=4, batch=12), c["training"].update(shard_size=4)), "design.batch"),
        (lambda c: c["data"].update(dataset="mnist"), "data.path"),
        (lambda c: c["report"].update(metrics=["sharpness"]), "report.metrics[0]"),
        (lambda c: c["claims"][0].update(b=["adam"]), "claims[0].b"),
    ],
    ids=["batch-size-0", "batch-larger-than-space", "no-data-path", "unknown-report-metric", "overlapping-groups"],
)
def test_more_cross_key_errors(config, edit, key):
    edit(config)
    with pytest.raises(ConfigError) as err:
        check_config(with_defaults(config))
    assert err.value.key == key


def test_config_is_loaded_as_safe_yaml(tmp_path):
    cwd = make_checkout(tmp_path)
    text = (cwd / "tiny.yaml").read_text().replace("study: tiny", "study: !!python/object/apply:os.system ['touch pwned']")
    (cwd / "tiny.yaml").write_text(text)
    res = snakemake(cwd, "-n", "--cores", "1")
    assert res.returncode != 0 and not (cwd / "pwned").exists()
    with pytest.raises(Exception, match="python/object"):
        load_config(cwd / "tiny.yaml")
    assert not (cwd / "pwned").exists()


def _calls(path: Path):
    tree = ast.parse(path.read_text()) if path.suffix == ".py" else None
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)] if tree else []


def test_no_eval_or_exec_anywhere():
    import re

    for path in SOURCES:
        # the builtins, not methods such as torch's model.eval()
        assert not re.search(r"(?<![.\w])(eval|exec)\(", path.read_text()), path
        for call in _calls(path):
            assert getattr(call.func, "id", None) not in ("eval", "exec"), path


def test_checkpoints_load_with_weights_only():
    loads = []
    for path in SOURCES:
        for call in _calls(path):
            if getattr(call.func, "attr", None) == "load" and getattr(call.func.value, "id", None) == "torch":
                loads.append(path)
                kw = {k.arg: k.value for k in call.keywords}
                assert isinstance(kw.get("weights_only"), ast.Constant) and kw["weights_only"].value is True, path
    assert loads, "the metrics step loads checkpoints"


def test_study_name_cannot_leave_results(config):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    config["study"] = "../../etc"
    with pytest.raises(WorkflowError, match="study"):
        validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))


@pytest.mark.slow
def test_every_output_stays_under_results(tiny_run):
    """After a full run (and its report), nothing was written outside results/ and Snakemake's own folder."""
    allowed = {"results", ".snakemake", "snakemake_report.html", "tiny.yaml", *CHECKOUT}
    assert {p.name for p in tiny_run.iterdir()} <= allowed
    for d in CHECKOUT:
        made = {p.relative_to(tiny_run / d) for p in (tiny_run / d).rglob("*") if "__pycache__" not in p.parts}
        shipped = {p.relative_to(ROOT / d) for p in (ROOT / d).rglob("*") if "__pycache__" not in p.parts}
        assert made <= shipped, made - shipped


def test_mnist_loads_from_a_local_folder_in_idx_format(tmp_path):
    rng = np.random.default_rng(0)
    for split, n in (("train", 30), ("t10k", 10)):
        write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(tmp_path / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    X, y = load_dataset("mnist", tmp_path)
    assert X.shape == (40, 784) and X.dtype == np.float32 and 0 <= X.min() and X.max() <= 1
    assert list(y[:12]) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    with gzip.open(tmp_path / "train-images-idx3-ubyte.gz") as fh:
        assert fh.read(4) == bytes([0, 0, 8, 3])


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_outputs_follow_the_umask_not_mkstemps_0600(tmp_path, mask, mode):
    import os

    from multiverse.runtime import atomic_write, write_json

    old = os.umask(mask)
    try:
        write_json(tmp_path / "a.json", {"x": 1})
        atomic_write(tmp_path / "b.bin", lambda tmp: open(tmp, "wb").write(b"x"))
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "b.bin").stat().st_mode & 0o777 == mode


@pytest.mark.slow
def test_a_runs_results_are_readable_by_others_under_the_default_umask(tiny_run):
    """multiverse.csv, report.html, the design files and model.pt: 0644 under umask 022
    (the tests run under the process's umask; expected is 0666 less it)."""
    from multiverse.runtime import umask

    expected = 0o666 & ~umask()
    out = tiny_run / "results" / "tiny"
    files = [out / "multiverse.csv", out / "multiverse.parquet", out / "report.html", out / "report" / "claims.json",
             *out.glob("design/round_*.json"), *out.glob("universes/**/model.pt"), *out.glob("universes/**/train.json")]
    assert len(files) > 8
    wrong = {str(p.relative_to(out)): oct(p.stat().st_mode & 0o777) for p in files if p.stat().st_mode & 0o777 != expected}
    assert not wrong, f"expected {oct(expected)}: {wrong}"
