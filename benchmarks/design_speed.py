"""Design-round time and peak memory: ours (gp-ivr, gp-claims) beside Ax's standard qNIPV generator.

    .venv/bin/python benchmarks/design_speed.py [--n 10,50,100,200] [--dims 4,8] [--q 4]
        [--repeats 5] [--no-ax]

For every number of finished universes ``n`` and space (4-D: optimizer, lr, weight
decay, batch size; 8-D: those plus momentum (only with SGD-momentum), Adam's eps (only
with adam/rmsprop), dropout and width), a fresh Python process per measurement:

- *ours, in process*: load the round's inputs (the earlier rounds' metrics records,
  one JSON file), fit a GP per outcome on every finished universe, choose q, write the
  state file; imports excluded. Median of ``--repeats`` rounds in one process, for one
  outcome (as Ax gets) and for the two outcomes of the default study.
- *ours, whole process*: a fresh interpreter that imports, runs one round and exits.
- *gp-claims*: the claim-targeted round (:mod:`multiverse.design_claims`) with four
  claims, one of each type (:data:`CLAIMS`), on the two outcomes; median of ``--repeats``
  in process, and a whole process.
- *Ax*: ``benchmarks/ax_qnipv.py`` (Ax 1.3.1's BoTorch generator with
  ``qNegIntegratedPosteriorVariance``, 8 restarts, 256 raw samples, 128 MC points) on
  the same space and data, one outcome, one round; imports excluded.

Peak memory is the process's maximum resident set size. The outcomes are smooth
synthetic functions of the choices (what is timed does not depend on their values).
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

ROOT = Path(__file__).resolve().parents[1]

SPACE_4 = {
    "optimizer": {"type": "categorical", "choices": ["sgd", "momentum", "adam", "rmsprop"]},
    "lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
    "weight_decay": {"type": "float", "low": 1e-6, "high": 1e-2, "log": True},
    "batch_size": {"type": "int", "low": 16, "high": 256, "log": True},
}
SPACE_8 = {
    **SPACE_4,
    "momentum": {"type": "float", "low": 0.5, "high": 0.99, "when": {"optimizer": ["momentum"]}},
    "eps": {"type": "float", "low": 1e-10, "high": 1.0, "log": True, "when": {"optimizer": ["adam", "rmsprop"]}},
    "dropout": {"type": "float", "low": 0.0, "high": 0.5},
    "width": {"type": "int", "low": 16, "high": 512, "log": True},
}
SPACES = {4: SPACE_4, 8: SPACE_8}
#: The claims a gp-claims round is timed with: one of each type, on the two outcomes.
CLAIMS = [
    {"name": "adam_vs_sgd", "type": "comparison", "metric": "test_acc", "dimension": "optimizer", "a": ["adam"],
     "b": ["sgd"], "relation": ">="},
    {"name": "lr_trend", "type": "trend", "metric": "test_acc", "dimension": "lr", "direction": "decreasing"},
    {"name": "best_adam", "type": "expected_best", "metric": "test_acc", "dimension": "optimizer", "a": ["adam"],
     "b": ["sgd"], "relation": ">=", "min_budget": 2},
    {"name": "acc_vs_gap", "type": "correlation", "x": "test_acc", "y": "gap", "relation": "negative"},
]


def records(space_config: dict, n: int, seed: int = 0) -> list[dict]:
    """``n`` finished universes drawn at random, with two smooth outcomes."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "scripts"))
    from multiverse.space import SearchSpace

    space = SearchSpace.from_config(space_config)
    out = []
    for i, u in enumerate(space.random(n, seed)):
        lr = np.log10(u["lr"])
        acc = 0.9 - 0.05 * (lr + 2) ** 2 + 0.02 * np.log2(u["batch_size"] / 16) + (0.05 if u["optimizer"] == "adam" else 0)
        if u.get("eps") is not None:
            acc -= 0.01 * (np.log10(u["eps"]) + 5)
        gap = 0.01 * np.log10(u["weight_decay"]) + 0.02 * (u["optimizer"] in ("adam", "rmsprop")) + 0.001 * i % 3
        out.append({"id": f"r0u{i:03d}", "round": 0, "index": i, "params": u, "status": "ok",
                    "metrics": {"test_acc": float(acc), "gap": float(gap)}})
    return out


