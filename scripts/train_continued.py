"""Rule train_continued: one shard's universes at full fidelity, as the round's continuation
draw says (multiverse.train.train_continued_shard; a user's training:
multiverse.entrypoint.train_user_continued_shard): a continued universe resumes from its
low-fidelity training state, one not continued is recorded as such. Guarded as rule train
is (multiverse.failures.guard)."""
import sys

from multiverse.failures import ShardFailed, guard_lanes
from multiverse.runtime import read_json, set_threads, step_logger
from multiverse.shard import shard_universes

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads)

w = snakemake.wildcards
universes = shard_universes(read_json(snakemake.input.design), w.shard, w.replicate, snakemake.params.seed)
continuation = read_json(snakemake.input.continuation)
# not params: changing how often to retry or to checkpoint must not rerun finished universes
retries = snakemake.config["training"]["retries"]
timeout = snakemake.config["training"].get("timeout")

if "models" in snakemake.output.keys():
    from multiverse.train import train_continued_shard  # noqa: E402  (torch after the thread settings)

    def work():
        train_continued_shard(
            snakemake.input.data, universes, continuation, snakemake.params.model, snakemake.params.training,
            {"resume": snakemake.input.resume, "models": snakemake.input.low_models,
             "records": snakemake.input.low_records},
            snakemake.output.models, snakemake.output.records, log, retries=retries,
            checkpoint_every=snakemake.config["training"]["checkpoint_every"],
        )
else:
    from multiverse.entrypoint import train_user_continued_shard

    def work():
        train_user_continued_shard(
            universes, continuation, snakemake.params.training, snakemake.params.metrics, snakemake.input.low_records,
            snakemake.output.records, log, data_path=snakemake.input.get("data"), retries=retries,
        )


try:
    guard_lanes([work], log, retries=retries, timeout=timeout)
except ShardFailed as err:
    log.error("%s", err)
    sys.exit(f"train_continued job failed: {err}")
