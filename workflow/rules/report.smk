rule report:
    input:
        table=OUT + "/multiverse.parquet",
    output:
        claims_json=OUT + "/report/claims.json",
        claims_csv=report(
            OUT + "/report/claims.csv",
            caption="../report/claims_table.rst",
            category="1. Claims",
        ),
        claims_figure=report(
            OUT + "/report/claims.png",
            caption="../report/claims.rst",
            category="1. Claims",
        ),
        outcomes=report(
            OUT + "/report/outcomes_vs_dimensions.png",
            caption="../report/outcomes_vs_dimensions.rst",
            category="2. Outcomes",
        ),
        maps=report(
            expand(OUT + "/report/posterior_map_{metric}.png", metric=report_metrics(config)),
            caption="../report/posterior_map.rst",
            category="3. Surrogate maps",
        ),
        curves=report(
            expand(OUT + "/report/specification_curve_{metric}.png", metric=report_metrics(config)),
            caption="../report/specification_curve.rst",
            category="4. Specification curves",
        ),
    log:
        OUT + "/logs/report.log",
    benchmark:
        OUT + "/benchmark/report.tsv"
    params:
        config={k: config[k] for k in ("seed", "space", "design", "claims", "report")},
    threads: config["report"].get("threads", 2)
    conda:
        "../../envs/report.yaml"
    script:
        "../../scripts/report.py"
