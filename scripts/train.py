"""Rule train: every universe of one shard of a design round, one after another, with
the built-in trainer (multiverse.train.train_shard) or the user's own training
(multiverse.entrypoint.train_user_shard), in a worker that the job guards
(multiverse.failures.guard): a universe that kills its process or runs past
training.timeout is recorded as failed and the shard goes on; SIGTERM saves and exits.
With training.per_device k, k lanes of the shard's universes train side by side, each
in its own guarded process sharing the job's device (multiverse.failures.guard_lanes)."""
import sys

from multiverse.failures import ShardFailed, guard_lanes
from multiverse.runtime import read_json, set_threads, step_logger
from multiverse.shard import shard_universes

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads)

w = snakemake.wildcards
universes = shard_universes(read_json(snakemake.input.design), w.shard, w.replicate, snakemake.params.seed)
# not params: changing how often to retry, to checkpoint or how long to wait must not rerun finished universes
retries = snakemake.config["training"]["retries"]
checkpoint_every = snakemake.config["training"]["checkpoint_every"]
timeout = snakemake.config["training"].get("timeout")
# universes at once, each lane with its share of the job's cores (Snakemake may have scaled them down)
lanes = min(snakemake.config["training"].get("per_device", 1), len(universes)) or 1
lane_threads = max(1, snakemake.threads // lanes)
if "models" in snakemake.output.keys():
    from multiverse.train import clear_runs, train_shard  # noqa: E402  (torch after the thread settings)

    def work(lane):
        set_threads(lane_threads)
        train_shard(
            snakemake.input.data, universes, snakemake.params.model, snakemake.params.training,
            snakemake.output.models, snakemake.output.records, log, retries=retries, checkpoint_every=checkpoint_every,
            lane=(lane, lanes),
            # design.fidelity: each universe's low fidelity, and the state a continuation resumes from
            fidelity=snakemake.params.get("fidelity"), resume_paths=snakemake.output.get("resume"),
        )
else:
    from multiverse.entrypoint import clear_runs, train_user_shard

    def work(lane):
        set_threads(lane_threads)
        train_user_shard(
            universes, snakemake.params.training, snakemake.params.metrics, snakemake.output.records, log,
            data_path=snakemake.input.get("data"), retries=retries, lane=(lane, lanes),
            fidelity=snakemake.params.get("fidelity"),
        )
try:
    guard_lanes([lambda lane=lane: work(lane) for lane in range(lanes)], log, retries=retries, timeout=timeout)
    if lanes > 1:  # every lane is done: the shard's run/ files go (one lane alone clears its own)
        clear_runs(snakemake.output.records)
except ShardFailed as err:
    log.error("%s", err)
    sys.exit(f"train job failed: {err}")
