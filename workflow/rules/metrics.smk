rule metrics:
    input:
        data=f"{OUT}/data/dataset.npz",
        models=shard_files("model.pt"),
        records=shard_files("train.json"),
    output:
        shard_files("metrics.json"),
    log:
        f"{OUT}/logs/metrics/r{{round}}_s{{shard}}_seed{{replicate}}.log",
    benchmark:
        f"{OUT}/benchmark/metrics/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
    params:
        model=config["model"],
        sharpness=config["metrics"].get("sharpness"),
    threads: config["training"]["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
        runtime=config["training"]["runtime"],
    conda:
        "../../envs/torch.yaml"
    script:
        "../../scripts/metrics.py"
