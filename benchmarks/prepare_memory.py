"""Peak memory of the data step (rule prepare_data) on a CIFAR-10-sized folder.

    .venv/bin/python benchmarks/prepare_memory.py [--images 60000]

Writes a CIFAR-10 folder in the real format (``cifar-10-batches-py``: 5 training batches
and a test batch of random uint8 images, ``--images`` in all) and runs
:func:`multiverse.data.prepare_data` on it (the 0.8/0.1/0.1 split of the cluster overlays)
in a fresh process per row, printing its peak RSS: ``now`` is the code as it is (the
uint8 pixels split first, each split then scaled to float32), ``before`` the earlier code
(:func:`before`, its three lines): every pixel scaled by ``(X / 255.0).astype(np.float32)``,
a float64 copy, then split.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def before(folder: str, out: str, split: dict) -> None:
    """prepare_data as it was before issue 19 (CIFAR, no OOD split)."""
    from multiverse.data import IMAGE_SHAPES, raw_dataset, split_dataset

    X, y = raw_dataset("cifar10", folder)
    arrays = split_dataset((X / 255.0).astype(np.float32), y, split, 0)
    np.savez(out, shape=np.asarray(IMAGE_SHAPES["cifar10"]), **arrays)


def cell(folder: str, out: str, old: bool) -> None:
    from multiverse.data import prepare_data

    split = {"train": 0.8, "validation": 0.1, "test": 0.1}
    start = time.perf_counter()
    if old:
        before(folder, out, split)
    else:
        prepare_data("cifar10", split, 0, out, folder)
    print(json.dumps({"seconds": time.perf_counter() - start,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=60000)
    ap.add_argument("--cell", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        cell(args.cell[0], args.cell[1], args.cell[2] == "1")
        return
    from multiverse.data import write_cifar

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cifar-10-batches-py"
        folder.mkdir()
        rng = np.random.default_rng(0)
        per_file = args.images // 6
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            write_cifar(folder / name, rng.integers(0, 256, (per_file, 3072), dtype=np.uint8), np.arange(per_file) % 10)
        raw = 6 * per_file * 3072 / 2**20
        print(f"{6 * per_file:,} CIFAR-shaped images ({raw:,.0f} MB of uint8 pixels; stored as float32: "
              f"{4 * raw:,.0f} MB)\n")
        print("| code | peak MB | seconds |\n|---|---|---|")
        for old in (True, False):
            cmd = [sys.executable, __file__, "--cell", str(folder), str(Path(tmp) / "dataset.npz"), "1" if old else "0"]
            out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            print(f"| {'before (float64 copy)' if old else 'now'} | {out['peak_mb']:,.0f} | {out['seconds']:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
