"""Where the report rule's time goes, and what its workers save.

    .venv/bin/python benchmarks/report_time.py [--study default] [--config config/config.yaml]
        [--workers 1,2] [--no-profile]

First the rule's whole work (:func:`multiverse.report.build_report`: the analysis, every
figure and the page) on ``results/<study>/multiverse.parquet``, in a fresh Python process
per ``--workers`` setting (imports included, as the rule runs it: torch on one thread,
the workers forked processes, :func:`multiverse.runtime.fork_map`), its wall seconds.
Then :func:`multiverse.report_analysis.analyse` alone in one process under cProfile, a table of
the cumulative seconds of its main parts: the GP fits, the joint posterior samples, the
Sobol indices, the design-based answers' predictions, and each claim type's analysis.
Parts overlap (a claim's analysis draws joint samples), so they do not add up. Issue 32
asks for the report rule in 30 s on 2 cores.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (label, file suffix, function name) of the parts the table reports.
PARTS = [
    ("whole analysis (report_analysis.analyse)", "multiverse/report_analysis.py", "analyse"),
    ("GP fits (gp.fit_gp)", "multiverse/gp.py", "fit_gp"),
    ("joint posterior samples (gp.joint_samples)", "multiverse/gp.py", "joint_samples"),
    ("Sobol indices (sensitivity.sobol_indices)", "multiverse/sensitivity.py", "sobol_indices"),
    ("LOO diagnostics (gp.loo_diagnostics)", "multiverse/gp.py", "loo_diagnostics"),
    ("design-based predictions (inference.Drawn.predictions)", "multiverse/inference.py", "predictions"),
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
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the profiled analysis")
    ap.add_argument("--workers", default="1,2", help="worker processes of the timed whole report, comma-separated")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--build-once", type=int, metavar="WORKERS", help=argparse.SUPPRESS)
    args = ap.parse_args()
    table = ROOT / "results" / args.study / "multiverse.parquet"
    if args.build_once is not None:
        return build_once(args.config, table, args.build_once)
    walls = []
    for w in (int(v) for v in args.workers.split(",") if v):
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--config", args.config, "--study", args.study,
                        "--build-once", str(w)], check=True, capture_output=True)
        walls.append({"workers": w, "wall seconds (process, imports included)": round(time.perf_counter() - start, 1)})
    if walls:
        import pandas as pd

        print(f"build_report on results/{args.study}, fresh process each:")
        print(pd.DataFrame(walls).to_markdown(index=False))
        print()
    if args.no_profile:
        return

    from multiverse.runtime import set_threads

    set_threads(args.threads)
    import pandas as pd

    from multiverse import report_analysis as R
    from multiverse.spec import load_config, with_defaults

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
    print(f"report_analysis.analyse on results/{args.study} ({len(df)} runs), one process, {args.threads} torch thread(s): {wall:.1f} s "
          "(cProfile on; parts overlap)")
    print(pd.DataFrame(rows).to_markdown(index=False))


def build_once(config_path: str, table: Path, workers: int) -> None:
    """The rule's work once, as scripts/report.py runs it, into a scratch folder."""
    import tempfile

    from multiverse.runtime import set_threads

    set_threads(1)
    from multiverse.spec import load_config, report_metrics, with_defaults
    from multiverse.report import build_report

    config = with_defaults(load_config(config_path))
    names = [c["name"] for c in config.get("claims", [])]
    with tempfile.TemporaryDirectory() as d:
        out = {"claims_json": f"{d}/claims.json", "claims_csv": f"{d}/claims.csv", "claims_figure": f"{d}/claims.png",
               "outcomes": f"{d}/outcomes.png", "html": f"{d}/report.html",
               **{k: {m: f"{d}/{k}_{m}.png" for m in report_metrics(config)} for k in ("maps", "curves", "sobol", "loo")},
               "claim_figures": {n: f"{d}/claim_{n}.png" for n in names},
               "where_figures": {n: f"{d}/claim_{n}_where.png" for n in names}}
        build_report(str(table), config, out, workers=workers)


if __name__ == "__main__":
    main()
