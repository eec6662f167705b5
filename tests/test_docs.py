"""The README stays a two-minute read, every link in the docs leads somewhere, and the
workflow catalog's usage file says what the catalog needs."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: ``[text](target)`` or ``![alt](target "title")``, and ``<img src="target">``.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG = re.compile(r"<img[^>]*\bsrc=\"([^\"]+)\"")


def without_code(text: str) -> str:
    """The text outside fenced code blocks and inline code, where a link is a link."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text without markup, lower case, every character
    that is not a letter, digit, space, hyphen or underscore dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = "".join(c for c in text.strip().lower()
                   if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file, with GitHub's ``-1``, ``-2`` for repeats."""
    seen: dict[str, int] = {}
    out = set()
    fence = False
    for line in path.read_text().splitlines():
        if line.startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def broken_links(path: Path) -> list[str]:
    """The relative links of a markdown file that lead to no file, or to no heading of it."""
    text = without_code(path.read_text())
    bad = []
    for target in LINK.findall(text) + IMG.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):      # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target} (no file {shown(dest)})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no heading #{anchor} in {shown(dest)})")
    return bad


def test_the_readme_is_short():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 300, f"README.md has {n} lines; move detail into docs/ (at most 300)"


def test_the_readme_keeps_the_commands_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert ".venv/bin/python -m pytest -q --durations=20 tests" in readme      # .ci/run's command 2
    assert '.venv/bin/python -m pytest -q -m "not slow" tests' in readme
    assert ".venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_a_broken_link_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# Title here\n\n## Two `words`\n\n[ok](#two-words) [ok](a.md#title-here) "
                                   "[gone](missing.md) [no heading](a.md#nowhere) `[code](skipped.md)`\n"
                                   "![img](pic.png) [web](https://example.org/x)\n")
    assert [b.split(" ")[0] for b in broken_links(tmp_path / "a.md")] == ["missing.md", "a.md#nowhere", "pic.png"]


def test_github_slugs():
    assert slug("Calibration on real trainings (`benchmarks/calibration.py`)") == \
        "calibration-on-real-trainings-benchmarkscalibrationpy"
    assert slug("Replicates: seed noise in the design") == "replicates-seed-noise-in-the-design"
    assert slug("Claim-targeted rounds (`strategy: gp-claims`)") == "claim-targeted-rounds-strategy-gp-claims"
    assert slug("Metrics step memory (`benchmarks/metrics_memory.py`)") == \
        "metrics-step-memory-benchmarksmetrics_memorypy"


def test_the_catalog_file_has_the_standardized_usage_keys():
    cat = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())
    usage = cat["usage"]
    assert set(usage["mandatory-flags"]) == {"desc", "flags"}
    assert isinstance(usage["mandatory-flags"]["desc"], str)
    stack = usage["software-stack-deployment"]
    assert {"conda", "singularity", "singularity+conda"} <= set(stack)
    assert any(stack.values()), "at least one deployment method must work"
    assert usage["report"] is True
