"""Compare two ways to batch many small universes into few SLURM submissions.

    .ci/slurm-up && .venv/bin/python benchmarks/slurm_batching.py

(a) group jobs: the train and metrics jobs of a round merged into one group job
    (profiles/slurm, `groups` + `group-components`);
(b) SLURM array jobs: `--slurm-array-jobs=train,metrics`, one job per shard.
Runs a small study (4 rounds of 4 universes, shards of 2) with each and prints wall time
and the number of sbatch submissions.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def run(variant: str) -> tuple[float, int, bool]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        for d in ("workflow", "scripts", "config", "envs", "profiles"):
            shutil.copytree(ROOT / d, cwd / d, ignore=shutil.ignore_patterns("__pycache__"))
        config = yaml.safe_load((ROOT / "tests/config/tiny.yaml").read_text())
        config["design"].update(initial=4, rounds=3, batch=4)
        config["training"].update(epochs=5)
        (cwd / "study.yaml").write_text(yaml.safe_dump(config))
        profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
        if variant == "array jobs":
            profile.pop("groups")
            profile.pop("group-components")
            profile["slurm-array-jobs"] = "train,metrics"
        (cwd / "profiles/slurm/config.yaml").write_text(yaml.safe_dump(profile))
        cmd = [sys.executable, "-m", "snakemake", "--configfile", "study.yaml", "--profile", "profiles/slurm",
               "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2"]
        start = time.perf_counter()
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        log = res.stdout + res.stderr
        submissions = len(set(re.findall(r"SLURM jobid (\d+)", log)))
        return wall, submissions, res.returncode == 0


def main() -> None:
    print("Study: 4 rounds x 4 universes, shards of 2 (8 train + 8 metrics jobs), single-node SLURM\n")
    print("| batching | wall | sbatch submissions | ok |\n|---|---|---|---|")
    for variant in ("group jobs", "array jobs"):
        wall, n, ok = run(variant)
        print(f"| {variant} | {wall:.0f} s | {n} | {ok} |")


if __name__ == "__main__":
    main()
