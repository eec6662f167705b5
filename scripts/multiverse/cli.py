"""The ``multiverse`` command (pyproject.toml's console script).

``multiverse init DIR [--template function|command|builtin]`` writes a new study project
that runs as it is (``cd DIR && snakemake --cores 2``) and is meant to be edited:

- ``Snakefile``: the installed workflow as a Snakemake module
  (:func:`multiverse.workflow_snakefile`), with the project's own config;
- ``config/config.yaml``: only the keys a user must decide, commented (the study, the
  training, the metrics it returns, the space, the budget and the claims);
- ``src/train.py`` (templates ``function`` and ``command``): the training to edit, a Python
  function or an argparse script. ``builtin`` uses the workflow's own trainer on digits.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from importlib import resources
from pathlib import Path

from multiverse import __version__

TEMPLATES = ("function", "command", "builtin")

SNAKEFILE = '''\
# A multiverse study (multiverse {version}): the installed workflow as a Snakemake module,
# run with this folder's config. `snakemake --cores 2` trains the study and writes
# results/<study>/report.html. To pin the workflow to a release instead of the installed
# package, snakefile: github("<owner>/multiverse", path="workflow/Snakefile", tag="v{version}")
# (the package must still be installed: pip install multiverse-analysis=={version}).
from multiverse import workflow_snakefile


configfile: "config/config.yaml"


module multiverse:
    snakefile:
        workflow_snakefile()
    config:
        config


use rule * from multiverse
'''

GITIGNORE = "results/\n.snakemake/\n__pycache__/\n"


def init(directory: str | Path, template: str = "function") -> list[Path]:
    """Write a new project of ``template`` into ``directory`` (created; an existing
    non-empty folder is refused, so nothing of the user's is overwritten); returns the
    files written."""
    if template not in TEMPLATES:
        raise ValueError(f"template: expected one of {', '.join(TEMPLATES)}, got {template!r}")
    root = Path(directory)
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty: multiverse init writes a new project")
    source = resources.files("multiverse.templates") / template
    study = root.resolve().name.replace("-", "_") or "my_study"
    files = {
        root / "Snakefile": SNAKEFILE.format(version=__version__),
        root / ".gitignore": GITIGNORE,
        root / "config" / "config.yaml": (source / "config.yaml").read_text().replace(
            "study: my_study", f"study: {study}", 1),
    }
    written = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    if (source / "train.py").is_file():
        (root / "src").mkdir()
        with resources.as_file(source / "train.py") as src:
            shutil.copyfile(src, root / "src" / "train.py")
        written.append(root / "src" / "train.py")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="multiverse", description="A reproducible multiverse analysis of ML claims.")
    parser.add_argument("--version", action="version", version=f"multiverse {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("init", help="write a new study project (runs as is: cd DIR && snakemake --cores 2)")
    new.add_argument("directory", help="the project's folder (created; must be new or empty)")
    new.add_argument("--template", choices=TEMPLATES, default="function",
                     help="function: your training as a Python function (default); command: a script "
                          "run once per universe; builtin: the workflow's own trainer on digits")
    args = parser.parse_args(argv)
    try:
        written = init(args.directory, args.template)
    except (FileExistsError, ValueError) as err:
        parser.error(str(err))
    root = Path(args.directory)
    print(f"wrote {len(written)} files to {root}/:")
    for path in written:
        print(f"  {path.relative_to(root)}")
    print(f"next: cd {args.directory} && snakemake --cores 2    (then open results/*/report.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
