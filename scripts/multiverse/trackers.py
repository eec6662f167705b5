"""A finished study exported to an experiment tracker (config ``report.trackers``, rule
``export_mlflow``): the study is one MLflow experiment, named after it; each universe and
seed is one run (its choices and place in the design as params, its per-epoch history and
final metrics, its outcome as the run's status and tags); the claims' verdicts are the
study's own run, ``claims``.

Building the runs (:func:`universe_runs`, :func:`claims_run`) reads the study's files and
needs no tracker. Writing them (:func:`write_mlflow`) is MLflow's client, imported there:
it is an optional extra (``pip install "multiverse-analysis[mlflow]"``). An export replaces
the runs an earlier export wrote to the same experiment, so exporting again never
duplicates one.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from multiverse.fidelity import LOW, NOT_CONTINUED
from multiverse.runtime import read_json, read_record
from multiverse.spec.config import TRACKERS

#: The tag that names what a run of the export is (``r0u000/seed0``, or ``claims``): an
#: export finds the runs it wrote before by it.
RUN_KEY = "multiverse.run"
#: A universe's outcome (the table's ``status``) as MLflow's run status. A diverged universe
#: is a result of the multiverse (accuracies at chance), so its run finished; the ``status``
#: tag tells it from an ``ok`` one.
RUN_STATUS = {"ok": "FINISHED", "diverged": "FINISHED", "failed": "FAILED",
              # design.fidelity: trained at the low fidelity only (multiverse.fidelity)
              NOT_CONTINUED: "FINISHED"}
#: The answers a claim's verdict may rest on (``rests_on``) and their key in claims.json.
ANSWERS = {"model": "gp", "design": "design"}
#: A claim answer's numbers logged as metrics: the estimate, its interval and P(holds).
ANSWER_FIELDS = ("effect", "effect_lo", "effect_hi", "p_holds")
#: MLflow's limits: a tag's value (characters) and a batch's params and metrics.
TAG_LENGTH, PARAMS_PER_BATCH, METRICS_PER_BATCH = 5000, 100, 1000


@dataclass
class TrackedRun:
    """One run as a tracker holds it: ``key`` (its :data:`RUN_KEY` tag), its name, params
    and tags (strings), ``metrics`` as ``(name, value, step)`` and ``status`` (MLflow's
    ``FINISHED`` or ``FAILED``)."""

    key: str
    name: str
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: list[tuple[str, float, int]] = field(default_factory=list)
    status: str = "FINISHED"


def number(value: Any) -> float | None:
    """``value`` as a finite float, or None (a missing, NaN, infinite or non-numeric value:
    a tracker gets only numbers, the table keeps the rest)."""
    if isinstance(value, bool) or value is None or pd.isna(value):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def text(value: Any) -> str:
    """A param's or tag's value as a string, cut to :data:`TAG_LENGTH`."""
    return str(value)[:TAG_LENGTH]


def universe_runs(table: pd.DataFrame, records: Sequence[Mapping[str, Any]], space: Sequence[str],
                  metrics: Sequence[str]) -> list[TrackedRun]:
    """One run per train record (a universe under one seed, ``train.json``), in order.

    Params: the universe's choices (a conditional dimension it does not use is left out),
    its round, index, shard, slot, replicate, seed, the universe it belongs to and the
    round's design strategy. Metrics: each numeric field of its per-epoch ``history`` as
    ``epoch/<field>`` at step ``epoch`` (they are the trainer's running values, not the
    final metrics of the same name), and ``metrics`` from its row of the study ``table``
    (:mod:`multiverse.aggregate`) at step ``epochs_run``. Tags: its ``status``,
    ``failure`` (cause) and ``error`` of a failed one, ``diverged_epoch`` of a diverged one,
    and the table's ``config_hash``."""
    rows = {(r["id"], int(r["replicate"])): r for r in table.to_dict("records")}
    runs = []
    for record in records:
        key = (record["id"], int(record.get("replicate") or 0))
        if key not in rows:
            raise ValueError(f"universe {key[0]} seed {key[1]} has a train record but no row in the study table: "
                             "the table is older than the records (rerun the aggregate rule)")
        row = rows[key]
        name = f"{key[0]}/seed{key[1]}"
        params = {d: text(record["params"][d]) for d in space if record["params"].get(d) is not None}
        params.update({k: text(record[k]) for k in ("round", "index", "shard", "slot", "seed")
                       if record.get(k) is not None})
        params.update(replicate=str(key[1]), universe=text(row["universe"]), strategy=text(row["strategy"]))
        tags = {RUN_KEY: name, "status": text(row["status"]), "config_hash": text(row.get("config_hash"))}
        for k in ("failure", "error", "diverged_epoch"):
            if row.get(k) is not None and not pd.isna(row[k]):
                tags[k] = text(row[k])
        steps = []
        for i, entry in enumerate(record.get("history") or [], start=1):
            epoch = entry.get("epoch")
            step = int(epoch) if number(epoch) is not None and float(epoch).is_integer() else i
            steps += [(f"epoch/{k}", x, step) for k, v in entry.items()
                      if k != "epoch" and (x := number(v)) is not None]
        final = int(number(row.get("epochs_run")) or 0)
        steps += [(m, x, final) for m in metrics if (x := number(row.get(m))) is not None]
        if "continued" in row:  # a multi-fidelity study: its low fidelity's metrics, and the draw
            low = int(number(row.get("fidelity_epochs")) or 0)
            steps += [(LOW + m, x, low) for m in metrics if (x := number(row.get(LOW + m))) is not None]
            tags.update(continued=text(bool(row["continued"])),
                        continuation_probability=text(row["continuation_probability"]))
        runs.append(TrackedRun(key=name, name=name, params=params, tags=tags, metrics=steps,
                               status=RUN_STATUS[row["status"]]))
    return runs


