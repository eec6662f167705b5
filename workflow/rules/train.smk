rule train:
    input:
        design=f"{OUT}/design/round_{{round}}.json",
        data=f"{OUT}/data/dataset.npz",
    output:
        models=shard_files("model.pt"),
        records=shard_files("train.json"),
    log:
        f"{OUT}/logs/train/r{{round}}_s{{shard}}.log",
    benchmark:
        f"{OUT}/benchmark/train/r{{round}}_s{{shard}}.tsv"
    params:
        model=config["model"],
        training={k: config["training"].get(k) for k in ("epochs", "device")},
    threads: config["training"].get("threads", 1)
    retries: config["training"].get("retries", 1)
    conda:
        "../../envs/torch.yaml"
    script:
        "../../scripts/train.py"
