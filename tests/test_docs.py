"""The README stays a two-minute read, its two commands pass in order on a fresh copy (slow),
every link in the docs leads somewhere, and the workflow catalog's usage file says what the
catalog needs."""

from __future__ import annotations

import os
import re
import shutil
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


def readme_commands() -> list[str]:
    """The README's two commands, in order: the lines of the first two fenced bash blocks
    of its "Two commands" section that are not comments."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```bash\n(.*?)^```", section, flags=re.S | re.M)
    return [line for block in blocks[:2] for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_has_two_command_lines():
    assert readme_commands() == [readme_commands()[0], ".venv/bin/python -m pytest -q --durations=20 tests"]
    assert '-e ".[test]"' in readme_commands()[0], "command 1 must install what command 2 needs (the test extra)"


@pytest.mark.slow
def test_the_two_readme_commands_pass_in_order_on_a_fresh_copy(tmp_path):
    """A new user's day one: the README's command 1 (venv, install, default study, report)
    then command 2 (the tests), verbatim, in a copy of this checkout with no venv and no
    results. Command 2 runs as written, narrowed by PYTEST_ADDOPTS to two quick unit
    modules (the whole suite would run this test again): what it shows is that pytest
    and the test extra's packages (ppi-python, which test_design_based compares against)
    are there after command 1 alone."""
    import subprocess

    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    clone = tmp_path / "clone"
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / name)
    assert not (clone / ".venv").exists() and not (clone / "results" / "default").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS")}
    one, two = readme_commands()
    res = subprocess.run(["bash", "-c", one], cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    out = clone / "results" / "default"
    assert (out / "report.html").stat().st_size > 10_000
    assert (out / "snakemake_report.html").stat().st_size > 10_000
    env["PYTEST_ADDOPTS"] = '-m "not slow" -k "test_design_based or test_space" -p no:cacheprovider'
    res = subprocess.run(["bash", "-c", two], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-4000:]
    last = res.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", last) and "failed" not in last and "error" not in last, last