def design_settings() -> dict:
    """The design section a gp-ivr design job gets: 512 candidates and 256 reference
    points, the schema's defaults for the rest (``initial``, ``batch`` and ``outcomes``
    are set per measurement)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from multiverse.spec import load_config, with_defaults

    config = load_config(ROOT / "config" / "config.yaml")
    config["design"] = {**{k: config["design"][k] for k in ("initial", "rounds", "batch", "outcomes")},
                        "strategy": "gp-ivr", "candidates": 512, "reference": 256}
    return with_defaults(config)["design"]


def child(args) -> None:
    """One measurement in this fresh process; prints one JSON line."""
    t0 = time.perf_counter()
    inputs = json.loads(Path(args.inputs).read_text())
    space_config, previous = inputs["space"], inputs["previous"]
    outcomes = ["test_acc", "gap"][: args.outcomes]
    if args.method == "ax":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import torch

        torch.set_num_threads(args.threads)
        from ax_qnipv import ax_qnipv_round

        t1 = time.perf_counter()
        prev = json.loads(Path(args.inputs).read_text())["previous"]
        new = ax_qnipv_round(space_config, [p["params"] for p in prev], [p["metrics"]["test_acc"] for p in prev],
                             args.q, seed=1)
        Path(args.output).write_text(json.dumps(new))
        rounds = [time.perf_counter() - t1]
    else:
        sys.path.insert(0, str(ROOT / "scripts"))
        from multiverse.design import design_state
        from multiverse.runtime import read_json, set_threads, write_json

        set_threads(args.threads)
        t1 = time.perf_counter()
        rounds = []
        design = {**inputs["design"], "initial": len(previous), "batch": args.q, "outcomes": outcomes,
                  "strategy": args.strategy}
        if args.strategy == "gp-claims":
            design.update(explore_share=0.25, claims=CLAIMS)
        for _ in range(args.repeats):
            s = time.perf_counter()
            prev = read_json(args.inputs)["previous"]
            state = design_state(1, [len(prev), args.q], args.q, space_config, design, 1, prev, {})
            write_json(args.output, state)
            rounds.append(time.perf_counter() - s)
    print(json.dumps({"imports_s": t1 - t0, "rounds_s": rounds,
                      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(method: str, inputs: Path, q: int, outcomes: int, repeats: int, threads: int,
            strategy: str = "gp-ivr") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--child", method, "--inputs", str(inputs), "--output", f"{tmp}/out.json",
               "--q", str(q), "--outcomes", str(outcomes), "--repeats", str(repeats), "--threads", str(threads),
               "--strategy", strategy]
        start = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    return out


def main(argv=None) -> None:
    import statistics

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", default="10,50,100,200")
    ap.add_argument("--dims", default="4,8")
    ap.add_argument("--q", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-ax", action="store_true")
    ap.add_argument("--ax-n", default=None, help="numbers of universes at which Ax is run too (default: all of --n)")
    ap.add_argument("--child", choices=["ours", "ax"])
    ap.add_argument("--inputs")
    ap.add_argument("--output")
    ap.add_argument("--outcomes", type=int, default=1)
    ap.add_argument("--strategy", default="gp-ivr", choices=["gp-ivr", "gp-claims"])
    args = ap.parse_args(argv)
    if args.child:
        args.method = args.child
        return child(args)

    rows = []
    print("| dims | n | ours, 1 outcome: round (median) | ours, 2 outcomes: round (median) | ours: whole process "
          "(imports incl.) | ours: peak memory | gp-claims, 2 outcomes, 4 claims: round (median) | gp-claims: whole "
          "process | gp-claims: peak memory | Ax qNIPV, 1 outcome: round | Ax: peak memory | Ax / ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    design = design_settings()
    with tempfile.TemporaryDirectory() as tmp:
        for d in map(int, args.dims.split(",")):
            for n in map(int, args.n.split(",")):
                inputs = Path(tmp) / f"in_{d}_{n}.json"
                inputs.write_text(json.dumps({"space": SPACES[d], "previous": records(SPACES[d], n), "design": design}))
                one = measure("ours", inputs, args.q, 1, args.repeats, args.threads)
                two = measure("ours", inputs, args.q, 2, args.repeats, args.threads)
                whole = measure("ours", inputs, args.q, 2, 1, args.threads)
                claims = measure("ours", inputs, args.q, 2, args.repeats, args.threads, "gp-claims")
                claims_whole = measure("ours", inputs, args.q, 2, 1, args.threads, "gp-claims")
                ax_n = args.n if args.ax_n is None else args.ax_n
                run_ax = not args.no_ax and n in map(int, ax_n.split(","))
                ax = measure("ax", inputs, args.q, 1, 1, args.threads) if run_ax else None
                m1, m2 = statistics.median(one["rounds_s"]), statistics.median(two["rounds_s"])
                peak = max(one["peak_mb"], two["peak_mb"], whole["peak_mb"])
                ax_cells = (f"{ax['rounds_s'][0]:.1f} s | {ax['peak_mb']:.0f} MB | {ax['rounds_s'][0] / m1:.0f}x"
                            if ax else "- | - | -")
                mc = statistics.median(claims["rounds_s"])
                peak_c = max(claims["peak_mb"], claims_whole["peak_mb"])
                print(f"| {d} | {n} | {m1:.2f} s | {m2:.2f} s | {whole['process_s']:.1f} s | {peak:.0f} MB "
                      f"| {mc:.2f} s | {claims_whole['process_s']:.1f} s | {peak_c:.0f} MB | {ax_cells} |", flush=True)
                rows.append({"dims": d, "n": n, "ours_1": one, "ours_2": two, "whole": whole, "ax": ax,
                             "claims": claims, "claims_whole": claims_whole})
    out = ROOT / "results" / "benchmarks" / "design_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
