"""Train a few default-study universes on CUDA and print their timings beside the CPU's.

    .venv/bin/python benchmarks/gpu_check.py [--universes 4] [--epochs 60]

Training on CUDA is the same code path as on the CPU (``training.device: cuda`` or
``auto``); this checks it runs and how long it takes. Exits 0 with a message when no GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universes", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=60)
    args = ap.parse_args()
    import torch

    from multiverse.config import load_config
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


if __name__ == "__main__":
    main()
