"""Rule report: claim verdicts (claims.json, claims.csv), the report's figures and the
standalone page report.html (multiverse.report.build_report). The rule's threads are
worker processes (most of its work is Python-bound), each with one torch thread."""
from multiverse.runtime import set_threads, step_logger

log = step_logger(snakemake.log[0])
set_threads(1)  # before torch loads; the workers are forked processes (multiverse.runtime.fork_map)

from multiverse.report import build_report  # noqa: E402

o = snakemake.output
build_report(snakemake.input.table, snakemake.params.config, {
    "claims_json": o.claims_json, "claims_csv": o.claims_csv, "claims_figure": o.claims_figure,
    "outcomes": o.outcomes, "html": o.html, **snakemake.params.figures,
}, workers=snakemake.threads)
