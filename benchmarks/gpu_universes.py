"""Universes per hour on one device: packed and shared training against the one-at-a-time loop
(issue 32, item 5), for a GPU machine; it runs on the CPU too.

    .venv/bin/python benchmarks/gpu_universes.py                       # a GPU machine, about 7 minutes
    .venv/bin/python benchmarks/gpu_universes.py --device cpu --quick  # tiny sizes, to check it runs

Three models, each trained on the same universes at equal epochs by each method:

- ``digits MLP``: the default study (``config/config.yaml``: its space, width and depth,
  the digits data, universes drawn as its design draws them, ``SearchSpace.sobol``);
- ``MNIST CNN``: ``model.arch: cnn`` on synthetic MNIST-shaped data (1 x 28 x 28, 10
  classes, ``--images`` training images from a seeded numpy generator);
- ``CIFAR ResNet-18``: ``model.arch: resnet18`` (width 64) on synthetic CIFAR-shaped data
  (3 x 32 x 32).

The CNN's and the ResNet's universes are drawn from the default study's space too
(optimizer, lr, weight decay, batch size), as the case studies' cluster overlays train them.

Methods:

- ``loop``: today's ``training.pack: off``, ``per_device: 1``: one universe after another
  with :func:`multiverse.train.train_universe` in one process;
- ``packed``: ``training.pack: auto``: :func:`multiverse.packed.stacks` and
  :func:`multiverse.packed.train_stack`, the horizontal fusion of HFTA (Wang et al.,
  "Horizontally Fused Training Array", MLSys 2021). MLPs only: "n/a" for the others;
- ``shared k``: ``training.per_device: k``: k lanes (:func:`multiverse.failures.guard_lanes`),
  each a forked process under its own guard that takes its share of the GPU's memory
  (:func:`multiverse.runtime.take_gpu_share`) and trains slots ``i, i + k, ...``.

Each (model, method) cell runs in a fresh subprocess of this script, so that no process
forks after CUDA or multi-threaded OpenMP work. The seconds are the method's own (from the
first universe's start, CUDA initialisation included, to the last one's end), not the
subprocess's start. Peak GPU memory is ``torch.cuda.max_memory_allocated`` (the tensors;
each process's CUDA context and the allocator's cache come on top): the largest over a
process's universes, and for ``shared k`` the sum over the lanes (all at once, at worst)
and the largest lane.

Time: ``--budget-seconds`` (420) bounds the whole run. Each model gets a share of what is
left (MLP 0.2, CNN 0.3, ResNet 0.5); its loop runs first and stops before a universe that
would pass its part of that share (estimated from the seconds per planned optimizer step
so far), and the other methods train the same first n universes (n a multiple of k). The
table's notes say what was chosen. ``--budget-seconds 0``: all the universes asked for.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

MODELS = ("mlp", "cnn", "resnet18")
NAMES = {"mlp": "digits MLP", "cnn": "MNIST CNN", "resnet18": "CIFAR ResNet-18"}
#: (channels, height, width) of the synthetic images (multiverse.data.IMAGE_SHAPES' mnist, cifar10)
SHAPES = {"cnn": (1, 28, 28), "resnet18": (3, 32, 32)}
#: each model's share of the time budget, and its cells' time as a multiple of its loop's
#: (shared assumed no slower than the loop, packed no slower than half of it)
WEIGHTS = {"mlp": 0.2, "cnn": 0.3, "resnet18": 0.5}
FACTORS = {"mlp": 2.5, "cnn": 2.0, "resnet18": 2.0}
FULL = {"universes": 192, "cnn_universes": 48, "resnet_universes": 16, "epochs": 5, "images": 6000,
        "per_device": 4, "cnn_width": 32, "cnn_depth": 2, "resnet_width": 64}
QUICK = {"universes": 4, "cnn_universes": 2, "resnet_universes": 2, "epochs": 1, "images": 64,
         "per_device": 2, "cnn_width": 8, "cnn_depth": 2, "resnet_width": 16}


# ---------------------------------------------------------------- one cell, in its own process

def study_config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def synthetic_images(shape: tuple[int, int, int], n_train: int, seed: int) -> dict:
    """MNIST- or CIFAR-shaped splits: flat float32 images in [0, 1], 10 classes, each class a
    fixed random pattern under noise (learnable, so losses behave as on real data);
    validation and test splits of ``n_train // 8`` each."""
    import numpy as np

    rng = np.random.default_rng(seed)
    d = int(np.prod(shape))
    protos = rng.random((10, d), dtype=np.float32)
    out: dict = {"shape": np.asarray(shape, dtype=np.int64)}
    for part, n in (("train", n_train), ("val", max(10, n_train // 8)), ("test", max(10, n_train // 8))):
        y = rng.permutation(np.arange(n) % 10).astype(np.int64)
        X = np.float32(0.35) * protos[y] + np.float32(0.65) * rng.random((n, d), dtype=np.float32)
        out[f"X_{part}"], out[f"y_{part}"] = X, y
    return out


def cell_data(spec: dict, config: dict) -> dict:
    if spec["model"] == "mlp":
        from multiverse.data import load_dataset, split_dataset

        return split_dataset(*load_dataset("digits"), config["data"]["split"], seed=config["seed"])
    return synthetic_images(SHAPES[spec["model"]], spec["images"], config["seed"])


def train_many(data: dict, universes: list, seeds: list, spec: dict, deadline: float | None = None) -> dict:
    """Train ``universes`` one after another (:func:`multiverse.train.train_universe`); with a
    ``deadline`` (seconds), stop before a universe that would end past it (after at least
    ``per_device`` of them). Cumulative seconds and each universe's epochs, status and peaks."""
    import torch

    from multiverse.nets import budget
    from multiverse.train import train_universe

    cuda = spec["device"] == "cuda"
    n_train = len(data["y_train"])
    out: dict[str, list] = {"times": [], "epochs_run": [], "status": [], "peak_mb": [], "reserved_mb": []}
    steps_done = 0
    start = time.perf_counter()
    for u, seed in zip(universes, seeds):
        steps = budget(u, spec["epochs"], n_train)[1]
        if deadline is not None and len(out["times"]) >= spec["per_device"]:
            spent = out["times"][-1]
            if spent + spent / steps_done * steps > deadline:
                break
        _, record = train_universe(data, u, seed=seed, epochs=spec["epochs"], width=spec["width"],
                                   depth=spec["depth"], device=spec["device"], arch=spec["model"])
        if cuda:  # train_universe resets the peaks at its start: these are this universe's
            torch.cuda.synchronize()
            out["reserved_mb"].append(torch.cuda.max_memory_reserved() / 2**20)
        out["times"].append(time.perf_counter() - start)
        out["peak_mb"].append(record.get("peak_gpu_mb"))
        out["epochs_run"].append(record["epochs_run"])
        out["status"].append(record["status"])
        steps_done += steps
    return out


def run_cell(spec: dict) -> None:
    """One (model, method) cell: writes its result as JSON to ``spec["out"]``."""
    from multiverse.runtime import set_threads, write_json

    set_threads(spec["threads"])  # before any torch work, and before the lanes fork
    import torch

    importlib.import_module("multiverse.train")  # before the lanes fork, as scripts/train.py imports it
    from multiverse.space import SearchSpace

    config = study_config()
    data = cell_data(spec, config)
    universes = SearchSpace.from_config(config["space"]).sobol(spec["draw"], config["seed"])[: spec["n"]]
    seeds = list(range(len(universes)))
    cuda = spec["device"] == "cuda"
    result: dict[str, Any] = {"torch": torch.__version__}
    method = spec["method"]
    if method == "loop":  # the only cell that asks torch about CUDA in the parent: it never forks
        if cuda and not torch.cuda.is_available():
            write_json(spec["out"], {**result, "no_cuda": True})
            return
        if cuda:
            result.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
        result.update(train_many(data, universes, seeds, spec, spec.get("deadline")))
    elif method == "packed":
        from multiverse import packed

        groups = packed.stacks([{"params": u} for u in universes], spec["width"], spec["depth"], spec["max_stack"])
        records: dict[int, dict] = {}
        start = time.perf_counter()
        for g in groups:
            out = packed.train_stack(data, [universes[i] for i in g], [seeds[i] for i in g], epochs=spec["epochs"],
                                     width=spec["width"], depth=spec["depth"], device=spec["device"])
            records.update((i, rec) for i, (_, rec) in zip(g, out))
        if cuda:
            torch.cuda.synchronize()
        result.update(seconds=time.perf_counter() - start, stacks=len(groups),
                      epochs_run=[records[i]["epochs_run"] for i in seeds],
                      status=[records[i]["status"] for i in seeds],
                      peak_mb=torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
                      reserved_mb=torch.cuda.max_memory_reserved() / 2**20 if cuda else None)
    elif method == "shared":
        import logging

        from multiverse.failures import guard_lanes
        from multiverse.runtime import take_gpu_share

        k = min(spec["per_device"], len(universes))
        lanes = Path(tempfile.mkdtemp(prefix="lanes", dir=Path(spec["out"]).parent))

        def work(lane: int) -> None:  # in a lane's guarded worker: the first CUDA work of its process
            set_threads(spec["threads"])
            share = take_gpu_share(spec["device"])
            res = train_many(data, universes[lane::k], seeds[lane::k], spec)
            write_json(lanes / f"lane{lane}.json", {**res, "share": share, "pid": os.getpid()})

        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        start = time.perf_counter()
        guard_lanes([lambda lane=lane: work(lane) for lane in range(k)], logging.getLogger("gpu_universes"), retries=0)
        seconds = time.perf_counter() - start
        per_lane = [json.loads((lanes / f"lane{lane}.json").read_text()) for lane in range(k)]
        order = [(lane, j) for lane in range(k) for j in range(len(per_lane[lane]["status"]))]
        by_slot = sorted(order, key=lambda lj: lj[0] + k * lj[1])
        lane_peaks = [max((p for p in r["peak_mb"] if p is not None), default=None) for r in per_lane]
        result.update(seconds=seconds, k=k, shares=[r["share"] for r in per_lane],
                      epochs_run=[per_lane[lane]["epochs_run"][j] for lane, j in by_slot],
                      status=[per_lane[lane]["status"][j] for lane, j in by_slot],
                      lane_peak_mb=lane_peaks,
                      lane_reserved_mb=[max(r["reserved_mb"], default=None) for r in per_lane])
    else:
        raise ValueError(f"unknown method {method!r}")
    write_json(spec["out"], result)


# ---------------------------------------------------------------- the run: cells, sizing, table

def machine() -> str:
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else 'CPU'} ({os.cpu_count()} cores)"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def call_cell(spec: dict, timeout: float) -> tuple[dict | None, float, str]:
    """Run one cell in a fresh process: (its result or None, wall seconds, error text)."""
    start = time.perf_counter()
    try:
        res = subprocess.run([sys.executable, __file__, "--cell", json.dumps(spec)], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - start, f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - start
    if res.returncode != 0 or not Path(spec["out"]).exists():
        return None, wall, (res.stdout + res.stderr)[-3000:]
    return json.loads(Path(spec["out"]).read_text()), wall, ""


def fmt_mb(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--universes", type=int, help="digits MLP universes (192; --quick 4)")
    ap.add_argument("--cnn-universes", type=int, help="MNIST CNN universes (48; --quick 2)")
    ap.add_argument("--resnet-universes", type=int, help="CIFAR ResNet-18 universes (16; --quick 2)")
    ap.add_argument("--epochs", type=int, help="epochs per universe (5; --quick 1)")
    ap.add_argument("--images", type=int, help="synthetic training images (6000; --quick 64)")
    ap.add_argument("--per-device", type=int, help="k of 'shared k' (4; --quick 2)")
    ap.add_argument("--cnn-width", type=int, help="the CNN's first channels (32; --quick 8)")
    ap.add_argument("--cnn-depth", type=int, help="the CNN's blocks (2)")
    ap.add_argument("--resnet-width", type=int, help="the ResNet's base channels (64; --quick 16)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (a train job's)")
    ap.add_argument("--max-stack", type=int, default=64)
    ap.add_argument("--models", default=",".join(MODELS), help="a subset of mlp,cnn,resnet18")
    ap.add_argument("--budget-seconds", type=float, default=420.0, help="the whole run's time (0: no sizing)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the test's)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--cell", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cell:
        run_cell(json.loads(args.cell))
        return
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    models = [m for m in args.models.split(",") if m]
    if set(models) - set(MODELS) or not models:
        ap.error(f"--models: a subset of {','.join(MODELS)}")
    config = study_config()
    nets = {"mlp": (config["model"]["width"], config["model"]["depth"]),
            "cnn": (args.cnn_width, args.cnn_depth), "resnet18": (args.resnet_width, 0)}
    asked = {"mlp": args.universes, "cnn": args.cnn_universes, "resnet18": args.resnet_universes}
    methods = {m: ["loop", "packed", "shared"] if m == "mlp" else ["loop", "shared"] for m in models}
    overheads: list[float] = []
    notes: list[str] = []
    info: dict[str, Any] = {}
    cells: dict[tuple[str, str], dict] = {}
    t_run = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_run:5.0f} s] {msg}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="gpu_universes") as tmp:
        for mi, model in enumerate(models):
            width, depth = nets[model]
            base = {"model": model, "device": args.device, "threads": args.threads, "epochs": args.epochs,
                    "images": args.images, "width": width, "depth": depth, "per_device": args.per_device,
                    "max_stack": args.max_stack, "draw": asked[model]}
            deadline = None
            if args.budget_seconds > 0:
                overhead = sum(overheads) / len(overheads) if overheads else (8.0 if args.device == "cuda" else 4.0)
                left = args.budget_seconds - (time.perf_counter() - t_run)
                usable = left - overhead * sum(len(methods[m]) for m in models[mi:])
                share = usable * WEIGHTS[model] / sum(WEIGHTS[m] for m in models[mi:])
                deadline = max(1.0, share / FACTORS[model])
            spec = {**base, "method": "loop", "n": asked[model], "deadline": deadline, "out": f"{tmp}/{model}-loop.json"}
            res, wall, err = call_cell(spec, timeout=(3 * deadline + 300) if deadline else 24 * 3600)
            if res is not None and res.get("no_cuda"):
                print("no CUDA device here: nothing to measure (--device cpu runs it on the CPU)")
                return
            if res is None:
                log(f"{NAMES[model]} loop failed: {err}")
                notes.append(f"{NAMES[model]}: the loop failed ({err.strip().splitlines()[-1] if err.strip() else '?'})")
                continue
            info.setdefault("torch", res["torch"])
            info.setdefault("gpu", res.get("gpu"))
            info.setdefault("cuda", res.get("cuda"))
            done = len(res["times"])
            k = min(args.per_device, done)
            n = done if done < args.per_device else done - done % args.per_device
            loop_s = res["times"][n - 1]
            overheads.append(wall - res["times"][-1])
            peaks = [p for p in res["peak_mb"][:n] if p is not None]
            cells[model, "loop"] = {"seconds": loop_s, "epochs": sum(res["epochs_run"][:n]),
                                    "diverged": res["status"][:n].count("diverged"),
                                    "peak": fmt_mb(max(peaks) if peaks else None),
                                    "peak_mb": max(peaks) if peaks else None,
                                    "reserved_mb": max(res["reserved_mb"][:n], default=None)}
            log(f"{NAMES[model]} loop: {done} of {asked[model]} universes in {res['times'][-1]:.1f} s"
                + (f" (deadline {deadline:.0f} s)" if deadline else "") + f"; the methods train the first {n}")
            if deadline is not None or n < asked[model]:
                notes.append(f"{NAMES[model]}: {n} of the {asked[model]} universes asked for"
                             + (f" (its loop was given {deadline:.0f} s of the {args.budget_seconds:.0f} s budget and "
                                f"trained {done})" if deadline is not None else ""))
            for method in methods[model][1:]:
                spec = {**base, "method": method, "n": n, "per_device": k, "out": f"{tmp}/{model}-{method}.json"}
                res, wall, err = call_cell(spec, timeout=3 * loop_s + 300)
                if res is None:
                    log(f"{NAMES[model]} {method} failed: {err}")
                    cells[model, method] = {"failed": err.strip().splitlines()[-1] if err.strip() else "?"}
                    continue
                overheads.append(wall - res["seconds"])
                cell = {"seconds": res["seconds"], "epochs": sum(res["epochs_run"]),
                        "diverged": res["status"].count("diverged")}
                if method == "packed":
                    cell.update(peak=fmt_mb(res["peak_mb"]), peak_mb=res["peak_mb"], stacks=res["stacks"],
                                reserved_mb=res["reserved_mb"])
                else:
                    lanes = [p for p in res["lane_peak_mb"] if p is not None]
                    cell.update(k=res["k"], lane_peak_mb=res["lane_peak_mb"], lane_reserved_mb=res["lane_reserved_mb"],
                                peak=f"sum {sum(lanes):.0f} / max {max(lanes):.0f}" if lanes else "-")
                cells[model, method] = cell
                log(f"{NAMES[model]} {method}: {n} universes in {res['seconds']:.1f} s")
            cells[model, "n"] = {"n": n, "k": k}
    total = time.perf_counter() - t_run

    device = (f"{info.get('gpu')} (CUDA {info.get('cuda')})" if args.device == "cuda" else machine())
    print(f"{datetime.date.today().isoformat()}, {device}, torch {info.get('torch', '?')}, commit {commit()}; "
          f"{args.epochs} epoch(s) per universe, {args.threads} thread(s) per process, "
          f"whole run {total:.0f} s (budget {args.budget_seconds:.0f} s)\n")
    print("| model | universes | method | seconds | universes/h | speed-up | peak GPU MB |")
    print("|---|---:|---|---:|---:|---:|---|")
    rows = []
    for model in models:
        if (model, "loop") not in cells:
            continue
        n, k = cells[model, "n"]["n"], cells[model, "n"]["k"]
        width, depth = nets[model]
        label = {"mlp": f"{NAMES[model]} ({width}x{depth})", "cnn": f"{NAMES[model]} (width {width}, depth {depth})",
                 "resnet18": f"{NAMES[model]} (width {width})"}[model]
        loop_s = cells[model, "loop"]["seconds"]
        for method in ("loop", "packed", "shared"):
            name = f"shared {k}" if method == "shared" else method
            cell = cells.get((model, method))
            if method == "packed" and model != "mlp":
                print(f"| {label} | {n} | {name} | n/a | n/a | n/a | n/a |")
                continue
            if cell is None:
                continue
            if "failed" in cell:
                print(f"| {label} | {n} | {name} | failed | - | - | - |")
                notes.append(f"{label} {name} failed: {cell['failed']}")
            else:
                s = cell["seconds"]
                print(f"| {label} | {n} | {name} | {s:.1f} | {3600 * n / s:.0f} | {loop_s / s:.2f}x | {cell['peak']} |")
            rows.append({"model": model, "label": label, "universes": n, "method": name, **cell})
        epochs = ", ".join(f"{m} {cells[model, m]['epochs']}" for m in methods[model]
                           if "epochs" in cells.get((model, m), {}))
        diverged = cells[model, "loop"]["diverged"]
        notes.append(f"{label}: epochs run (all universes; a diverged one stops early): {epochs}; "
                     f"{diverged} of {n} diverged in the loop")
    if any(m != "mlp" for m in models):
        notes.append("packed: multiverse.packed stacks MLPs only (n/a for the CNN and the ResNet)")
    if args.device == "cuda":
        notes.append("peak GPU MB: torch.cuda.max_memory_allocated, the largest over a process's universes; "
                     "shared k: the sum over its k lanes and the largest lane (each process's CUDA context comes on top)")
    print()
    for note in notes:
        print(f"- {note}")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "date": datetime.date.today().isoformat(),
                                         "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                                         "info": info, "seconds": total, "rows": rows, "notes": notes}, indent=1) + "\n")


if __name__ == "__main__":
    main()
