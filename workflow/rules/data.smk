rule prepare_data:
    output:
        f"{OUT}/data/dataset.npz",
    log:
        f"{OUT}/logs/prepare_data.log",
    params:
        dataset=config["data"]["dataset"],
        source=config["data"].get("path"),
        split=config["data"]["split"],
        seed=config["seed"],
        ood=config["data"].get("ood"),
    conda:
        "../../envs/data.yaml"
    script:
        "../../scripts/prepare_data.py"
