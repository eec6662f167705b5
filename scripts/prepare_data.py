"""Rule prepare_data: the stratified, seeded split of the dataset (and its OOD copy), or
the user's data entry point, run once (multiverse.entrypoint.prepare_user_data)."""
from multiverse.runtime import step_logger

log = step_logger(snakemake.log[0])
p = snakemake.params
if "entrypoint" in snakemake.params.keys():
    from multiverse.entrypoint import prepare_user_data

    data = prepare_user_data(p.entrypoint, p.pythonpath, p.seed, p.source, snakemake.output[0])
    log.info("%s returned a %s", p.entrypoint, type(data).__name__)
else:
    from multiverse.data import prepare_data

    arrays = prepare_data(p.dataset, p.split, p.seed, snakemake.output[0], p.source, p.ood)
    log.info("split sizes: %s", {k: len(v) for k, v in arrays.items() if k.startswith("y_")})
