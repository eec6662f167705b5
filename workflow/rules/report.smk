# What the report reads of the config: a user's declared metrics too (None: the built-in
# trainer's, multiverse.BUILTIN_METRICS). Not report.trackers, which only the export reads,
# so that turning a tracker on leaves a finished report as it is.
REPORT_CONFIG = {
    **{k: config[k] for k in ("study", "seed", "space", "design", "claims")},
    "report": {k: v for k, v in config["report"].items() if k != "trackers"},
    **({"declared_metrics": METRICS} if not BUILTIN else {}),
}


rule report:
    input:
        table=f"{OUT}/multiverse.parquet",
    output:
        claims_json=f"{OUT}/report/claims.json",
        html=f"{OUT}/report.html",
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
        claim_figures=report(
            expand(f"{OUT}/report/claim_{{claim}}.png", claim=CLAIMS),
            caption="../report/claim_figure.rst",
            category="2. Evidence per claim",
        ),
        where_figures=report(
            expand(f"{OUT}/report/claim_{{claim}}_where.png", claim=CLAIMS),
            caption="../report/where_figure.rst",
            category="2. Evidence per claim",
        ),
        outcomes=report(
            f"{OUT}/report/outcomes_vs_dimensions.png",
            caption="../report/outcomes_vs_dimensions.rst",
            category="3. Outcomes",
        ),
        sobol=report(
            expand(f"{OUT}/report/sobol_{{metric}}.png", metric=report_metrics(config)),
            caption="../report/sobol.rst",
            category="4. Sensitivity",
        ),
        loo=report(
            expand(f"{OUT}/report/loo_{{metric}}.png", metric=report_metrics(config)),
            caption="../report/loo.rst",
            category="5. Surrogate diagnostics",
        ),
        maps=report(
            expand(f"{OUT}/report/posterior_map_{{metric}}.png", metric=report_metrics(config)),
            caption="../report/posterior_map.rst",
            category="6. Surrogate maps",
        ),
        curves=report(
            expand(f"{OUT}/report/specification_curve_{{metric}}.png", metric=report_metrics(config)),
            caption="../report/specification_curve.rst",
            category="7. Specification curves",
        ),
    log:
        f"{OUT}/logs/report.log",
    benchmark:
        f"{OUT}/benchmark/report.tsv"
    params:
        config=REPORT_CONFIG,
        figures=report_figures(),
    threads: config["report"]["threads"]
    resources:
        mem_mb=RESOURCES["report"]["mem_mb"],
        runtime=RESOURCES["report"]["runtime"],
    conda:
        env_file("report.yaml")
    script:
        step("report.py")
