"""What guarding every universe costs (multiverse.failures): the default study's round-0
train jobs (the real ``train`` rule: 16 universes in 4 shards of 4) at a commit before the
guard and in this checkout, alternating, in one run on one machine.

    .venv/bin/python benchmarks/failure_overhead.py [--before 67efa21] [--repeats 3] [--cores 2]

Each checkout first runs its data, design and round-0 train jobs once (not timed), then
``--forcerun train`` ``--repeats`` times, alternating with the other checkout. A run's
train time is the sum of its train jobs' seconds (Snakemake's benchmark files,
``results/default/benchmark/train/``); the table gives the median per checkout and the
change from before to after.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(".git", ".venv", "results", ".snakemake", "__pycache__")


def round0_targets(config: dict) -> list[str]:
    """The model files of round 0's universes under seed 0 (all its train jobs)."""
    n, size = config["design"]["initial"], config["training"]["shard_size"]
    out = f"results/{config['study']}/universes/r0"
    return [f"{out}/s{k // size}/u{k % size}/seed0/model.pt" for k in range(n)]


def snakemake(cwd: Path, cores: int, targets: list[str], *extra: str) -> None:
    res = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", str(cores), *extra], cwd=cwd,
                         capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"snakemake failed in {cwd}:\n{res.stderr[-3000:]}")


def train_seconds(cwd: Path, study: str) -> float:
    files = sorted((cwd / "results" / study / "benchmark" / "train").glob("r0_s*_seed0.tsv"))
    return float(sum(pd.read_csv(f, sep="\t")["s"].iloc[0] for f in files))


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="67efa21", help="a commit before the guard")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args(argv)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    targets = round0_targets(config)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        before, after = Path(tmp) / "before", Path(tmp) / "after"
        before.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        shutil.copytree(ROOT, after, ignore=IGNORE)
        # both train the same universes: this checkout's config (design included) in both
        shutil.copy(ROOT / "config" / "config.yaml", before / "config" / "config.yaml")
        for cwd in (before, after):
            snakemake(cwd, args.cores, targets)
        for r in range(args.repeats):
            for name, cwd in (("before", before), ("after", after)):
                snakemake(cwd, args.cores, targets, "--forcerun", "train")
                rows.append({"checkout": name, "repeat": r, "train s": train_seconds(cwd, config["study"])})
                print(f"  {name} {r}: {rows[-1]['train s']:.1f} s", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    med = df.groupby("checkout")["train s"].median()
    table = pd.DataFrame({
        "checkout": [f"before ({args.before})", "after (this checkout)"],
        "runs": [int((df["checkout"] == c).sum()) for c in ("before", "after")],
        "median train-job seconds (16 universes)": [f"{med['before']:.1f}", f"{med['after']:.1f}"],
        "each run": [", ".join(f"{v:.1f}" for v in df.loc[df["checkout"] == c, "train s"]) for c in ("before", "after")],
    })
    print(table.to_markdown(index=False))
    print(f"\nchange: {100 * (med['after'] / med['before'] - 1):+.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
