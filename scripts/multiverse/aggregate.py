"""The multiverse table: one row per universe, its parameters, metrics and provenance."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from multiverse import METRICS, OPTIONAL_METRICS
from multiverse.failures import CAUSES
from multiverse.fidelity import LOW
from multiverse.runtime import atomic_write, read_json, read_record, versions
from multiverse.spec.strategies import uniform_round

#: Record fields that describe how a universe's training went (``failure``: a failed
#: one's cause, :data:`multiverse.failures.CAUSES`).
OUTCOME_FIELDS = ("status", "failure", "error", "diverged_epoch", "epochs_run")
#: What :func:`aggregate` reads of every metrics record.
RECORD_FIELDS = ("id", "round", "params", "metrics", "status")


def universe_row(record: Mapping[str, Any], space_names: Sequence[str], metrics: Sequence[str] | None = None,
                 ) -> dict[str, Any]:
    """Flatten one ``metrics`` record: its ``metrics`` (a user's declared metrics; None:
    the built-in trainer's, :data:`multiverse.METRICS` and the optional ones it holds).
    Wall-clock timings are left out so that the table is identical between runs of the
    same config."""
    row: dict[str, Any] = {k: record.get(k, 0) for k in ("id", "round", "index", "replicate", "seed")}
    row["strategy"] = record.get("strategy")
    # how the design drew it: the inverse-probability weight relative to the uniform
    # multiverse (NaN when a greedy round chose it) and times drawn (multiverse.estimators)
    row["design_weight"] = record.get("design_weight", float("nan"))
    row["design_draws"] = record.get("design_draws", float("nan"))
    # the universe a row belongs to: its own id, or the one whose seeds it adds to
    row["universe"] = record.get("replicate_of") or record["id"]
    row.update({n: record["params"].get(n) for n in space_names})
    if metrics is None:
        metrics = list(METRICS) + [m for m in OPTIONAL_METRICS if m in record["metrics"]]
    row.update({m: record["metrics"][m] for m in metrics})
    row.update({k: record.get(k) for k in OUTCOME_FIELDS})
    if "low" in record:  # a multi-fidelity study (aggregate's with_fidelity)
        row.update({LOW + m: v for m, v in record["low"].items()})
        row.update(record["fidelity"])
    row.update({f"version_{k}": v for k, v in sorted(record.get("versions", {}).items())})
    return row


def multiverse_table(
    records: Sequence[Mapping[str, Any]], space_names: Sequence[str], provenance: Mapping[str, str],
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per universe, sorted by round and index, with provenance columns."""
    df = pd.DataFrame([universe_row(r, space_names, metrics) for r in records])
    df = df.sort_values(["round", "index", "replicate"], kind="stable").reset_index(drop=True)
    for k, v in provenance.items():
        df[k] = v
    df["error"] = df["error"].astype("string")
    df["failure"] = df["failure"].astype("string")
    df["diverged_epoch"] = df["diverged_epoch"].astype("Int64")
    for col in ("design_weight", "design_draws"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df


def write_table(df: pd.DataFrame, parquet_path: str, csv_path: str) -> None:
    atomic_write(parquet_path, lambda tmp: df.to_parquet(tmp, index=False, engine="pyarrow"))
    atomic_write(csv_path, lambda tmp: df.to_csv(tmp, index=False, float_format="%.10g"))


def with_fidelity(records: Sequence[dict[str, Any]], low_paths: Sequence[str], continuation_paths: Sequence[str],
                  metrics: Sequence[str] | None = None) -> None:
    """A multi-fidelity study's columns (:mod:`multiverse.fidelity`), added to each
    full-fidelity metrics record in place: every metric's low-fidelity value
    (``low_<metric>``), whether the universe was ``continued``, its
    ``continuation_probability`` (as the draw stated it), whether it trained on
    (``fidelity_trained``: not when its low fidelity was final) and the low fidelity's
    epochs (``fidelity_epochs``)."""
    low = {(r["id"], r.get("replicate", 0)): r for r in (read_record(p, RECORD_FIELDS) for p in low_paths)}
    drawn = {u["id"]: u for c in map(read_json, continuation_paths) for u in c["universes"]}
    for r in records:
        lr, d = low[(r["id"], r.get("replicate", 0))], drawn[r["id"]]
        names = metrics if metrics is not None else list(METRICS) + [m for m in OPTIONAL_METRICS if m in lr["metrics"]]
        r["low"] = {m: lr["metrics"].get(m, float("nan")) for m in names}
        r["fidelity"] = {"continued": d["continued"], "continuation_probability": d["probability"],
                         "fidelity_trained": d["continued"] and not d["final"],
                         "fidelity_epochs": lr.get("epochs_run")}


def aggregate(
    metrics_paths: Sequence[str], design_paths: Sequence[str], space_names: Sequence[str],
    config_hash: str, parquet_path: str, csv_path: str, metrics: Sequence[str] | None = None,
    low_paths: Sequence[str] | None = None, continuation_paths: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Build and write the multiverse table from the metrics records and design states
    (and, in a multi-fidelity study, the low-fidelity metrics and continuation draws:
    :func:`with_fidelity`)."""
    designs = {d["round"]: d for d in map(read_json, design_paths)}
    records = []
    for path in metrics_paths:
        r = read_record(path, RECORD_FIELDS)
        design = designs[r["round"]]
        r["versions"] = {**r.get("versions", {}), **{k: v for k, v in design["versions"].items() if k != "python"}}
        r["strategy"] = design["strategy"]
        drawn = next((u for u in design["universes"] if u["index"] == r.get("index")), {})
        uniform = uniform_round(design["strategy"], r["round"])  # a design file before weights
        r["design_weight"] = drawn.get("weight", 1.0 if uniform else None)
        r["design_draws"] = drawn.get("draws", 1 if uniform else None)
        records.append(r)
    if low_paths:
        with_fidelity(records, low_paths, continuation_paths, metrics)
    provenance = {"config_hash": config_hash, **{f"version_{k}": v for k, v in versions(["pandas", "pyarrow"]).items() if k != "python"}}
    df = multiverse_table(records, space_names, provenance, metrics)
    write_table(df, parquet_path, csv_path)
    return df


def failures_by_cause(df: pd.DataFrame) -> dict[str, int]:
    """Failed training runs (rows of the table) by cause, every cause of
    :data:`multiverse.failures.CAUSES` in its order, zeros included. A table written
    before the ``failure`` column reads a failed run's cause from its error."""
    failed = df[df["status"] == "failed"]
    if "failure" in failed:
        causes = failed["failure"].fillna("raised").astype(str)
    else:  # a table without the column (older, or one that had no failures to record)
        errors = failed["error"] if "error" in failed else pd.Series("", index=failed.index)
        causes = errors.fillna("").astype(str).map(
            lambda e: "out of memory" if "out of memory" in e else "raised")
    counts = causes.value_counts().to_dict()
    return {c: int(counts.pop(c, 0)) for c in CAUSES} | {c: int(n) for c, n in counts.items()}


def status_table(df: pd.DataFrame) -> pd.DataFrame:
    """The report's status table: training runs by outcome, ``ok``, ``diverged`` and
    the rest, then the failed ones by cause (:func:`failures_by_cause`)."""
    statuses = df["status"].value_counts().to_dict()
    rows = [(s, "", int(n)) for s, n in statuses.items() if s != "failed"]
    rows += [("failed", cause, n) for cause, n in failures_by_cause(df).items()]
    return pd.DataFrame(rows, columns=["status", "cause", "training runs"])
