"""The default study's verdicts under packing against today's loop, beside the loop's own
verdicts under another BLAS code path: how far each change of arithmetic moves them.

    .venv/bin/python benchmarks/packed_verdicts.py [--runs off,auto,off-compatible] [--cores 2]

Each run is the real workflow (``snakemake --cores N``) in a scratch copy of the checkout
(the repo's results/ are not touched):

- ``off``: the default study as configured (``training.pack: off``, today's loop);
- ``auto``: the same with ``training.pack: auto`` (:mod:`multiverse.packed`);
- ``off-compatible``: today's loop again, under ``MKL_CBWR=COMPATIBLE``, MKL's conditional
  numerical reproducibility path. Its float32 matrix products round differently from this
  CPU's default path, as another CPU's would: the loop's own reproducibility across machines.

It prints, per run, how many universes' test accuracy differs from ``off``'s, and per claim
and condition each run's badge, design-based estimate, 95% interval and P(holds), with whether
the run agrees with ``off`` (:func:`agreement`: same badge; or intervals that overlap and
badges that are not opposite, "compatible"; or "opposite"/"disjoint").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

ROOT = Path(__file__).resolve().parents[1]

#: name -> (config overlay, extra environment) of each run.
RUNS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "off": ({}, {}),
    "auto": ({"training": {"pack": "auto"}}, {}),
    "off-compatible": ({}, {"MKL_CBWR": "COMPATIBLE"}),
}


def run_study(dest: Path, name: str, cores: int = 2) -> Path:
    """The default study run to the end in ``dest`` (a scratch copy of the checkout:
    :func:`default_study.run_workflow`) as run ``name`` of :data:`RUNS`; returns its
    results folder."""
    import yaml

    from default_study import run_workflow

    overlay, env = RUNS[name]
    study = f"verdicts_{name.replace('-', '_')}"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    run_workflow(dest, ["--cores", str(cores), "--configfile", "overlay.yaml", "--config", f"study={study}"], env)
    return dest / "results" / study


def readings(results: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(claim, condition) -> the design-based reading and badge of every claim of a
    finished study (``report/claims.json``): the marginal reading is the claim's own
    verdict, each other condition's its own."""
    out = {}
    for c in json.loads((results / "report" / "claims.json").read_text())["claims"]:
        out[(c["name"], "marginal")] = {**(c.get("design") or c.get("gp") or {}), "badge": c["verdict"],
                                        "claim": c["claim"]}
        for cond in c.get("conditions") or []:
            if cond["label"] != "marginal":
                out[(c["name"], cond["label"])] = {**(cond.get("design") or cond.get("gp") or {}),
                                                   "badge": cond["verdict"], "claim": c["claim"]}
    return out


def agreement(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    """How reading ``b`` agrees with ``a``: ``same`` badge; ``compatible`` (different badges,
    not opposite, intervals overlapping); else ``opposite`` badges or ``disjoint`` intervals."""
    from multiverse.claims import verdict
    from multiverse.spec import claims as spec_claims

    if a["badge"] == b["badge"]:
        return "same"
    if verdict.opposite(a["badge"], b["badge"], spec_claims.relation(a["claim"])):
        return "opposite"
    if a["effect_hi"] < b["effect_lo"] or b["effect_hi"] < a["effect_lo"]:
        return "disjoint"
    return "compatible"


def differing_universes(a: Path, b: Path, metric: str = "test_acc") -> tuple[int, int]:
    """How many universes' ``metric`` differs at all between two runs, and by more than 0.01."""
    import pandas as pd

    x = pd.read_parquet(a / "multiverse.parquet").set_index("id")[metric]
    y = pd.read_parquet(b / "multiverse.parquet").set_index("id")[metric].reindex(x.index)
    d = (x - y).abs()
    return int((d > 0).sum()), int((d > 0.01).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="off,auto,off-compatible")
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()
    names = args.runs.split(",")
    assert names[0] == "off", "the first run is the reference: off"
    sys.path.insert(0, str(ROOT / "scripts"))
    with tempfile.TemporaryDirectory() as tmp:
        results = {n: run_study(Path(tmp) / n, n, args.cores) for n in names}
        reads = {n: readings(r) for n, r in results.items()}
        print("| run | universes whose test_acc differs from off's | by more than 0.01 |\n|---|---:|---:|")
        for n in names[1:]:
            print(f"| {n} | {' | '.join(map(str, differing_universes(results['off'], results[n])))} |")
    print()
    print("| claim | condition | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names))
    for key, ref in reads["off"].items():
        cells = []
        for n in names:
            r = reads[n][key]
            cell = f"{r['badge']} {r['effect']:+.3f} [{r['effect_lo']:+.3f}, {r['effect_hi']:+.3f}] P {r['p_holds']:.3f}"
            cells.append(cell if n == "off" else f"{cell} ({agreement(ref, r)})")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
