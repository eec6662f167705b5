# Each job measures one shard's universes: the built-in trainer's networks are evaluated
# (multiverse.metrics.metrics_shard); a user's training reported its own metrics, which
# are written in the same form (multiverse.metrics.recorded_metrics_shard).
rule metrics:
    input:
        **({"data": DATA, "models": shard_files(f"{LOW}model.pt")} if BUILTIN else {}),
        records=shard_files(f"{LOW}train.json"),
    output:
        shard_files(f"{LOW}metrics.json"),
    log:
        f"{OUT}/logs/metrics/r{{round}}_s{{shard}}_seed{{replicate}}.log",
    benchmark:
        f"{OUT}/benchmark/metrics/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
    params:
        **({"model": config["model"], "sharpness": config["metrics"].get("sharpness")} if BUILTIN else {}),
    threads: config["training"]["threads"]
    resources:
        mem_mb=config["training"]["mem_mb"],
        runtime=config["training"]["runtime"],
        # the built-in networks are evaluated on the training device
        gpu=GPUS if BUILTIN else 0,
    group:
        submission_group
    conda:
        torch_env()
    script:
        step("metrics.py")


# design.fidelity: the continued universes' metrics at full fidelity (those not continued
# are recorded as such), measured as rule metrics measures the low fidelity's.
if FIDELITY:

    use rule metrics as metrics_continued with:
        input:
            **({"data": DATA, "models": shard_files("model.pt")} if BUILTIN else {}),
            records=shard_files("train.json"),
        output:
            shard_files("metrics.json"),
        log:
            f"{OUT}/logs/metrics_continued/r{{round}}_s{{shard}}_seed{{replicate}}.log",
        benchmark:
            f"{OUT}/benchmark/metrics_continued/r{{round}}_s{{shard}}_seed{{replicate}}.tsv"
        group:
            continued_group


# One cluster submission's shards, joined so that Snakemake submits them as one group job
# sized to the declared node (see submission_group in common.smk); with a node only.
if CLUSTER:

    rule submission:
        input:
            lambda wildcards: [
                f"{OUT}/universes/r{wildcards.round}/s{s}/u{k}/seed{wildcards.replicate}/metrics.json"
                for s in range(int(wildcards.part) * PER_SUBMISSION, int(wildcards.part) * PER_SUBMISSION + PER_SUBMISSION)
                if s < n_shards(config, int(wildcards.round))
                for k in SLOTS
            ],
        output:
            touch(f"{OUT}/universes/r{{round}}/seed{{replicate}}_part{{part}}.done"),
        group:
            # with design.fidelity these are the continued shards (their own submissions)
            continued_group if FIDELITY else submission_group
        resources:
            mem_mb=100,
            runtime=1,
        run:
            pass

    if FIDELITY:

        # the low-fidelity shards' submissions, joined as the continued ones are
        use rule submission as submission_low with:
            input:
                lambda wildcards: [
                    f"{OUT}/universes/r{wildcards.round}/s{s}/u{k}/seed{wildcards.replicate}/{LOW}metrics.json"
                    for s in range(int(wildcards.part) * PER_SUBMISSION, int(wildcards.part) * PER_SUBMISSION + PER_SUBMISSION)
                    if s < n_shards(config, int(wildcards.round))
                    for k in SLOTS
                ],
            output:
                touch(f"{OUT}/universes/r{{round}}/seed{{replicate}}_part{{part}}.low.done"),
            group:
                submission_group
