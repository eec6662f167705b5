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
        training={k: config["training"][k] for k in ("epochs", "device", "base_batch")},
        seed=config["seed"],
    threads: config["training"]["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
        runtime=config["training"]["runtime"],
        gpu=1 if config["training"]["device"] == "cuda" else 0,
    retries: config["training"]["retries"]
    conda:
        "../../envs/torch.yaml"
    script:
        "../../scripts/train.py"
