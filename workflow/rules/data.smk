rule prepare_data:
    output:
        OUT + "/data/dataset.npz",
    log:
        OUT + "/logs/prepare_data.log",
    params:
        dataset=config["data"]["dataset"],
        split=config["data"]["split"],
        seed=config["seed"],
    conda:
        "../../envs/data.yaml"
    script:
        "../../scripts/prepare_data.py"
