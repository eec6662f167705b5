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
        sharpness=config.get("metrics", {}).get("sharpness"),
    threads: config["training"].get("threads", 1)
    resources:
        mem_mb=config["training"].get("mem_mb", 2000),
        runtime=config["training"].get("runtime", 30),
    conda:
        "../../envs/torch.yaml"
    script:
        "../../scripts/metrics.py"
