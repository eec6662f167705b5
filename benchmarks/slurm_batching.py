"""Compare two ways to send many small universes to SLURM.

    .ci/slurm-up && .venv/bin/python benchmarks/slurm_batching.py

(a) one submission per shard (no `cluster:` node declared): a shard's train and metrics
    jobs are one group job;
(b) node-sized submissions (`cluster:` declares the CI node: 2 cores): as many shards as
    fit the node side by side travel as one group job (multiverse.spec.layout.shards_per_submission).
Runs a small study (4 rounds of 4 universes, shards of 2, 1 thread per job) with each
under profiles/slurm and prints wall time and the number of sbatch submissions.
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
        config["training"].update(threads=1, mem_mb=1000)
        if variant == "node-sized submissions":
            config["cluster"] = {"gpus_per_node": 0, "cpus_per_node": 2, "mem_mb_per_node": 8000}
        (cwd / "study.yaml").write_text(yaml.safe_dump(config))
        cmd = [sys.executable, "-m", "snakemake", "--configfile", "study.yaml", "--profile", "profiles/slurm",
               "--slurm-no-account", "--slurm-init-seconds-before-status-checks", "2"]
        start = time.perf_counter()
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        log = res.stdout + res.stderr
        submissions = len(set(re.findall(r"SLURM jobid (\d+)", log)))
        return wall, submissions, res.returncode == 0


def main() -> None:
    print("Study: 4 rounds x 4 universes, shards of 2 (8 train + 8 metrics jobs, 1 core each), single-node SLURM of 2 cores\n")
    print("| batching | wall | sbatch submissions | ok |\n|---|---|---|---|")
    for variant in ("one submission per shard", "node-sized submissions"):
        wall, n, ok = run(variant)
        print(f"| {variant} | {wall:.0f} s | {n} | {ok} |")


if __name__ == "__main__":
    main()
