"""Rule export_mlflow (report.trackers: [mlflow]): the study as an MLflow experiment in its
own local file store, one run per universe and seed and one of the claims' verdicts
(multiverse.trackers.export_mlflow); the rule's summary names every run's id."""
import sys
from pathlib import Path

from multiverse.runtime import OlderResults, step_logger, write_json
from multiverse.trackers import export_mlflow

log = step_logger(snakemake.log[0])
p = snakemake.params
try:
    summary = export_mlflow(
        snakemake.input.table, snakemake.input.claims, snakemake.input.records, p.space, p.metrics,
        experiment=p.experiment, tracking_uri=Path(snakemake.output.store).resolve().as_uri(),
    )
except OlderResults as err:  # a clear message, not a traceback
    log.error("%s", err)
    sys.exit(str(err))
write_json(snakemake.output.summary, summary)
log.info("experiment %s (%s): %d runs, statuses %s, %d earlier runs replaced", summary["experiment"],
         summary["tracking_uri"], len(summary["runs"]), summary["statuses"], summary["replaced"])
