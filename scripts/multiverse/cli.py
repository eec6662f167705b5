"""The ``multiverse`` command (pyproject.toml's console script).

``multiverse status [STUDY] [--configfile FILE] [--results DIR]`` prints one screen on a
study, running or done (:mod:`multiverse.status`): its training runs by round and state,
the running shards' ETA and each claim's latest verdict. It only reads.

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
from multiverse.spec import load_config, round_sizes, with_defaults
from multiverse.status import screen

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


def status(study: str | None, configfile: str | Path, results: str | Path) -> str:
    """The status screen (:func:`multiverse.status.screen`) of ``study``, by default the
    config's; the config, where it is found, gives the planned rounds and the seeds."""
    config = None
    if Path(configfile).is_file():
        config = with_defaults(load_config(configfile))
    if study is None:
        if config is None:
            raise FileNotFoundError(f"no study named and no {configfile} to read it from")
        study = config["study"]
    out = Path(results) / study
    if not out.is_dir():
        raise FileNotFoundError(f"{out} does not exist: no results of study {study!r} yet")
    same = config is not None and config["study"] == study
    sizes = round_sizes(config) if same else None
    seeds = config["training"]["seeds"] if same else 1 + max(
        (int(p.name[4:]) for p in out.glob("universes/r*/s*/u*/seed*")), default=0)
    return screen(study, out, sizes, seeds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="multiverse", description="A reproducible multiverse analysis of ML claims.")
    parser.add_argument("--version", action="version", version=f"multiverse {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    new = commands.add_parser("init", help="write a new study project (runs as is: cd DIR && snakemake --cores 2)")
    new.add_argument("directory", help="the project's folder (created; must be new or empty)")
    new.add_argument("--template", choices=TEMPLATES, default="function",
                     help="function: your training as a Python function (default); command: a script "
                          "run once per universe; builtin: the workflow's own trainer on digits")
    look = commands.add_parser("status", help="one screen on a study, running or done (it only reads its results)")
    look.add_argument("study", nargs="?", help="the study (default: the config's)")
    look.add_argument("--configfile", default="config/config.yaml", help="the study's config (default: %(default)s)")
    look.add_argument("--results", default="results", help="the results folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.command == "status":
        try:
            print(status(args.study, args.configfile, args.results))
        except FileNotFoundError as err:
            parser.error(str(err))
        return 0
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
