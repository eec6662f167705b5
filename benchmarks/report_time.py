"""Where the report rule's time goes: the claims analysis of a finished study, by part.

    .venv/bin/python benchmarks/report_time.py [--study default] [--config config/config.yaml]
        [--threads 2]

Runs :func:`multiverse.report.analyse` (everything the report computes; the figures and
the page are the rest of the rule) on ``results/<study>/multiverse.parquet`` under
cProfile, and prints a table of the cumulative seconds of its main parts: the GP fits,
the joint posterior samples, the Sobol indices, the design-based answers' predictions,
and each claim type's analysis. Parts overlap (a claim's analysis draws joint samples),
so they do not add up. Issue 32 asks for the report rule in 30 s on 2 cores; this says
what to make faster first.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (label, file suffix, function name) of the parts the table reports.
PARTS = [
    ("whole analysis (report.analyse)", "multiverse/report.py", "analyse"),
    ("GP fits (gp.fit_gp)", "multiverse/gp.py", "fit_gp"),
    ("joint posterior samples (gp.joint_samples)", "multiverse/gp.py", "joint_samples"),
    ("Sobol indices (sensitivity.sobol_indices)", "multiverse/sensitivity.py", "sobol_indices"),
    ("LOO diagnostics (gp.loo_diagnostics)", "multiverse/gp.py", "loo_diagnostics"),
    ("design-based predictions (design_based.predictions)", "multiverse/design_based.py", "predictions"),
    ("comparison claims", "multiverse/claims/comparison.py", "analyse"),
    ("trend claims", "multiverse/claims/trend.py", "analyse"),
    ("correlation claims", "multiverse/claims/correlation.py", "analyse"),
    ("  of which the two-outcome model's fit", "multiverse/claims/correlation.py", "fit_joint"),
    ("expected-best claims", "multiverse/claims/expected_best.py", "analyse"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", default="default")
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    from multiverse.runtime import set_threads

    set_threads(args.threads)
    import pandas as pd

    from multiverse import report as R
    from multiverse.config import load_config, with_defaults

    config = with_defaults(load_config(args.config))
    df = pd.read_parquet(ROOT / "results" / args.study / "multiverse.parquet")
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    R.analyse(df, config)
    profile.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    rows = []
    for label, suffix, name in PARTS:
        hits = [(v[1], v[3]) for (file, _, fn), v in stats.items() if file.endswith(suffix) and fn == name]
        calls, seconds = sum(c for c, _ in hits), max((s for _, s in hits), default=0.0)
        rows.append({"part": label, "calls": calls, "seconds": round(seconds, 1),
                     "share of the analysis": f"{seconds / wall:.0%}"})
    print(f"report.analyse on results/{args.study} ({len(df)} runs), {args.threads} threads: {wall:.1f} s "
          "(cProfile on; parts overlap)")
    print(pd.DataFrame(rows).to_markdown(index=False))


if __name__ == "__main__":
    main()
