# The study exported to the experiment trackers of report.trackers (none by default), after
# its report. Rule all asks for a tracker's summary only when the config names it
# (tracker_outputs), so a study without trackers never has this job in its DAG.
rule export_mlflow:
    input:
        table=f"{OUT}/multiverse.parquet",
        claims=f"{OUT}/report/claims.json",
        records=universe_files("train.json", ROUNDS),
    output:
        # the store is this rule's own: Snakemake empties it before the job reruns
        store=directory(f"{OUT}/mlflow"),
        summary=f"{OUT}/mlflow.json",
    log:
        f"{OUT}/logs/export_mlflow.log",
    benchmark:
        f"{OUT}/benchmark/export_mlflow.tsv"
    params:
        experiment=config["study"],
        space=list(config["space"]),
        metrics=list(METRICS),
    resources:
        mem_mb=RESOURCES["export"]["mem_mb"],
        runtime=RESOURCES["export"]["runtime"],
    conda:
        env_file("export.yaml")
    script:
        step("export_mlflow.py")
