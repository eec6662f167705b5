rule aggregate:
    input:
        metrics=universe_files("metrics.json", ROUNDS),
        designs=expand(OUT + "/design/round_{round}.json", round=ROUNDS),
    output:
        parquet=OUT + "/multiverse.parquet",
        csv=report(
            OUT + "/multiverse.csv",
            caption="../report/multiverse.rst",
            category="Multiverse table",
        ),
    log:
        OUT + "/logs/aggregate.log",
    benchmark:
        OUT + "/benchmark/aggregate.tsv"
    params:
        space=list(config["space"]),
        config_hash=config_hash(config),
    conda:
        "../../envs/report.yaml"
    script:
        "../../scripts/aggregate.py"
