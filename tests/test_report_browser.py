"""The report pages in a real headless browser (Debian's chromium): they open, and every
image of the standalone page loads."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")]

OUT = Path("results/tiny")
#: appended to a copy of the page: after load, write what the browser saw into the DOM
PROBE = """<script>
window.addEventListener("load", () => {
  const imgs = [...document.images];
  const seen = {title: document.title, images: imgs.length,
                loaded: imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length,
                broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
                tables: document.querySelectorAll("table").length,
                headings: [...document.querySelectorAll("h2")].map(h => h.textContent),
                badges: [...document.querySelectorAll("a.badge")].map(a => a.getAttribute("href")),
                badgeTargets: [...document.querySelectorAll("a.badge")].map(
                  a => (document.getElementById(a.getAttribute("href").slice(1)) || {}).textContent || null),
                contents: [...document.querySelectorAll("nav.contents a")].map(
                  a => !!document.getElementById(a.getAttribute("href").slice(1))),
                curveLinks: [...document.querySelectorAll("a[href^='#curve-']")].map(a => {
                  const f = document.getElementById(a.getAttribute("href").slice(1));
                  const img = f && f.querySelector("img");
                  return !!(img && img.complete && img.naturalWidth > 0 && f.closest("body") && a.closest("p"));
                }),
                claimColumns: [...document.querySelectorAll("table.claims th")].map(th => th.textContent),
                naColumns: [...document.querySelectorAll("table.claims th")].map((th, k) =>
                  [...document.querySelectorAll("table.claims tbody tr")].every(
                    tr => tr.children[k].textContent.trim() === "n/a")).filter(x => x).length,
                claimsTableRight: document.querySelector("table.claims").getBoundingClientRect().right,
                firstBadgeBottom: document.querySelector("a.badge").getBoundingClientRect().bottom,
                pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth};
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(seen);
  document.body.appendChild(pre);
});
</script>"""


def dump_dom(page: Path, tmp: Path) -> str:
    res = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
         f"--user-data-dir={tmp / 'profile'}", "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_standalone_report_opens_and_every_image_loads(tiny_run, tmp_path):
    page = tmp_path / "report.html"
    page.write_text((tiny_run / OUT / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = dump_dom(page, tmp_path)
    seen = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    assert seen["title"] == "Multiverse report: tiny"
    assert seen["images"] >= 20 and seen["loaded"] == seen["images"], seen["broken"]
    assert seen["tables"] == 4  # training runs by outcome, claims, Sobol indices, LOO diagnostics
    assert seen["headings"][:2] == ["The claims at a glance", "Summary of claims"]
    assert any(h.startswith("Claim: ") for h in seen["headings"])
    # the first screen (900 px tall) shows the verdicts: every badge links to its claim's section, the contents list resolves,
    # the claims table has no column that is n/a for every claim and fits the page's width
    assert seen["badges"] and all(t and t.startswith("Claim: ") for t in seen["badgeTargets"]), seen["badgeTargets"]
    assert seen["firstBadgeBottom"] < 900 / 2, seen["firstBadgeBottom"]
    assert len(seen["contents"]) >= 5 + len(seen["badges"]) and all(seen["contents"])
    assert "verdict" in seen["claimColumns"] and seen["naColumns"] == 0, seen["claimColumns"]
    # each claim's section links to the specification curve of its metrics, a loaded image
    assert len(seen["curveLinks"]) >= len(seen["badges"]) and all(seen["curveLinks"]), seen["curveLinks"]
    assert seen["pageWidth"] <= seen["viewport"] and seen["claimsTableRight"] <= seen["viewport"], seen


def test_snakemake_report_opens_in_the_browser(tiny_run, tmp_path):
    from conftest import snakemake

    res = snakemake(tiny_run, "--report", str(tmp_path / "snakemake_report.html"))
    assert res.returncode == 0, res.stderr[-3000:]
    dom = dump_dom(tmp_path / "snakemake_report.html", tmp_path)
    # Snakemake's report is a React app: its navigation is rendered by script at load
    assert "Snakemake Report" in dom
    assert "Claims" in dom and "Evidence per claim" in dom
