"""The standalone report page, ``results/<study>/report.html``: one self-contained HTML
file (figures embedded as PNG data URIs) that opens with the claims' summary table,
then a section per claim with the figures behind its verdict, then what each choice
matters (Sobol indices), the surrogates' leave-one-out diagnostics and the maps.
"""

from __future__ import annotations

import base64
import html as _html
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from multiverse.aggregate import status_table
from multiverse.runtime import atomic_write
from multiverse.spec import report_metrics
from multiverse.spec.claims import SPECS

CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #555; }
.flag { color: #a00; font-weight: bold; }
.badge { display: inline-block; min-width: 11em; padding: 2px 8px; margin-right: 0.6em; border-radius: 4px;
         color: #fff; font-weight: bold; font-size: 0.85em; text-align: center; }
.holds { background: #1b7837; } .fails { background: #b2182b; } .equivalent { background: #2166ac; }
.uncertain, .too-few { background: #777; }
ul.headline { list-style: none; padding-left: 0; } ul.headline li { margin: 0.5em 0; }
a.badge { text-decoration: none; }
nav.contents { font-size: 0.9em; margin: 1em 0; } nav.contents ol { margin: 0.3em 0; }
table.claims { font-size: 0.8em; width: 100%; table-layout: auto; }
"""

BADGE_CLASS = {"holds": "holds", "fails": "fails", "equivalent": "equivalent", "uncertain": "uncertain",
               "too few universes": "too-few"}


def anchor(name: str) -> str:
    """The id of claim ``name``'s section (config names are identifiers)."""
    return "claim-" + _html.escape(name)


def headline(claims) -> str:
    """One line per claim: a coloured badge, linking to the claim's section, and one
    plain sentence."""
    items = []
    for c in claims:
        h = c.headline
        items.append(f"<li><a class='badge {BADGE_CLASS.get(h['badge'], 'uncertain')}' href='#{anchor(c.name)}'>"
                     f"{_html.escape(h['badge'])}</a>{_html.escape(h['text'])}</li>")
    return "<ul class='headline'>" + "".join(items) + "</ul>"


def contents(claims) -> str:
    """The page's contents list: the fixed sections, and one entry per claim."""
    per_claim = "".join(f"<li><a href='#{anchor(c.name)}'>{_html.escape(c.statement)}</a></li>" for c in claims)
    return ("<nav class='contents'><b>Contents</b><ol>"
            "<li><a href='#glance'>The claims at a glance</a></li><li><a href='#summary'>Summary of claims</a></li>"
            f"<li>Claims<ol>{per_claim}</ol></li>"
            "<li><a href='#sobol'>Which choices matter: Sobol indices</a></li>"
            "<li><a href='#loo'>Surrogate diagnostics: leave-one-out</a></li>"
            "<li><a href='#multiverse'>The multiverse</a></li></ol></nav>")


#: The summary table's columns left off the page (claims.csv keeps them): the long "where"
#: text, which each claim's section gives under its verdict.
OFF_PAGE = ("where it holds, fails or is uncertain (GP)",)
#: the badge words, longest first, as :func:`multiverse.report_analysis.headline` writes them
VERDICTS = ("too few universes", "equivalent", "uncertain", "holds", "fails")


def claims_table_html(table: pd.DataFrame) -> str:
    """The summary table as the page shows it: the verdict as its badge word (the full
    sentence is the claim's section's), no column that is n/a for every claim, and none of
    :data:`OFF_PAGE`, so that it fits the page."""
    df = table.drop(columns=[c for c in OFF_PAGE if c in table.columns])
    if "verdict" in df.columns:
        df["verdict"] = [next((v for v in VERDICTS if str(s).startswith(v)), s) for s in df["verdict"]]
    empty = [c for c in df.columns if df[c].map(lambda v: pd.isna(v) or v in ("n/a", "")).all()]
    df = df.drop(columns=empty)
    return df.to_html(index=False, na_rep="n/a", border=0, escape=True, classes="claims")


def statuses(counts) -> str:
    """Run statuses as words: '46 ok, 2 diverged'."""
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def status_table_html(df: pd.DataFrame) -> str:
    """The training runs by outcome, failed ones by cause (raised, died, timed out, out of
    memory, invalid metrics: :func:`multiverse.aggregate.status_table`)."""
    return "<p><b>Training runs by outcome</b> (a failed one by its cause):</p>" + _table(status_table(df))


def _img(path: str, caption: str, id_: str | None = None) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    ident = f' id="{_html.escape(id_)}"' if id_ else ""
    return (f'<figure{ident}><img src="data:image/png;base64,{data}" alt="{_html.escape(caption)}">'
            f"<figcaption>{_html.escape(caption)}</figcaption></figure>")


def curve_anchor(metric: str) -> str:
    """The id of ``metric``'s specification curve, which each claim on it links to."""
    return "curve-" + _html.escape(metric)


def _table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, na_rep="n/a", border=0, escape=True)


def write_report(path: str, config: Mapping[str, Any], df: pd.DataFrame, result: Mapping[str, Any],
                 tables: Mapping[str, pd.DataFrame], out: Mapping[str, Any]) -> None:
    """Write the page atomically (a failure leaves any earlier page in place)."""
    study = config.get("study", "multiverse")
    metrics = report_metrics(config)
    n_u, n_runs = df["universe"].nunique(), len(df)
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Multiverse report: {_html.escape(study)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Multiverse report: {_html.escape(study)}</h1>",
        f"<p>{n_u} universes ({n_runs} training runs: {_html.escape(statuses(df['status'].value_counts().to_dict()))}). "
        "Each claim has one verdict, the same in its badge, the table and its section.</p>",
        "<h2 id='glance'>The claims at a glance</h2>",
        headline(result["claims"]),
        "<p><b>How a verdict is reached.</b> It rests on the "
        "<i>design-based</i> answer: the surrogate's prediction over the multiverse corrected by the residuals of "
        "the universes the design drew with known probability, each weighted by the inverse of that probability "
        "(prediction-powered inference), so that its 95% confidence interval holds whatever the surrogate. Beside "
        "it stands the <i>model-based</i> answer of the GP surrogate (95% credible intervals from joint posterior "
        "samples), with where the model finds the claim holds, fails or is uncertain; where the two disagree, the "
        "verdict says so. A claim holds when its one-sided 95% bound lies on the claim's side (P(holds) &ge; "
        "0.95), fails at P(holds) &le; 0.05; with a margin, it is equivalent at P(|effect| &lt; margin) &ge; 0.95. "
        "Design-based answers estimate the average over universes where the metric is defined: a failed universe, "
        "and for losses, the gap and sharpness a diverged one, count as not defined.</p>",
        contents(result["claims"]),
        status_table_html(df),
    ]
    div = result.get("divergence")
    if div:
        parts.append(f"<p><b>Divergence:</b> the divergence model expects {div['share']:.0%} of the multiverse to "
                     f"diverge ({_html.escape(div['regions']['text'])}). Losses, the gap and sharpness are modelled "
                     "on converged universes only, and claims on them are read where universes converge.</p>")
    parts += ["<h2 id='summary'>Summary of claims</h2>",
              "<p>Each column with its 95% interval; where each claim holds, fails or is uncertain is in its "
              "section (and in claims.csv).</p>", claims_table_html(tables["claims"])]
    for c in result["claims"]:
        main_png, where_png = out["claim_figures"][c.name], out["where_figures"][c.name]
        flag = "" if c.surrogate_ok else " <span class='flag'>(surrogate fits poorly)</span>"
        parts += [f"<h2 id='{anchor(c.name)}'>Claim: {_html.escape(c.statement)}{flag}</h2>",
                  f"<p><b>Verdict:</b> {_html.escape(c.summary)}</p>"]
        regions = (c.gp.get("regions") or {}).get("text")
        if regions:
            parts.append(f"<p><b>Where it holds and flips (model-based, GP):</b> {_html.escape(regions)}</p>")
        d = c.design or {}
        if d.get("note"):
            parts.append(f"<p><b>Design-based answer read from:</b> {_html.escape(d['note'])}.</p>")
        if d.get("fidelity"):
            parts.append(f"<p><b>Multi-fidelity:</b> {_html.escape(fidelity_text(d['fidelity']))}.</p>")
        curves = [m for m in SPECS[c.type].metrics(c.claim) if m in metrics]
        if curves:
            parts.append("<p><b>Every universe behind it:</b> " + ", ".join(
                f"<a href='#{curve_anchor(m)}'>the specification curve of {_html.escape(m)}</a>" for m in curves)
                + " (each universe ranked, with its choices, the claim's groups and the universes that failed).</p>")
        parts += [_img(main_png, f"{c.statement}: the evidence behind the verdict"),
                  _img(where_png, f"{c.statement}: where in the multiverse it holds")]
    parts += ["<h2 id='sobol'>Which choices matter: Sobol indices</h2>",
              "<p>First-order: the share of the metric's variance over the multiverse due to a choice alone; "
              "total-order: including its interactions. From the GP surrogate, 95% credible intervals over "
              "posterior samples; a categorical choice's levels form one index.</p>",
              _table(tables["sensitivity"])]
    for m in metrics:
        parts.append(_img(out["sobol"][m], f"Sobol indices of {m}"))
    parts += ["<h2 id='loo'>Surrogate diagnostics: leave-one-out</h2>",
              "<p>Each universe predicted by the GP fitted to the others (hyperparameters fixed). A surrogate with "
              "LOO R<sup>2</sup> &lt; 0.5 or 95% coverage &lt; 0.8 is flagged, and so is every verdict resting on it.</p>",
              _table(tables["diagnostics"])]
    for m in metrics:
        parts.append(_img(out["loo"][m], f"Leave-one-out calibration of the {m} surrogate"))
    parts.append("<h2 id='multiverse'>The multiverse</h2>")
    parts.append(_img(out["claims_figure"], "Every claim's effect: GP (95% CrI) beside the observed universes (95% CI)"))
    parts.append(_img(out["outcomes"], "Each outcome against each choice, one point per training run"))
    for m in metrics:
        parts.append(_img(out["maps"][m], f"GP posterior median and 95% band width of {m}, with the universes"))
        parts.append(_img(out["curves"][m], f"Specification curve of {m}: every universe ranked by it (above a few "
                          "hundred, quantile bands over bins of the ranking), its choices below, the claims' groups, "
                          "and the universes without a value at the right", curve_anchor(m)))
    parts.append("</body></html>")
    atomic_write(path, lambda tmp: Path(tmp).write_text("\n".join(parts), encoding="utf-8"))


def fidelity_text(fidelity: Mapping[str, Mapping[str, Any]]) -> str:
    """A multi-fidelity answer's basis in words, per metric
    (:func:`multiverse.estimators.fidelity_summary`)."""
    def num(x: Any, f: str) -> str:
        return "n/a" if x is None or not np.isfinite(x) else format(x, f)

    return "; ".join(
        f"{m}: {s['low_fidelity']} universes trained at the low fidelity, {s['continued']} continued to full fidelity "
        f"({s['continued_trained']} trained on, {s['continued'] - s['continued_trained']} final at the low fidelity); "
        f"effective sample size {num(s['ess'], '.0f')} (universes trained to the end that would give its mean the same "
        f"standard error); the low fidelity's correlation with the final {m} {num(s['predictor_correlation'], '.2f')}"
        for m, s in fidelity.items())
