# Each job trains one shard of a design round under one seed (with design.fidelity, at the
# low fidelity, into each universe's low/ folder: rules/fidelity.smk continues a random subset): the built-in trainer
# (multiverse.train) writes each universe's weights and record; a user's training
# (training.entrypoint or training.command, multiverse.entrypoint) its record with its
# metrics, and keeps its own artefacts in the universe's run/ folder. With
# training.per_device k it trains k universes at once, each in its own process sharing
# the job's device (multiverse.failures.guard_lanes), and asks for k times the cores and
# memory of one universe (multiverse.spec.layout.train_job_size).
rule train:
    input:
        design=f"{OUT}/design/round_{{round}}.json",
        **({"data": DATA} if DATA else {}),
    output:
        **({"models": shard_files(f"{LOW}model.pt")} if BUILTIN else {}),
        records=shard_files(f"{LOW}train.json"),
        # design.fidelity: the training state each universe stopped in (rule train_continued resumes it)
        **({"resume": shard_files(f"{LOW}resume.pt")} if FIDELITY and BUILTIN else {}),
    log:
        f"{OUT}/logs/train/r{{round}}_s{{shard}}_seed{{replicate}}.log",
    benchmark:
        f"{OUT}/benchmark/train/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
    params:
        **(
            {"model": config["model"], "training": {
                **{k: config["training"][k] for k in ("epochs", "device", "base_batch")},
                # only when on, so that "off" leaves the params (and finished jobs) as before
                **({"pack": "auto"} if config["training"]["pack"] == "auto" else {})}}
            if BUILTIN
            else {
                "training": {k: config["training"][k] for k in (TRAINER, "pythonpath", "device")
                             + (("epochs",) if FIDELITY else ()) if k in config["training"]},
                "metrics": METRICS,
            }
        ),
        seed=config["seed"],
        # only with design.fidelity, so that a study without one keeps its params (and finished jobs)
        **({"fidelity": low_fidelity(config)} if FIDELITY else {}),
    threads: TRAIN_JOB["threads"]
    resources:
        mem_mb=TRAIN_JOB["mem_mb"],
        runtime=config["training"]["runtime"],
        gpu=GPUS,
    group:
        submission_group
    retries: config["training"]["retries"]
    conda:
        # a user's own env (training.conda, relative to the working directory), else the built-in one
        user_env(config) or torch_env()
    script:
        step("train.py")
