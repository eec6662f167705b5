"""Rule design: the universes of one design round, from every earlier round's results."""
from multiverse.design import design_state
from multiverse.runtime import read_json, set_threads, step_logger, versions, write_json

log = step_logger(snakemake.log[0])
set_threads(snakemake.threads, load_torch=False)  # a GP round loads torch itself; a Sobol round needs none
p = snakemake.params
state = design_state(
    int(snakemake.wildcards.round), p.sizes, p.shard_size, p.space, p.design, p.seed,
    [read_json(f) for f in snakemake.input],
    versions(["torch", "botorch", "gpytorch"]),
)
write_json(snakemake.output[0], state)
log.info("round %s: %d universes by %s", state["round"], len(state["universes"]), state["strategy"])
