"""Rule prepare_data: the stratified, seeded split of the dataset (and its OOD copy)."""
from multiverse.data import prepare_data
from multiverse.runtime import step_logger

log = step_logger(snakemake.log[0])
p = snakemake.params
arrays = prepare_data(p.dataset, p.split, p.seed, snakemake.output[0], p.source, p.ood)
log.info("split sizes: %s", {k: len(v) for k, v in arrays.items() if k.startswith("y_")})
