"""Rule train: every universe of one shard of a design round, one after another, with
the built-in trainer (multiverse.train.train_shard) or the user's own training
(multiverse.entrypoint.train_user_shard)."""
from multiverse.ids import with_replicate
from multiverse.runtime import read_json, set_threads, step_logger

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads)

w = snakemake.wildcards
universes = [
    with_replicate(u, int(w.replicate), snakemake.params.seed)
    for u in read_json(snakemake.input.design)["universes"]
    if u["shard"] == int(w.shard)
]
# not params: changing how often to retry or to checkpoint must not rerun finished universes
retries = snakemake.config["training"]["retries"]
checkpoint_every = snakemake.config["training"]["checkpoint_every"]
if "models" in snakemake.output.keys():
    from multiverse.train import train_shard  # noqa: E402  (torch after the thread settings)

    train_shard(
        snakemake.input.data, universes, snakemake.params.model, snakemake.params.training,
        snakemake.output.models, snakemake.output.records, log, retries=retries, checkpoint_every=checkpoint_every,
    )
else:
    from multiverse.entrypoint import train_user_shard

    train_user_shard(
        universes, snakemake.params.training, snakemake.params.metrics, snakemake.output.records, log,
        data_path=snakemake.input.get("data"), retries=retries,
    )
