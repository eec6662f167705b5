"""The library's layers point one way: every module imports alone, the package's import
graph (every import, at module level or inside a function) has no cycle, an import inside
a function says why it is there, and every registered claim type and design strategy
keeps its contract."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "scripts" / "multiverse"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source: ``import a.b``,
    ``from a import b`` (``a.b`` where that is a module, else ``a``) and relative forms."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        out |= {t for t in targets if t in MODULES and t != name}
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_the_import_graph_has_no_cycle():
    graph = {name: imported(name, path) for name, path in MODULES.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_find_cycle_reports_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


#: Lint pragmas, which say nothing of why: ``noqa`` (with its codes) and ``type: ignore``.
PRAGMA = re.compile(r"noqa(:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(\[[^\]]*\])?")


def says_why(comment: str) -> bool:
    """A comment that is more than lint pragmas."""
    return re.search(r"[A-Za-z]", PRAGMA.sub("", comment.lstrip("#"))) is not None


def unexplained_imports(source: str) -> list[int]:
    """Lines of the imports inside a function of ``source`` that carry no comment saying
    why, neither on their own lines nor on the comment lines directly above them. An import
    belongs at module level unless it is deferred on purpose (a heavy library in a module
    that the Snakefile imports when it is parsed, torch after the thread settings, ...)."""
    lines = source.splitlines()
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    out = set()
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            why = any(says_why(comments[n]) for n in range(node.lineno, node.end_lineno + 1) if n in comments)
            n = node.lineno - 1  # the line above, 1-based
            while not why and n >= 1 and lines[n - 1].lstrip().startswith("#"):
                why = says_why(lines[n - 1].strip())
                n -= 1
            if not why:
                out.add(node.lineno)
    return sorted(out)


def test_unexplained_imports_finds_them():
    source = (
        "import os\n"
        "def f():\n"
        "    import a\n"
        "    import b  # noqa: F401\n"
        "    # deferred: c is heavy\n"
        "    import c\n"
        "    import d  # deferred: d is heavy\n"
        "    # deferred: e and f are heavy\n"
        "    # (a second line)\n"
        "    from e import (\n"
        "        f,\n"
        "    )\n"
        "\n"
        "    import g\n"
        "    def h():\n"
        "        import i  # noqa: F401  (re-exported)\n"
        "        x = '# not a comment'; import j\n"
    )
    assert unexplained_imports(source) == [3, 4, 14, 17]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_level_imports_say_why(name):
    """An import inside a function is deliberate and its comment says why; any other
    belongs with the module's imports at the top."""
    missing = unexplained_imports(MODULES[name].read_text())
    assert not missing, f"{MODULES[name].relative_to(ROOT)}: an import inside a function without a comment " \
                        f"saying why (or move it to the top) at line(s) {missing}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_imports_alone(name):
    """In a fresh interpreter, so that no other module's import hides a missing one."""
    env_path = str(ROOT / "scripts")
    done = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]


def test_claim_types_keep_the_contract():
    from multiverse.claims import TYPES
    from multiverse.claims.contract import ClaimType
    from multiverse.spec.claims import SPECS

    assert TYPES and set(TYPES) == set(SPECS)
    for name, kind in TYPES.items():
        assert isinstance(kind, ClaimType), f"claim type {name} misses part of the ClaimType protocol"
        assert kind.SPEC is SPECS[name]


def test_design_strategies_resolve_their_choose():
    from multiverse.spec.strategies import STRATEGIES

    assert {"sobol", "gp-ivr", "gp-claims"} <= set(STRATEGIES)
    assert all(callable(s.choose_function()) for s in STRATEGIES.values())


def test_the_spec_the_snakefile_imports_needs_only_pyyaml_and_the_standard_library():
    """What workflow/rules/common.smk imports at parse time (multiverse.spec) loads no
    third-party module but PyYAML: no numpy, torch, pandas, snakemake or plotting."""
    probe = ("import sys; before = set(sys.modules); import multiverse.spec; "
             "print('\\n'.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"}, cwd=ROOT)
    loaded = set(done.stdout.split())
    # cython_runtime: what PyYAML's C loader (a Cython extension) registers
    third_party = {m for m in loaded if m not in sys.stdlib_module_names and not m.startswith("_")} - {"cython_runtime"}
    assert third_party == {"multiverse", "yaml"}, sorted(third_party)
    ours = subprocess.run([sys.executable, "-c", "import sys, multiverse.spec; print('\\n'.join(sorted("
                           "m for m in sys.modules if m.startswith('multiverse'))))"], capture_output=True,
                          text=True, check=True, env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"})
    assert set(ours.stdout.split()) == {"multiverse", "multiverse.errors", *(f"multiverse.spec{s}" for s in (
        "", ".claims", ".config", ".layout", ".records", ".strategies"))}
    common = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    assert set(re.findall(r"^\s*(?:from|import) (multiverse[\w.]*)", common, flags=re.M)) <= {"multiverse", "multiverse.spec"}


def string_constants(path: Path) -> set[str]:
    """The string literals of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs}


def test_no_module_restates_what_the_registries_declare():
    """A design strategy's or claim type's name is written once, in its registry
    (multiverse.spec.strategies, multiverse.spec.claims): every other module asks the
    registry (a trait, a round's strategy), so a new strategy or claim type touches its
    own module, its registry entry and the schema only. (A name inside a longer string,
    such as an error message, is not a restatement.)"""
    from multiverse.spec.claims import SPECS
    from multiverse.spec.strategies import STRATEGIES

    names = set(STRATEGIES) | set(SPECS)
    owners = {"multiverse.spec.strategies", "multiverse.spec.claims"}
    # the figure of the Sobol indices is the report's "sobol" output, not a strategy
    not_a_name = {"multiverse.html": {"sobol"}, "multiverse.report_figures": {"sobol"}}
    found = {name: sorted(names & string_constants(path) - not_a_name.get(name, set()))
             for name, path in MODULES.items() if name not in owners}
    assert {k: v for k, v in found.items() if v} == {}
    for trait in ("SPACE_ONLY", "UNIFORM_STRATEGIES", "NAME", "STATISTIC", "DESIGN_READS_ONE_RUN",
                  "READS_SENSITIVITY"):
        defined = [name for name, path in MODULES.items()
                   if re.search(rf"^{trait}\s*=", path.read_text(), flags=re.M)]
        assert defined == [], f"{trait} is defined in {defined}; the registries declare it"


def test_the_restatement_check_finds_one(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('"""Mentions sobol."""\nX = ("sobol", "random")\ndef f():\n    """gp-ivr"""\n    return "a gp-ivr"\n')
    assert string_constants(path) == {"sobol", "random", "a gp-ivr"}
