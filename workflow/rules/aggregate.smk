rule aggregate:
    input:
        metrics=universe_files("metrics.json", ROUNDS),
        designs=expand(f"{OUT}/design/round_{{round}}.json", round=ROUNDS),
        # on a cluster, each submission's marker (it joins the submission's shards)
        submissions=submission_markers(ROUNDS),
        # design.fidelity: every universe's low-fidelity metrics and each round's continuation draw
        **({"low": universe_files(f"{LOW}metrics.json", ROUNDS),
            "continuations": expand(f"{OUT}/design/continue_{{round}}.json", round=ROUNDS)} if FIDELITY else {}),
    output:
        parquet=f"{OUT}/multiverse.parquet",
        csv=report(
            f"{OUT}/multiverse.csv",
            caption="../report/multiverse.rst",
            category="Multiverse table",
        ),
    log:
        f"{OUT}/logs/aggregate.log",
    benchmark:
        f"{OUT}/benchmark/aggregate.tsv"
    params:
        space=list(config["space"]),
        config_hash=multiverse_hash(config),
        # a user's declared metrics (the built-in trainer's are multiverse.METRICS and
        # those its records hold; not a param there, so finished tables stay finished)
        **({"metrics": list(METRICS)} if not BUILTIN else {}),
    resources:
        mem_mb=RESOURCES["aggregate"]["mem_mb"],
        runtime=RESOURCES["aggregate"]["runtime"],
    conda:
        env_file("report.yaml")
    script:
        step("aggregate.py")
