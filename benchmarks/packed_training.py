"""Universes per hour: packed training (multiverse.packed) against the one-at-a-time loop.

    .venv/bin/python benchmarks/packed_training.py [--universes 48,192] [--epochs 5]
        [--threads 1] [--device cpu] [--max-stack 64]

The default study's universes (its config's space, model and digits data), drawn as
its design draws the first round (scrambled Sobol, the study's seed), trained for
``--epochs`` epochs each, in one process: first each universe alone with
:func:`multiverse.train.train_universe` (today's loop, ``training.pack: off``), then
grouped into stacks (:func:`multiverse.packed.stacks`) and trained with
:func:`multiverse.packed.train_stack`. Both at equal epochs and on the same universes;
``--threads`` as a training job's (the default study's is 1). Prints a table of
universes per hour and the speed-up, and the largest difference of final validation
accuracy between a universe's two trainings (the packed one is float32 with a
different summation order; 0 would be bitwise).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--universes", default="48,192")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-stack", type=int, default=64)
    args = ap.parse_args()

    from multiverse.runtime import set_threads

    set_threads(args.threads)
    import torch

    from multiverse import packed
    from multiverse.data import load_dataset, split_dataset
    from multiverse.space import SearchSpace
    from multiverse.train import train_universe

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    data = split_dataset(*load_dataset("digits"), config["data"]["split"], seed=config["seed"])
    space = SearchSpace.from_config(config["space"])
    width, depth = config["model"]["width"], config["model"]["depth"]
    rows = []
    for n in (int(v) for v in args.universes.split(",")):
        universes = space.sobol(n, config["seed"])
        seeds = list(range(n))
        t0 = time.perf_counter()
        alone = [train_universe(data, u, seed=s, epochs=args.epochs, width=width, depth=depth, device=args.device)
                 for u, s in zip(universes, seeds)]
        t_loop = time.perf_counter() - t0
        groups = packed.stacks([{"params": u} for u in universes], width, depth, args.max_stack)
        t0 = time.perf_counter()
        stacked: dict[int, tuple] = {}
        for g in groups:
            out = packed.train_stack(data, [universes[i] for i in g], [seeds[i] for i in g], epochs=args.epochs,
                                     width=width, depth=depth, device=args.device)
            stacked.update(zip(g, out))
        if args.device != "cpu":
            torch.cuda.synchronize()
        t_packed = time.perf_counter() - t0
        diff = max(abs(stacked[i][1]["history"][-1]["val_acc"] - alone[i][1]["history"][-1]["val_acc"])
                   for i in range(n) if alone[i][1]["history"] and stacked[i][1]["history"])
        rows.append({"universes": n, "epochs": args.epochs, "stacks": len(groups),
                     "loop s": round(t_loop, 1), "packed s": round(t_packed, 1),
                     "loop universes/h": round(3600 * n / t_loop), "packed universes/h": round(3600 * n / t_packed),
                     "speed-up": f"{t_loop / t_packed:.2f}x", "max |val_acc diff|": f"{diff:.4f}"})
    import pandas as pd

    print(f"digits MLP (width {width}, depth {depth}), {args.device}, {args.threads} thread(s), torch {torch.__version__}")
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
