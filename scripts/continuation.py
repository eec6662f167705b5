"""Rule continuation: a design round's continuation draw (multiverse.fidelity.continuation_round):
each universe's probability of being continued to full fidelity, stated from its
low-fidelity run before any full-fidelity outcome exists, and the draw."""
from multiverse.fidelity import continuation_round
from multiverse.runtime import read_json, step_logger, write_json

log = step_logger(snakemake.log[0])
state = continuation_round(read_json(snakemake.input.design), [read_json(p) for p in snakemake.input.records],
                           snakemake.params.fidelity, snakemake.params.seed)
write_json(snakemake.output[0], state)
n = len(state["universes"])
log.info("round %d: %d of %d universes continued (expected %.1f beyond the %d final at the low fidelity)",
         state["round"], sum(u["continued"] for u in state["universes"]), n, state["expected"],
         sum(u["final"] for u in state["universes"]))
