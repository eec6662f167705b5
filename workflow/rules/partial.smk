# The report of the rounds finished so far, for a look at a long study while it runs:
#   snakemake --cores 2 --nolock partial_report      (--nolock: beside the running workflow)
# It aggregates every round whose universes all have their metrics (rounds 0..k, in order)
# into results/<study>/partial/ and reports on that table with the report rule's own script;
# it never starts training. Run it again later to take in the rounds finished since.
use rule aggregate as partial_aggregate with:
    input:
        metrics=lambda wildcards: universe_files("metrics.json", finished_rounds()),
        designs=lambda wildcards: [f"{OUT}/design/round_{r}.json" for r in finished_rounds()],
    output:
        parquet=f"{PARTIAL}/multiverse.parquet",
        csv=f"{PARTIAL}/multiverse.csv",
    log:
        f"{OUT}/logs/partial_aggregate.log",
    benchmark:
        f"{OUT}/benchmark/partial_aggregate.tsv"


use rule report as partial_report_files with:
    input:
        table=f"{PARTIAL}/multiverse.parquet",
    output:
        claims_json=f"{PARTIAL}/report/claims.json",
        html=f"{PARTIAL}/report.html",
        claims_csv=f"{PARTIAL}/report/claims.csv",
        claims_figure=f"{PARTIAL}/report/claims.png",
        claim_figures=expand(f"{PARTIAL}/report/claim_{{claim}}.png", claim=CLAIMS),
        where_figures=expand(f"{PARTIAL}/report/claim_{{claim}}_where.png", claim=CLAIMS),
        outcomes=f"{PARTIAL}/report/outcomes_vs_dimensions.png",
        sobol=expand(f"{PARTIAL}/report/sobol_{{metric}}.png", metric=report_metrics(config)),
        loo=expand(f"{PARTIAL}/report/loo_{{metric}}.png", metric=report_metrics(config)),
        maps=expand(f"{PARTIAL}/report/posterior_map_{{metric}}.png", metric=report_metrics(config)),
        curves=expand(f"{PARTIAL}/report/specification_curve_{{metric}}.png", metric=report_metrics(config)),
    log:
        f"{OUT}/logs/partial_report.log",
    benchmark:
        f"{OUT}/benchmark/partial_report.tsv"
    params:
        config=REPORT_CONFIG,
        figures=report_figures(PARTIAL),


# The target: `snakemake partial_report`.
rule partial_report:
    input:
        report_outputs(PARTIAL),
    localrule: True
