rule report:
    input:
        table=f"{OUT}/multiverse.parquet",
    output:
        claims_json=f"{OUT}/report/claims.json",
        claims_csv=report(
            f"{OUT}/report/claims.csv",
            caption="../report/claims_table.rst",
            category="1. Claims",
        ),
        claims_figure=report(
            f"{OUT}/report/claims.png",
            caption="../report/claims.rst",
            category="1. Claims",
        ),
        outcomes=report(
            f"{OUT}/report/outcomes_vs_dimensions.png",
            caption="../report/outcomes_vs_dimensions.rst",
            category="2. Outcomes",
        ),
        maps=report(
            expand(f"{OUT}/report/posterior_map_{{metric}}.png", metric=report_metrics(config)),
            caption="../report/posterior_map.rst",
            category="3. Surrogate maps",
        ),
        curves=report(
            expand(f"{OUT}/report/specification_curve_{{metric}}.png", metric=report_metrics(config)),
            caption="../report/specification_curve.rst",
            category="4. Specification curves",
        ),
    log:
        f"{OUT}/logs/report.log",
    benchmark:
        f"{OUT}/benchmark/report.tsv"
    params:
        config={k: config[k] for k in ("seed", "space", "design", "claims", "report")},
    threads: config["report"].get("threads", 2)
    conda:
        "../../envs/report.yaml"
    script:
        "../../scripts/report.py"
