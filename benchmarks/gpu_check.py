"""Train a few default-study universes on CUDA and print their timings beside the CPU's,
then run ResNet-18 universes on CIFAR-shaped data through the actual workflow on CUDA.

    .venv/bin/python benchmarks/gpu_check.py [--universes 4] [--epochs 60] [--resnet-epochs 2] [--images 2000]
    .venv/bin/python benchmarks/gpu_check.py --workflow-only --device cpu   # the workflow part, on the CPU

Training on CUDA is the same code path as on the CPU (``training.device: cuda`` or
``auto``); the first part checks it runs and how long it takes. The second writes a small
CIFAR-10 folder in the real format (random images), runs ``snakemake --until aggregate``
on a study of 2 ResNet-18 universes (the cluster overlays' network) with ``device: cuda``,
and prints each universe's seconds per epoch and peak GPU memory (``peak_gpu_mb`` of its
train record). Exits 0 with a message when no GPU (unless ``--device cpu``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def workflow_check(device: str, epochs: int, images: int) -> None:
    """2 ResNet-18 universes on CIFAR-shaped data through the real workflow on ``device``."""
    import json
    import shutil
    import subprocess
    import tempfile

    import numpy as np
    import yaml

    from multiverse.data import write_cifar

    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        for d in ("workflow", "scripts", "config", "envs", "profiles"):
            shutil.copytree(ROOT / d, cwd / d, ignore=shutil.ignore_patterns("__pycache__"))
        folder = cwd / "cifar-10-batches-py"
        folder.mkdir()
        rng = np.random.default_rng(0)
        per_file = max(10, images // 6)
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            labels = np.arange(per_file) % 10
            write_cifar(folder / name, rng.integers(0, 256, (per_file, 3072)), labels)
        config = yaml.safe_load((ROOT / "tests/config/tiny.yaml").read_text())
        config.update(study="gpu_check", data={"dataset": "cifar10", "path": str(folder),
                                               "split": {"train": 0.8, "validation": 0.1, "test": 0.1}},
                      model={"arch": "resnet18", "width": 64, "depth": 0}, claims=[])
        config["training"].update(epochs=epochs, device=device, threads=4, shard_size=2)
        config["design"].update(initial=2, rounds=0)
        (cwd / "study.yaml").write_text(yaml.safe_dump(config))
        cmd = [sys.executable, "-m", "snakemake", "--configfile", "study.yaml", "--cores", "4", "--until", "aggregate"]
        start = time.perf_counter()
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if res.returncode != 0:
            print((res.stdout + res.stderr)[-3000:])
            raise SystemExit(f"the workflow failed on {device}")
        print(f"\nResNet-18 (width 64) on CIFAR-shaped data ({6 * per_file} images, split 0.8/0.1/0.1), "
              f"through the workflow on {device}: {wall:.0f} s in all (data, design, train, metrics, aggregate)\n")
        print("| universe | optimizer | batch | epochs | s per epoch | peak GPU memory (MB) | status |\n|---|---|---|---|---|---|---|")
        for rec in sorted((cwd / "results/gpu_check/universes").glob("r0/s*/u*/seed0/train.json")):
            r = json.loads(rec.read_text())
            h = r["history"]
            per = (h[-1]["seconds"] / len(h)) if h else float("nan")
            peak = r.get("peak_gpu_mb")
            print(f"| {r['id']} | {r['params']['optimizer']} | {r['params']['batch_size']} | {len(h)} | {per:.2f} "
                  f"| {'-' if peak is None else f'{peak:.0f}'} | {r['status']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universes", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--resnet-epochs", type=int, default=2)
    ap.add_argument("--images", type=int, default=2000, help="CIFAR-shaped images written (train + test files)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="the workflow part's device")
    ap.add_argument("--workflow-only", action="store_true")
    args = ap.parse_args()
    import torch

    if args.device == "cpu" or args.workflow_only:
        if args.device == "cuda" and not torch.cuda.is_available():
            print("no CUDA device here: nothing to check")
            return
        workflow_check(args.device, args.resnet_epochs, args.images)
        return

    from multiverse.spec import load_config
    from multiverse.data import load_dataset, split_dataset
    from multiverse.metrics import universe_metrics
    from multiverse.space import SearchSpace
    from multiverse.train import train_universe

    config = load_config(ROOT / "config/config.yaml")
    if not torch.cuda.is_available():
        print("no CUDA device here: nothing to check")
        return
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}\n")
    data = split_dataset(*load_dataset("digits"), config["data"]["split"], config["seed"])
    universes = SearchSpace.from_config(config["space"]).sobol(args.universes, config["seed"])
    m = config["model"]
    print("| universe | optimizer | batch | cuda s | cpu s | cuda test acc | cpu test acc |\n|---|---|---|---|---|---|---|")
    for i, u in enumerate(universes):
        row = []
        for device in ("cuda", "cpu"):
            start = time.perf_counter()
            state, record = train_universe(data, u, seed=i, epochs=args.epochs, width=m["width"],
                                           depth=m["depth"], device=device)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            acc = universe_metrics(data, state, record, width=m["width"], depth=m["depth"])["test_acc"]
            row.append((seconds, acc, record["status"]))
        (gs, ga, _), (cs, ca, _) = row
        print(f"| {i} | {u['optimizer']} | {u['batch_size']} | {gs:.2f} | {cs:.2f} | {ga:.3f} | {ca:.3f} |")
    workflow_check("cuda", args.resnet_epochs, args.images)


if __name__ == "__main__":
    main()
