"""The config reference (``config/README.md``), generated from the schema's descriptions
so that the two cannot drift (``tests/test_config.py`` checks that they agree).

Regenerate it with::

    PYTHONPATH=scripts python -m multiverse.config_reference > config/README.md
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterator, Mapping

import yaml

from multiverse.spec import SCHEMA

HEADER = """# Config reference

Every key of a study's config (`config/config.yaml`, a preset in `config/studies/`, or
your own project's), its type, its default and what it means. Generated from
`workflow/schemas/config.schema.yaml` by `python -m multiverse.config_reference`; do
not edit by hand. Keys without a default and not marked required are optional.

A `--configfile` holding a whole study (with a `study` key) stands alone; one without
(an overlay such as `config/studies/cluster/*.yaml`) is merged key by key into the
config before it. Relative paths resolve against the working directory (the folder
Snakemake runs in, or `--directory`).
"""


def describe_type(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        return "one of " + ", ".join(f"`{v}`" for v in spec["enum"])
    if "const" in spec:
        return f"`{spec['const']}`"
    kind = spec.get("type", "")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array" and "items" in spec:
        return f"list of {describe_type(spec['items'])}"
    bounds = [f"{op} {spec[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                              ("maximum", "<="), ("exclusiveMaximum", "<")) if k in spec]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def rows(spec: Mapping[str, Any], prefix: str = "", required: tuple = ()) -> Iterator[tuple[str, str, str, str]]:
    """(key, type, default, meaning) of every key under ``spec``, depth first."""
    for name, sub in (spec.get("properties") or {}).items():
        key = f"{prefix}{name}"
        default = f"`{json.dumps(sub['default'])}`" if "default" in sub else ("required" if name in required else "")
        yield key, describe_type(sub), default, " ".join(str(sub.get("description", "")).split())
        yield from children(sub, key)


def children(spec: Mapping[str, Any], key: str) -> Iterator[tuple[str, str, str, str]]:
    if spec.get("type") == "array" and isinstance(spec.get("items"), Mapping) and "properties" in spec["items"]:
        yield from rows(spec["items"], f"{key}[].", tuple(spec["items"].get("required", ())))
    if "properties" in spec:
        yield from rows(spec, f"{key}.", tuple(spec.get("required", ())))
    extra = spec.get("additionalProperties")
    if isinstance(extra, Mapping):
        placeholder = f"{key}.<name>"
        merged: dict[str, Any] = {"properties": {}}
        for part in (extra, extra.get("then") or {}, extra.get("else") or {}):
            for k, v in (part.get("properties") or {}).items():
                merged["properties"].setdefault(k, v)
        yield from rows(merged, f"{placeholder}.", tuple(extra.get("required", ())))


def markdown(schema: Mapping[str, Any]) -> str:
    lines = [HEADER]
    for name, sub in schema["properties"].items():
        lines += [f"## `{name}`", ""]
        table = [(name, describe_type(sub), f"`{json.dumps(sub['default'])}`" if "default" in sub else
                  ("required" if name in schema.get("required", ()) else ""),
                  " ".join(str(sub.get("description", "")).split()))] + list(children(sub, name))
        lines += ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
        lines += [f"| `{k}` | {t} | {d} | {m.replace('|', '/')} |" for k, t, d, m in table]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    sys.stdout.write(markdown(yaml.safe_load(SCHEMA.read_text())))


if __name__ == "__main__":
    main()
