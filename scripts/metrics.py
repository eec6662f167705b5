"""Rule metrics: accuracy, loss, generalisation gap (and OOD accuracy, sharpness) of every
universe of one shard (multiverse.metrics.metrics_shard), or the metrics a user's
training reported (multiverse.metrics.recorded_metrics_shard)."""
import sys

from multiverse.runtime import OlderResults, set_threads, step_logger

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads)

from multiverse.metrics import metrics_shard, recorded_metrics_shard  # noqa: E402

try:
    if "models" in snakemake.input.keys():
        metrics_shard(
            snakemake.input.data, snakemake.input.models, snakemake.input.records, snakemake.params.model,
            snakemake.output, log, snakemake.params.sharpness,
            # read here, not as a param: a changed device does not rerun finished metrics
            device=snakemake.config["training"].get("device", "cpu"),
        )
    else:
        recorded_metrics_shard(snakemake.input.records, snakemake.output, log)
except OlderResults as err:  # a clear message, not a traceback
    log.error("%s", err)
    sys.exit(str(err))
