rule design:
    input:
        design_inputs,
    output:
        f"{OUT}/design/round_{{round}}.json",
    log:
        f"{OUT}/logs/design/round_{{round}}.log",
    benchmark:
        f"{OUT}/benchmark/design/round_{{round}}.tsv"
    params:
        space=config["space"],
        # only what round r uses (multiverse.spec.strategies.round_settings): editing a GP setting
        # reruns the GP rounds, never round 0's Sobol universes; adding rounds reruns nothing
        design=lambda wildcards: round_settings(config["design"], int(wildcards.round), config.get("claims", [])),
        sizes=lambda wildcards: round_sizes(config)[: int(wildcards.round) + 1],
        shard_size=config["training"]["shard_size"],
        seed=config["design"].get("seed", config["seed"]),
    threads: design_threads
    resources:
        mem_mb=RESOURCES["design"]["mem_mb"],
        runtime=RESOURCES["design"]["runtime"],
    conda:
        env_file("design.yaml")
    script:
        step("design.py")
