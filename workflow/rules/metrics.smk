# Each job measures one shard's universes: the built-in trainer's networks are evaluated
# (multiverse.metrics.metrics_shard); a user's training reported its own metrics, which
# are written in the same form (multiverse.metrics.recorded_metrics_shard).
rule metrics:
    input:
        **({"data": DATA, "models": shard_files("model.pt")} if BUILTIN else {}),
        records=shard_files("train.json"),
    output:
        shard_files("metrics.json"),
    log:
        f"{OUT}/logs/metrics/r{{round}}_s{{shard}}_seed{{replicate}}.log",
    benchmark:
        f"{OUT}/benchmark/metrics/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
    params:
        **({"model": config["model"], "sharpness": config["metrics"].get("sharpness")} if BUILTIN else {}),
    threads: config["training"]["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
        runtime=config["training"]["runtime"],
    conda:
        "../../envs/torch.yaml"
    script:
        "../../scripts/metrics.py"
