rule train:
    input:
        design=f"{OUT}/design/round_{{round}}.json",
        data=f"{OUT}/data/dataset.npz",
    output:
        models=shard_files("model.pt"),
        records=shard_files("train.json"),
    log:
        f"{OUT}/logs/train/r{{round}}_s{{shard}}_seed{{replicate}}.log",
    benchmark:
        f"{OUT}/benchmark/train/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
    params:
        model=config["model"],
        training={k: config["training"].get(k) for k in ("epochs", "device", "base_batch")},
        seed=config["seed"],
    threads: config["training"].get("threads", 1)
    resources:
        mem_mb=config["training"].get("mem_mb", 2000),
        runtime=config["training"].get("runtime", 30),
        gpu=1 if config["training"].get("device") == "cuda" else 0,
    retries: config["training"].get("retries", 1)
    conda:
        "../../envs/torch.yaml"
    script:
        "../../scripts/train.py"
