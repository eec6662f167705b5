"""The tiny study on a real SLURM (brought up by .ci/slurm-up) with the project's profile."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import make_checkout

OUT = Path("results/tiny")


def slurm_is_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    res = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    return res.returncode == 0 and any(s in res.stdout for s in ("idle", "mix", "alloc"))


@pytest.mark.slow
@pytest.mark.skipif(not slurm_is_up(), reason="no SLURM cluster here: run .ci/slurm-up first (as root)")
def test_tiny_study_on_slurm_equals_local_run(tiny_run, tmp_path):
    cwd = make_checkout(tmp_path)
    cmd = [sys.executable, "-m", "snakemake", "--configfile", "tiny.yaml", "--profile", "profiles/slurm",
           # the CI cluster has no accounts and answers status queries at once
           "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2"]
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    log = res.stdout + res.stderr
    assert res.returncode == 0, log[-4000:]
    assert "submitted with SLURM jobid" in log
    # a round's train and metrics jobs travel as one group submission
    assert "group_round0_metrics_train" in log
    pd.testing.assert_frame_equal(pd.read_parquet(cwd / OUT / "multiverse.parquet"),
                                  pd.read_parquet(tiny_run / OUT / "multiverse.parquet"))
    for r in (0, 1):
        a, b = (json.loads((d / OUT / f"design/round_{r}.json").read_text())["universes"] for d in (cwd, tiny_run))
        assert a == b
