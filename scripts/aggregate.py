"""Rule aggregate: the multiverse table (parquet and CSV)."""
from multiverse.aggregate import aggregate
from multiverse.runtime import step_logger

log = step_logger(snakemake.log[0])
df = aggregate(
    snakemake.input.metrics, snakemake.input.designs, snakemake.params.space, snakemake.params.config_hash,
    snakemake.output.parquet, snakemake.output.csv, metrics=snakemake.params.get("metrics"),
)
log.info("%d universes, statuses %s", len(df), df["status"].value_counts().to_dict())
