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
        design=config["design"],
        sizes=round_sizes(config),
        shard_size=config["training"]["shard_size"],
        seed=config["seed"],
    threads: config["design"].get("threads", 2)
    conda:
        "../../envs/design.yaml"
    script:
        "../../scripts/design.py"
