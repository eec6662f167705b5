"""Would ``torch.compile`` make packed training faster on this CPU? One stack's forward,
loss and backward (the default study's MLP: 64 inputs, two hidden layers of 128, 10
classes; ``K`` universes, minibatches of ``B``), eager against compiled, on one thread (a
train job's), with the compile's own seconds.

    .venv/bin/python benchmarks/packed_compile.py [--stacks 8x64,32x64] [--steps 200]

The step is :class:`multiverse.packed.Stack`'s forward and the masked loss of
:func:`multiverse.packed.train_stack`; the optimizer's elementwise step (about 0.3 ms a
lockstep step at K = 8) is left out of both.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))


def stack_step(k: int, b: int, seed: int = 0):
    """A stack of ``k`` default-study MLPs and one minibatch of ``b`` rows per universe:
    returns ``(loss, inputs, stack)``, ``loss(*inputs)`` being the stack's summed masked
    loss (forward and loss; :func:`seconds_per_step` runs its backward)."""
    from multiverse.nets import make_model
    from multiverse.packed import Stack

    torch.manual_seed(seed)
    stack = Stack([make_model(64, 10, 128, 2) for _ in range(k)])
    x, y = torch.randn(k, b, 64), torch.randint(0, 10, (k, b))
    mask = torch.ones(k, b, dtype=torch.bool)

    def loss(x, y, mask):
        per_row = nn.functional.cross_entropy(stack(x).reshape(-1, 10), y.reshape(-1), reduction="none")
        return (torch.where(mask, per_row.view(k, b), 0.0).sum(1) / mask.sum(1)).sum()

    return loss, (x, y, mask), stack


def seconds_per_step(fn, args, stack, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        stack.flat.grad = None
        fn(*args).backward()
    return (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stacks", default="8x64,32x64", help="KxB of each stack measured, comma-separated")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("| K | B | eager ms/step | compiled ms/step | speed-up | compile s (first call) |\n|---:|---:|---:|---:|---:|---:|")
    for spec in args.stacks.split(","):
        k, b = map(int, spec.split("x"))
        loss, inputs, stack = stack_step(k, b)
        eager = seconds_per_step(loss, inputs, stack, args.steps)
        compiled = torch.compile(loss, dynamic=False)
        start = time.perf_counter()
        seconds_per_step(compiled, inputs, stack, 1)
        first = time.perf_counter() - start
        steady = seconds_per_step(compiled, inputs, stack, args.steps)
        print(f"| {k} | {b} | {eager * 1e3:.2f} | {steady * 1e3:.2f} | {eager / steady:.2f}x | {first:.1f} |")


if __name__ == "__main__":
    main()
