"""Rule report: claim verdicts (claims.json, claims.csv) and the report's figures."""
from multiverse.runtime import set_threads, step_logger

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads)

from multiverse.report import build_report  # noqa: E402

o = snakemake.output
build_report(
    snakemake.input.table, snakemake.params.config, o.claims_json, o.claims_csv, o.claims_figure,
    o.outcomes, list(o.maps), list(o.curves),
)
