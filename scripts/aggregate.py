"""Rule aggregate: the multiverse table (parquet and CSV)."""
import sys

from multiverse.aggregate import aggregate
from multiverse.runtime import OlderResults, step_logger

log = step_logger(snakemake.log[0])
try:
    df = aggregate(
        snakemake.input.metrics, snakemake.input.designs, snakemake.params.space, snakemake.params.config_hash,
        snakemake.output.parquet, snakemake.output.csv, metrics=snakemake.params.get("metrics"),
        low_paths=snakemake.input.get("low"), continuation_paths=snakemake.input.get("continuations"),
    )
except OlderResults as err:  # a clear message, not a traceback
    log.error("%s", err)
    sys.exit(str(err))
log.info("%d universes, statuses %s", len(df), df["status"].value_counts().to_dict())
