"""Rule metrics: accuracy, loss, generalisation gap (and OOD accuracy, sharpness) of every universe of one shard."""
from multiverse.runtime import set_threads, step_logger

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads)

from multiverse.metrics import metrics_shard  # noqa: E402  (torch after the thread settings)

metrics_shard(
    snakemake.input.data, snakemake.input.models, snakemake.input.records, snakemake.params.model,
    snakemake.output, log, snakemake.params.sharpness,
)
