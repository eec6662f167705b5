# design.fidelity (multiverse.fidelity): every universe trained at a low fidelity (rule
# train, into its low/ folder), then per round the continuation draw (rule continuation),
# whose probabilities it writes in design/continue_{round}.json before any full-fidelity
# outcome exists, and per shard the continued universes trained on from their low-fidelity
# state (rule train_continued; those not continued are recorded as such) and measured
# (rule metrics_continued, rules/metrics.smk). All of it is the static DAG: `snakemake -n`
# lists every job. Raising design.fidelity.share reruns the draw and the continued shards,
# which keep the universes they continued before and train only the new ones.
if FIDELITY:

    rule continuation:
        input:
            design=f"{OUT}/design/round_{{round}}.json",
            # the low fidelity's records (its per-epoch history: the active score), every seed
            records=lambda wildcards: universe_files(f"{LOW}train.json", [int(wildcards.round)]),
            metrics=lambda wildcards: universe_files(f"{LOW}metrics.json", [int(wildcards.round)]),
        output:
            f"{OUT}/design/continue_{{round}}.json",
        log:
            f"{OUT}/logs/continuation/round_{{round}}.log",
        params:
            fidelity=continuation_settings(config),
            seed=config["design"].get("seed", config["seed"]),
        resources:
            mem_mb=RESOURCES["design"]["mem_mb"],
            runtime=RESOURCES["design"]["runtime"],
        conda:
            env_file("design.yaml")
        script:
            step("continuation.py")

    rule train_continued:
        input:
            design=f"{OUT}/design/round_{{round}}.json",
            continuation=f"{OUT}/design/continue_{{round}}.json",
            low_records=shard_files(f"{LOW}train.json"),
            **({"resume": shard_files(f"{LOW}resume.pt"), "low_models": shard_files(f"{LOW}model.pt")} if BUILTIN else {}),
            **({"data": DATA} if DATA else {}),
        output:
            **({"models": shard_files("model.pt")} if BUILTIN else {}),
            records=shard_files("train.json"),
        log:
            f"{OUT}/logs/train_continued/r{{round}}_s{{shard}}_seed{{replicate}}.log",
        benchmark:
            f"{OUT}/benchmark/train_continued/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
        params:
            **(
                {"model": config["model"],
                 "training": {k: config["training"][k] for k in ("epochs", "device", "base_batch")}}
                if BUILTIN
                else {
                    "training": {k: config["training"][k] for k in (TRAINER, "pythonpath", "device", "epochs")
                                 if k in config["training"]},
                    "metrics": METRICS,
                }
            ),
            seed=config["seed"],
        threads: config["training"]["threads"]
        resources:
            mem_mb=config["training"]["mem_mb"],
            runtime=config["training"]["runtime"],
            gpu=GPUS,
        group:
            continued_group
        retries: config["training"]["retries"]
        conda:
            user_env(config) or torch_env()
        script:
            step("train_continued.py")
