rule design:
    input:
        previous_metrics,
    output:
        f"{OUT}/design/round_{{round}}.json",
    log:
        f"{OUT}/logs/design/round_{{round}}.log",
    benchmark:
        f"{OUT}/benchmark/design/round_{{round}}.tsv"
    params:
        space=config["space"],
        # round r depends on the rounds up to r only, so adding rounds reruns nothing
        design={k: v for k, v in config["design"].items() if k not in ("rounds", "threads")},
        sizes=lambda wildcards: round_sizes(config)[: int(wildcards.round) + 1],
        shard_size=config["training"]["shard_size"],
        seed=config["seed"],
    threads: config["design"]["threads"]
    resources:
        mem_mb=RESOURCES["design"]["mem_mb"],
        runtime=RESOURCES["design"]["runtime"],
    conda:
        "../../envs/design.yaml"
    script:
        "../../scripts/design.py"
