# The data step: the built-in dataset's split (data.dataset), or a user's data entry
# point (data.entrypoint) run once; none when the user's training loads its own data.
if DATA:

    rule prepare_data:
        output:
            DATA,
        log:
            f"{OUT}/logs/prepare_data.log",
        params:
            dataset=config["data"].get("dataset"),
            source=config["data"].get("path"),
            split=config["data"].get("split"),
            seed=config["seed"],
            ood=config["data"].get("ood"),
            # only with one, so that a built-in study's finished data step stays finished
            **({"entrypoint": config["data"]["entrypoint"], "pythonpath": config["training"].get("pythonpath", [])}
               if config["data"].get("entrypoint") else {}),
        resources:
            mem_mb=RESOURCES["prepare_data"]["mem_mb"],
            runtime=RESOURCES["prepare_data"]["runtime"],
        conda:
            env_file("data.yaml")
        script:
            step("prepare_data.py")
