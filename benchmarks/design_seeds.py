"""Stability across designs: the same study under several design seeds (``design.seed``),
each training the universes its own design picks, as two machines whose floating point
moves a design's picks do. Do the answers' intervals overlap, and does the spread of the
estimates match the intervals' width?

    .venv/bin/python benchmarks/design_seeds.py study [--seeds 10] [--cores 2] [--overlay FILE]
    .venv/bin/python benchmarks/design_seeds.py draws results/benchmarks/calibration/.../draws.csv

``study`` runs the real workflow (``config/config.yaml``, plus ``--overlay``) once per
design seed in a scratch copy of the checkout and reads each run's ``claims.json``;
``draws`` reads a calibration benchmark's per-draw rows (each draw is a design seed on a
grid of real trainings). Prints per claim (and trend condition), for the design-based and
the model-based (GP) answers: the mean estimate, the spread (sd) of the estimates across
seeds, the mean implied sd (interval width / 3.92) and how many pairs of intervals
overlap.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))


def stability(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per claim and answer from ``rows`` (columns ``claim``, ``answer``, ``seed``,
    ``effect``, ``lo``, ``hi``): the spread of the estimates, the implied sd and the
    overlapping pairs of intervals."""
    out = []
    for (claim, answer), d in rows.groupby(["claim", "answer"], sort=False):
        d = d[np.isfinite(d["effect"]) & np.isfinite(d["lo"]) & np.isfinite(d["hi"])]
        if len(d) < 2:
            continue
        pairs = list(itertools.combinations(range(len(d)), 2))
        lo, hi = d["lo"].to_numpy(), d["hi"].to_numpy()
        overlap = sum(lo[i] <= hi[j] and lo[j] <= hi[i] for i, j in pairs)
        out.append({"claim": claim, "answer": answer, "seeds": len(d), "mean estimate": f"{d['effect'].mean():+.3f}",
                    "spread (sd)": f"{d['effect'].std(ddof=1):.3f}",
                    "implied sd (width / 3.92)": f"{((d['hi'] - d['lo']) / 3.92).mean():.3f}",
                    "overlapping pairs": f"{overlap}/{len(pairs)} = {overlap / len(pairs):.2f}"})
    return pd.DataFrame(out)


def rows_from_claims(claims: list[dict], seed: int) -> list[dict]:
    """Per claim and condition, the design-based and GP answers of one run's claims.json."""
    from multiverse.claims.contract import ClaimResult

    out = []
    for c in map(ClaimResult.from_dict, claims):
        for r in c.readings:
            name = c.name + ("" if r.label == "marginal" else f" ({r.label})")
            for answer, a in (("design-based", r.design or {}), ("GP", r.gp)):
                val = {k: (np.nan if a.get(k) is None else a[k]) for k in ("effect", "effect_lo", "effect_hi")}
                out.append({"claim": name, "answer": answer, "seed": seed, "effect": val["effect"],
                            "lo": val["effect_lo"], "hi": val["effect_hi"], "verdict": a.get("verdict")})
    return out


def run_study(seeds: int, cores: int, overlay: str | None, out: str | None = None) -> pd.DataFrame:
    """The default study (plus ``overlay``) under design seeds 1..``seeds``, in a scratch copy;
    the per-seed answers go to ``out`` after each seed (a killed run keeps what it did), with
    each run's ``report`` rule time (its Snakemake benchmark file) in ``report_s``."""
    import yaml

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "multiverse"
        shutil.copytree(ROOT, work, ignore=shutil.ignore_patterns(".git", ".venv", "results", ".snakemake", "__pycache__"))
        base = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        extra = yaml.safe_load(Path(overlay).read_text()) if overlay else {}
        for key, value in extra.items():
            base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
        for s in range(1, seeds + 1):
            cfg = {**base, "study": f"design_seed_{s}", "design": {**base["design"], "seed": s}}
            path = work / f"seed_{s}.yaml"
            path.write_text(yaml.safe_dump(cfg, sort_keys=False))
            subprocess.run([sys.executable, "-m", "snakemake", "--cores", str(cores), "--configfile", str(path),
                            "--quiet"], cwd=work, check=True)
            res = work / "results" / f"design_seed_{s}"
            claims = json.loads((res / "report" / "claims.json").read_text())["claims"]
            report_s = float(pd.read_csv(res / "benchmark" / "report.tsv", sep="\t")["s"].iloc[0])
            rows += [{**r, "report_s": report_s} for r in rows_from_claims(claims, s)]
            if out:
                pd.DataFrame(rows).to_csv(out, index=False)
            print(f"  design seed {s}: done (report rule {report_s:.0f} s)", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def rows_from_draws(path: str) -> pd.DataFrame:
    """A calibration benchmark's draws.csv as per-seed answers."""
    d = pd.read_csv(path)
    parts = []
    for answer, p in (("design-based", "design"), ("GP", "gp")):
        parts.append(pd.DataFrame({"claim": d["grid"] + ": " + d["claim"], "answer": answer, "seed": d["draw"],
                                   "effect": d[f"{p}_effect"], "lo": d[f"{p}_lo"], "hi": d[f"{p}_hi"]}))
    return pd.concat(parts, ignore_index=True)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    st = sub.add_parser("study", help="run the workflow under several design seeds")
    st.add_argument("--seeds", type=int, default=10)
    st.add_argument("--cores", type=int, default=2)
    st.add_argument("--overlay", help="a config overlay merged over config/config.yaml")
    st.add_argument("--out", help="CSV of the per-seed answers")
    dr = sub.add_parser("draws", help="read a calibration benchmark's draws.csv")
    dr.add_argument("path")
    args = ap.parse_args(argv)
    rows = run_study(args.seeds, args.cores, args.overlay, args.out) if args.mode == "study" else rows_from_draws(args.path)
    if "report_s" in rows:
        t = rows.groupby("seed")["report_s"].first()
        print(f"report rule: median {t.median():.0f} s, max {t.max():.0f} s over {len(t)} runs\n")
    print(stability(rows).to_markdown(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
