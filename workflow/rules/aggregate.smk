rule aggregate:
    input:
        metrics=universe_files("metrics.json", ROUNDS),
        designs=expand(f"{OUT}/design/round_{{round}}.json", round=ROUNDS),
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
    conda:
        "../../envs/report.yaml"
    script:
        "../../scripts/aggregate.py"
