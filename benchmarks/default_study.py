"""Time the default study on this machine, split into design, training and the rest,
against the same trainings run back to back in one Python process (the lower bound).

    .venv/bin/python benchmarks/default_study.py [--cores 2] [--config config/config.yaml]

Runs the real workflow in a scratch copy of the checkout (the repo's results/ are not
touched), reads the per-job wall times Snakemake's ``benchmark:`` files record, then
retrains every universe of that run in this process and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def run_workflow(dest: Path, args: list[str], env: dict[str, str] | None = None) -> None:
    """Snakemake (``--quiet``, then ``args``) in ``dest``, a scratch copy of the checkout's
    workflow, step scripts, config, envs and profile, so that the repo's results/ are not
    touched; raises with the tail of Snakemake's errors when it fails."""
    for d in ("workflow", "scripts", "config", "envs", "profiles"):
        shutil.copytree(ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    res = subprocess.run([sys.executable, "-m", "snakemake", "--quiet", *args], cwd=dest, capture_output=True,
                         text=True, env=None if env is None else {**os.environ, **env})
    if res.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed in {dest}:\n{res.stderr[-3000:]}")


def job_seconds(bench_dir: Path) -> dict[str, float]:
    """Sum of job wall times per rule, from Snakemake's benchmark TSV files."""
    out: dict[str, float] = {}
    for tsv in bench_dir.rglob("*.tsv"):
        rule = tsv.parent.name if tsv.parent != bench_dir else tsv.stem
        with open(tsv) as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        out[rule] = out.get(rule, 0.0) + float(row["s"])
    return out


def in_process_loop(results: Path, config: dict, threads: int) -> tuple[float, int]:
    """Train and evaluate every universe of the run back to back in this process.

    Returns the loop's seconds (imports excluded) and the number of universes.
    """
    from multiverse.runtime import read_json, set_threads

    set_threads(threads)
    from multiverse.data import read_data
    from multiverse.metrics import universe_metrics
    from multiverse.train import train_universe

    data = read_data(results / "data" / "dataset.npz")
    universes = [u for f in sorted((results / "design").glob("round_*.json")) for u in read_json(f)["universes"]]
    m, t = config["model"], config["training"]
    start = time.perf_counter()
    for u in universes:
        state, record = train_universe(data, u["params"], seed=u["seed"], epochs=t["epochs"],
                                       width=m["width"], depth=m["depth"])
        universe_metrics(data, state, record, width=m["width"], depth=m["depth"])
    return time.perf_counter() - start, len(universes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--loop-only", metavar="RESULTS", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    from multiverse.spec import load_config, with_defaults

    if args.loop_only:  # the lower bound's process: no snakemake import (with_defaults) in its time
        loop, n = in_process_loop(Path(args.loop_only), load_config(ROOT / args.config), args.threads)
        print(loop, n)
        return
    config = with_defaults(load_config(ROOT / args.config))
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        start = time.perf_counter()
        run_workflow(cwd, ["--cores", str(args.cores), "--configfile", args.config])
        total = time.perf_counter() - start
        results = cwd / "results" / config["study"]
        jobs = job_seconds(results / "benchmark")
        # The lower bound: one fresh process (interpreter, imports, all trainings, exit).
        start = time.perf_counter()
        out = subprocess.run(
            [sys.executable, __file__, "--loop-only", str(results), "--config", args.config,
             "--threads", str(config["training"]["threads"])],
            check=True, capture_output=True, text=True,
        ).stdout.split()
        process = time.perf_counter() - start
        loop, n = float(out[0]), int(out[1])
        from multiverse.runtime import read_json

        inside = sum(read_json(f)["train_seconds"] for f in results.glob("universes/*/*/*/*/train.json"))
    design = jobs.get("design", 0.0)
    rows = [
        ("universes", f"{n}"),
        ("workflow, end to end (wall)", f"{total:.1f} s"),
        ("  design jobs (sum of wall)", f"{design:.1f} s"),
        ("  train jobs (sum of wall)", f"{jobs.get('train', 0):.1f} s"),
        ("    of which training loops (sum over universes)", f"{inside:.1f} s"),
        ("  metrics jobs (sum of wall)", f"{jobs.get('metrics', 0):.1f} s"),
        ("  aggregate + report jobs (sum of wall)", f"{jobs.get('aggregate', 0) + jobs.get('report', 0):.1f} s"),
        ("workflow without the design rounds (wall)", f"{total - design:.1f} s"),
        ("in-process lower bound: one process, same trainings + metrics, start to exit", f"{process:.1f} s"),
        ("  of which the loop itself (imports excluded)", f"{loop:.1f} s"),
        ("ratio: workflow without design / in-process process", f"{(total - design) / process:.2f}x"),
        ("ratio: workflow without design / loop alone", f"{(total - design) / loop:.2f}x"),
    ]
    print(f"Default study, --cores {args.cores}, {config['training']['epochs']} epochs, "
          f"shard_size {config['training']['shard_size']}\n")
    print("| quantity | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