def claims_run(claims: Mapping[str, Any]) -> TrackedRun:
    """The study's own run ``claims`` from ``claims.json`` (:func:`multiverse.report.build_report`):
    per claim ``<name>.verdict``, ``<name>.rests_on`` and ``<name>.summary`` as tags; as
    metrics the estimate, its 95% interval and P(holds) of the answer the verdict rests on
    (``<name>.effect``, ``<name>.effect_lo``, ...) and of each answer by its name
    (``<name>.gp.effect``, ``<name>.design.p_holds``, ``<name>.observed.effect``, ...).
    A trend's conditions stay in claims.json: the run holds the claim's own reading."""
    tags = {RUN_KEY: "claims"}
    metrics = []
    for c in claims["claims"]:
        name = c["name"]
        tags.update({f"{name}.verdict": text(c.get("verdict")), f"{name}.rests_on": text(c.get("rests_on")),
                     f"{name}.summary": text(c.get("summary"))})
        rested = c.get(ANSWERS.get(c.get("rests_on"), "")) or {}
        metrics += [(f"{name}.{f}", x, 0) for f in ANSWER_FIELDS if (x := number(rested.get(f))) is not None]
        for answer in ("gp", "design", "observed"):
            found = c.get(answer) or {}
            metrics += [(f"{name}.{answer}.{f}", x, 0) for f in ANSWER_FIELDS if (x := number(found.get(f))) is not None]
    for k in ("n_universes", "n_runs"):
        if number(claims.get(k)) is not None:
            metrics.append((k, float(claims[k]), 0))
    return TrackedRun(key="claims", name="claims", tags=tags, metrics=metrics)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


