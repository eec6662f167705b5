"""Peak memory and time of the metrics step on CIFAR-shaped data, by network and split size.

    .venv/bin/python benchmarks/metrics_memory.py [--sizes 2000 8000 16000] [--archs cnn resnet18]
        [--old-max 8000] [--threads 2]

Writes synthetic CIFAR-10-shaped data (random 3x32x32 uint8 images scaled to [0, 1],
stored as the data rule does: flat float32 ``X_*``, ``y_*`` and ``shape``; validation and
test one eighth of train each, as in the 0.8/0.1/0.1 split) and a randomly initialised
network's weights to a scratch folder, then runs :func:`multiverse.metrics.metrics_shard`
on that one universe in a fresh process per cell, so each cell's peak RSS is its own.
``chunked`` is the metrics step as it is (:data:`multiverse.train.EVAL_BATCH` rows per
forward pass); ``one pass`` evaluates each split at once, as before issue 19, and runs
only up to ``--old-max`` training images (its peak grows by about 1 MB per image for
the ResNet-18). Networks as in the presets: the CNN of ``id_vs_ood`` (width 16, depth 2)
and the ResNet-18 of ``config/studies/cluster/*.yaml`` (width 64). The data arrays'
own size is printed beside the peak: the step holds the whole dataset file in memory.
Prints a Markdown table.
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

SHAPE = (3, 32, 32)
MODELS = {"cnn": {"arch": "cnn", "width": 16, "depth": 2}, "resnet18": {"arch": "resnet18", "width": 64, "depth": 0}}


def write_data(path: Path, n_train: int, seed: int = 0) -> float:
    """CIFAR-shaped random data in the data rule's layout; returns the arrays' MB."""
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {"shape": np.asarray(SHAPE, dtype=np.int64)}
    for split, n in (("train", n_train), ("val", n_train // 8), ("test", n_train // 8)):
        X = rng.integers(0, 256, size=(n, int(np.prod(SHAPE))), dtype=np.uint8).astype(np.float32)
        X /= 255.0
        arrays[f"X_{split}"], arrays[f"y_{split}"] = X, rng.integers(0, 10, size=n).astype(np.int64)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return sum(a.nbytes for a in arrays.values()) / 2**20


def write_universe(folder: Path, arch: str) -> tuple[Path, Path]:
    """A randomly initialised network's weights and an ``ok`` train record for it."""
    import torch

    from multiverse.runtime import write_json
    from multiverse.train import make_model

    m = MODELS[arch]
    torch.manual_seed(0)
    model = make_model(int(np.prod(SHAPE)), 10, m["width"], m["depth"], arch, SHAPE)
    model_path, record_path = folder / f"{arch}.pt", folder / f"{arch}.json"
    torch.save(model.state_dict(), model_path)
    write_json(record_path, {"id": "r0u000", "round": 0, "index": 0, "shard": 0, "slot": 0, "seed": 0,
                             "params": {}, "status": "ok", "n_classes": 10})
    return model_path, record_path


def cell(data: str, model_path: str, record_path: str, arch: str, one_pass: bool, threads: int) -> None:
    """One metrics step in this process; prints its seconds and peak RSS (MB) as JSON."""
    from multiverse.runtime import set_threads

    set_threads(threads)
    import logging
    from functools import partial

    import multiverse.train
    from multiverse.metrics import metrics_shard

    if one_pass:  # the evaluation before issue 19: each split in one forward pass
        multiverse.train.evaluate = partial(multiverse.train.evaluate, batch=0)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        metrics_shard(data, [model_path], [record_path], MODELS[arch], [f"{tmp}/metrics.json"],
                      logging.getLogger("metrics_memory"), device="cpu")
        seconds = time.perf_counter() - start
        metrics = json.loads(Path(f"{tmp}/metrics.json").read_text())["metrics"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "train_acc": metrics["train_acc"]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000, 16000], help="training images")
    ap.add_argument("--archs", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--old-max", type=int, default=8000, help="largest size run in one pass as well")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cell", nargs=5, metavar=("DATA", "MODEL", "RECORD", "ARCH", "ONE_PASS"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        data, model_path, record_path, arch, one_pass = args.cell
        cell(data, model_path, record_path, arch, one_pass == "1", args.threads)
        return
    from multiverse.train import EVAL_BATCH

    print(f"chunked: {EVAL_BATCH} rows per forward pass; {args.threads} threads; "
          "peak RSS of a fresh process per cell\n")
    print("| arch | train images | data MB | path | peak MB | seconds |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        universes = {arch: write_universe(folder, arch) for arch in args.archs}
        for n in args.sizes:
            data = folder / f"data_{n}.npz"
            data_mb = write_data(data, n)
            for arch in args.archs:
                for one_pass in ([False, True] if n <= args.old_max else [False]):
                    cmd = [sys.executable, __file__, "--threads", str(args.threads), "--cell", str(data),
                           *map(str, universes[arch]), arch, "1" if one_pass else "0"]
                    run = subprocess.run(cmd, check=True, capture_output=True, text=True)
                    out = json.loads(run.stdout.splitlines()[-1])
                    path = "one pass (before)" if one_pass else "chunked"
                    print(f"| {arch} | {n:,} | {data_mb:,.0f} | {path} | {out['peak_mb']:,.0f} "
                          f"| {out['seconds']:.1f} |", flush=True)
            data.unlink()


if __name__ == "__main__":
    main()