@contextmanager
def mlflow_environment(tracking_uri: str) -> Iterator[None]:
    """The environment MLflow's client runs in while an export writes, restored after.
    MLflow 3 refuses a file store (``file:``) unless ``MLFLOW_ALLOW_FILE_STORE`` is true: an
    export's own store is one, so it is set where the environment does not say otherwise;
    so is ``MLFLOW_DISABLE_TELEMETRY`` (an export sends nothing anywhere but its store)."""
    wanted = {"MLFLOW_DISABLE_TELEMETRY": "true"}
    if tracking_uri.startswith("file:"):
        wanted["MLFLOW_ALLOW_FILE_STORE"] = "true"
    added = [k for k in wanted if k not in os.environ]
    os.environ.update({k: wanted[k] for k in added})
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def mlflow_client(tracking_uri: str):
    """MLflow's client of ``tracking_uri`` (inside :func:`mlflow_environment`), or an
    ImportError that says how to install it."""
    try:
        # deferred: mlflow is an optional extra; building the runs needs none of it
        from mlflow.tracking import MlflowClient
    except ImportError as err:
        raise ImportError(f"report.trackers names mlflow, which is not installed: {TRACKERS['mlflow']['install']}") \
            from err
    return MlflowClient(tracking_uri)


def exported_runs(client, experiment_id: str) -> list:
    """The active runs of the experiment that an export wrote (those with a :data:`RUN_KEY` tag)."""
    found, token = [], None
    while True:
        page = client.search_runs([experiment_id], max_results=1000, page_token=token)
        found += [r for r in page if RUN_KEY in r.data.tags]
        token = page.token
        if not token:
            return found


def write_mlflow(runs: Sequence[TrackedRun], tracking_uri: str, experiment: str) -> dict[str, Any]:
    """Write ``runs`` to the MLflow experiment ``experiment`` at ``tracking_uri`` (created,
    or restored if deleted), after deleting the runs an earlier export wrote there; the
    experiment's other runs are left as they are. Returns the experiment's id, each run's
    id by its key and how many earlier runs were replaced."""
    with mlflow_environment(tracking_uri):
        client = mlflow_client(tracking_uri)
        # deferred: mlflow is an optional extra (see mlflow_client)
        from mlflow.entities import Metric, Param

        found = client.get_experiment_by_name(experiment)
        if found is None:
            experiment_id = client.create_experiment(experiment)
        else:
            experiment_id = found.experiment_id
            if found.lifecycle_stage != "active":
                client.restore_experiment(experiment_id)
        earlier = exported_runs(client, experiment_id)
        for old in earlier:
            client.delete_run(old.info.run_id)
        now = int(time.time() * 1000)
        ids = {}
        for run in runs:
            run_id = client.create_run(experiment_id, run_name=run.name, tags=run.tags).info.run_id
            for part in chunks([Param(k, v) for k, v in run.params.items()], PARAMS_PER_BATCH):
                client.log_batch(run_id, params=part)
            for part in chunks([Metric(k, v, now, step) for k, v, step in run.metrics], METRICS_PER_BATCH):
                client.log_batch(run_id, metrics=part)
            client.set_terminated(run_id, status=run.status)
            ids[run.key] = run_id
    return {"tracking_uri": tracking_uri, "experiment": experiment, "experiment_id": experiment_id,
            "runs": ids, "replaced": len(earlier)}


def export_mlflow(table_path: str, claims_path: str, record_paths: Sequence[str], space: Sequence[str],
                  metrics: Sequence[str], experiment: str, tracking_uri: str) -> dict[str, Any]:
    """Rule ``export_mlflow``: the study (its table, its universes' train records and its
    claims.json) as the MLflow experiment ``experiment`` (:func:`write_mlflow`). Returns
    the summary the rule writes, with the runs' count by status."""
    table = pd.read_parquet(table_path)
    records = [read_record(p, ("id", "round", "params", "status")) for p in record_paths]
    runs = universe_runs(table, records, space, metrics) + [claims_run(read_json(claims_path))]
    summary = write_mlflow(runs, tracking_uri, experiment)
    summary["statuses"] = {k: int(v) for k, v in table["status"].value_counts().sort_index().items()}
    return summary
