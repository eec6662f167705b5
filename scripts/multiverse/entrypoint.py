"""A user's own training (and data) code, run for each universe (rule ``train``).

Two forms, set in the config's ``training`` section:

- ``entrypoint: "module:function"``, imported from the folders of ``training.pythonpath``
  (relative to the working directory) and called in-process, universe after universe,
  inside the ``train`` job. It is given, by name, whichever of these its signature takes
  (all of them if it takes ``**kwargs``): every dimension by its own name (an inactive
  conditional one as None), ``params`` (the same as one dict), ``seed``, ``device``,
  ``run_dir`` (a folder of its own for checkpoints and artefacts), ``data`` (what the
  data step prepared, if one ran) and ``progress``, a callback
  ``progress(epoch=..., **metrics)``. It returns a mapping of metric values. It needs no
  import from this project.
- ``command: "python train.py --lr {lr} --seed {seed} --out {out}"``, one process per
  universe, for code in any language. The template is split into arguments first
  (:func:`shlex.split`) and each argument is filled in on its own, so no value is ever
  read by a shell. An argument naming an inactive dimension is left out (with the
  ``--flag`` before it). The command writes a JSON object of metrics to ``{out}``; an
  optional ``history`` list in it becomes the universe's history. Its output goes to the
  job's log line by line, as it comes, so ``tail -f`` on the log follows it.

Whatever goes wrong with one universe is recorded as that universe's ``failed`` outcome
(its cause, error and id, after ``training.retries`` more attempts), and the shard goes
on: the function raised or ran out of memory, the result is not a mapping, lacks a
declared metric, or holds one that is not a finite number within its declared range; the
command exited non-zero, was killed by a signal or wrote no JSON; and, under the train
job's guard (:func:`multiverse.failures.guard`), the function ended its process or the
universe ran past ``training.timeout``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import math
import pickle
import shlex
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from string import Formatter
from typing import Any, Callable, Mapping, Sequence

from multiverse import shard
from multiverse.errors import Preempted, UniverseDied, UniverseError  # noqa: F401  (UniverseError re-exported)
from multiverse.fidelity import low_epochs, not_continued_record, shard_draws
from multiverse.failures import ATTEMPTS, TAIL_LINES, die_with_parent, exit_words, stop_requested, with_output
from multiverse.runtime import (
    atomic_write, resolve_device, take_gpu_share, universe_fields, versions, write_json)
from multiverse.shard import lane_slots, train_slots


def load(spec: str, pythonpath: Sequence[str] = (), base: str | Path = ".") -> Callable:
    """The callable ``module:function`` (the function may be dotted, ``module:Class.method``),
    with the folders of ``pythonpath`` (relative to ``base``) searched first."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"expected 'module:function', got {spec!r}")
    for folder in reversed(list(pythonpath)):
        path = str((Path(base) / folder).resolve())
        if path not in sys.path:
            sys.path.insert(0, path)
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is a {type(obj).__name__}, not a function")
    return obj


def call(fn: Callable, available: Mapping[str, Any]) -> Any:
    """``fn`` called with those of ``available`` its signature names (all with ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn(**available)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn(**available)
    return fn(**{p.name: available[p.name] for p in params
                 if p.name in available and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)})


def checked_metrics(result: Any, declared: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The declared metrics of ``result``, each a finite number within its range; raises
    :class:`UniverseError` saying what is wrong. Undeclared keys are left out."""
    if not isinstance(result, Mapping):
        raise UniverseError(f"the training returned a {type(result).__name__}, expected a mapping of metrics "
                            f"{sorted(declared)}")
    missing = [m for m in declared if m not in result]
    if missing:
        raise UniverseError(f"the training's result lacks the declared metric(s) {missing} (it has {sorted(result)})")
    out = {}
    for name, decl in declared.items():
        try:
            v = float(result[name])
        except (TypeError, ValueError):
            raise UniverseError(f"metric {name!r} is {result[name]!r}, expected a number") from None
        if not math.isfinite(v):
            raise UniverseError(f"metric {name!r} is {v}, expected a finite number")
        low, high = decl.get("range") or (None, None)
        if (low is not None and v < low) or (high is not None and v > high):
            raise UniverseError(f"metric {name!r} is {v}, outside its declared range [{low}, {high}]")
        out[name] = v
    return out


class ShardClock:
    """Where a shard's job stands, for the ETA of its epoch lines: the epochs each universe
    plans (slot order; None where not known, as for a user's training), the epochs each
    has done, and the seconds of the epochs trained in this job so far. ``lane`` ``(i, k)``:
    lane i of the job's k (``training.per_device``), whose universes these are; each lane
    runs its own clock, so its lines count and time the lane's universes and say so."""

    def __init__(self, planned: Sequence[int | None], lane: tuple[int, int] = (0, 1)):
        self.planned = list(planned)
        self.lane = lane
        self.done = [0] * len(self.planned)
        self.finished: dict[int, int] = {}
        self.seconds, self.timed = 0.0, 0

    def epoch(self, slot: int, epoch: Any, seconds: float) -> None:
        """Universe ``slot`` finished its epoch ``epoch`` in ``seconds`` of this job."""
        self.done[slot] = int(epoch) if isinstance(epoch, int) else self.done[slot] + 1
        self.seconds, self.timed = self.seconds + seconds, self.timed + 1

    def finish(self, slot: int, epochs: int) -> None:
        """Universe ``slot`` is done (trained, failed, diverged or kept) after ``epochs``."""
        self.finished[slot] = int(epochs)

    def eta(self) -> float | None:
        """Seconds until the shard is done: the epochs left (a universe of unknown length
        counted as long as the finished ones, on average) times the mean seconds per epoch
        so far; None before any epoch was timed or while a length cannot be guessed."""
        if not self.timed:
            return None
        lengths = [e for e in self.finished.values() if e > 0]
        typical = sum(lengths) / len(lengths) if lengths else None
        left = 0.0
        for slot, planned in enumerate(self.planned):
            if slot in self.finished:
                continue
            planned = typical if planned is None else planned
            if planned is None:
                return None
            left += max(planned - self.done[slot], 0)
        return left * self.seconds / self.timed


def duration(seconds: float) -> str:
    """``seconds`` as ``45s``, ``3m05s`` or ``2h03m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s // 60 % 60:02d}m"


class Progress:
    """The ``progress(epoch=..., **metrics)`` callback: each call is one line of the job's
    log and one entry of the universe's ``history``. The line holds the universe, the
    epoch (of its planned total where ``clock`` knows it), the metrics, the seconds since
    its training started and, with a ``clock`` (:class:`ShardClock`; this universe is its
    ``slot``), the universe's place in the shard and the shard's ETA::

        r0u001 epoch 2/20 train_loss=0.41 train_acc=0.88 val_loss=0.45 val_acc=0.87 (3.1s; universe 2/3, shard ETA 1m05s)
    """

    def __init__(self, universe_id: str, log: logging.Logger, clock: ShardClock | None = None, slot: int = 0):
        self.id, self.log, self.start, self.history = universe_id, log, time.perf_counter(), []
        self.clock, self.slot, self.last = clock, slot, self.start

    def __call__(self, epoch: Any = None, **metrics: Any) -> None:
        now = time.perf_counter()
        given = metrics.pop("seconds", None)
        seconds = float(given) if isinstance(given, (int, float)) else now - self.start
        entry = {"epoch": epoch, **{k: _plain(v) for k, v in metrics.items()}, "seconds": round(seconds, 3)}
        self.history.append(entry)
        if self.clock is None:
            self.log.info("%s epoch %s %s (%.1fs)", self.id, epoch, shown_metrics(entry), seconds)
            self.stop_if_asked(epoch)
            return
        # this epoch's own time in this job (a resumed universe's earlier epochs are not timed here)
        self.clock.epoch(self.slot, epoch, now - self.last)
        self.last = now
        log_epoch(self.log, self.id, entry, self.clock, self.slot)
        self.stop_if_asked(epoch)

    def stop_if_asked(self, epoch: Any) -> None:
        """The job was asked to stop (SIGTERM under the guard): a user's training stops at
        its next ``progress`` call; resuming is its own, from its ``run_dir``."""
        if stop_requested():
            raise Preempted(f"{self.id} stopped after its epoch {epoch}")


def shown_metrics(entry: Mapping[str, Any]) -> str:
    """A history entry's metrics as an epoch line shows them."""
    return " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in entry.items()
                    if k not in ("epoch", "seconds"))


def log_epoch(log: logging.Logger, universe_id: str, entry: Mapping[str, Any], clock: ShardClock, slot: int,
              where: str = "") -> None:
    """One epoch line of a universe in its shard (:class:`Progress`; a stacked universe's
    too, ``where`` saying so): the epoch of its planned total, its metrics, its seconds,
    its place in the shard (in its lane, with ``training.per_device`` lanes) and the shard's
    (the lane's) ETA."""
    planned, eta = clock.planned[slot], clock.eta()
    lane, lanes = clock.lane
    place = f"universe {slot + 1}/{len(clock.planned)}" + (f" of lane {lane + 1}/{lanes}, lane" if lanes > 1 else ", shard")
    log.info("%s epoch %s%s %s (%.1fs%s; %s ETA %s)", universe_id, entry["epoch"],
             "" if planned is None else f"/{planned}", shown_metrics(entry), entry["seconds"], where, place,
             "unknown" if eta is None else duration(eta))


def _plain(v: Any) -> Any:
    """A JSON-ready value (numpy and torch scalars as Python numbers)."""
    if hasattr(v, "item") and callable(v.item):
        try:
            return v.item()
        except (ValueError, RuntimeError):
            pass
    return v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)


def command_args(template: str, values: Mapping[str, Any], inactive: Sequence[str] = ()) -> list[str]:
    """The argument list of ``template`` filled in with ``values``: split first, then each
    argument formatted on its own (so a value is one argument, whatever it holds). An
    argument naming one of the ``inactive`` dimensions is dropped, and so is a bare
    ``--flag`` just before it."""
    args: list[str] = []
    for tok in shlex.split(template):
        fields = [f for _, f, _, _ in Formatter().parse(tok) if f]
        if any(f in inactive for f in fields):
            if tok.strip("{}") in inactive and args and args[-1].startswith("-") and not _has_field(args[-1]):
                args.pop()
            continue
        args.append(tok.format(**values))
    return args


def _has_field(tok: str) -> bool:
    return any(f for _, f, _, _ in Formatter().parse(tok))


def run_command(args: Sequence[str], out: Path, universe_id: str, log: logging.Logger,
                cwd: str | Path = ".") -> Any:
    """Run one universe's command (its output logged line by line) and read its metrics
    JSON. A command that exits non-zero or is killed by a signal raises
    :class:`multiverse.failures.UniverseDied` (its status or signal and last output
    lines); a missing or unreadable file :class:`UniverseError`. The command dies with
    the worker that runs it (Linux) and shares its process group, so that a time limit
    stops it and what it started (:func:`multiverse.failures.guard`)."""
    if out.exists():
        out.unlink()  # a file left by an earlier attempt must not count as this one's
    log.info("%s $ %s", universe_id, shlex.join(args))
    tail: list[str] = []
    try:
        proc = subprocess.Popen(list(args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", preexec_fn=die_with_parent if sys.platform.startswith("linux") else None)
    except OSError as err:
        failure = UniverseError(f"the command could not start: {err}")
        failure.cause = "raised"
        raise failure from None
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        log.info("%s | %s", universe_id, line)
        tail = (tail + [line])[-TAIL_LINES:]
    rc = proc.wait()
    if stop_requested():  # SIGTERM reached the command too: the job stops, the universe has not failed
        raise Preempted(f"{universe_id}'s command stopped ({exit_words(rc)})")
    if rc != 0:
        raise UniverseDied(with_output(f"the command {exit_words(rc)}", tail))
    if not out.exists():
        raise UniverseError(f"the command exited 0 but wrote no metrics JSON at {out}")
    try:
        return json.loads(out.read_text())
    except json.JSONDecodeError as err:
        raise UniverseError(f"the metrics file {out} is not JSON: {err}") from None


def train_user_universe(universe: Mapping[str, Any], training: Mapping[str, Any], declared: Mapping[str, Any],
                        run_dir: Path, data: Any, data_path: str | None, log: logging.Logger,
                        fn: Callable | None = None, clock: ShardClock | None = None, slot: int = 0,
                        stop_after: int | None = None) -> dict[str, Any]:
    """One attempt at one universe with the user's entry point (``fn``) or command; its
    record (``status`` ``ok``, ``metrics``, ``history``) or a raised error. ``clock`` and
    ``slot``: the shard's, for the ETA of the epoch lines (:class:`Progress`).

    ``stop_after`` (``design.fidelity``'s low fidelity, :mod:`multiverse.fidelity`): the
    code is given it (an entry point as ``stop_after``, a command as ``{stop_after}``,
    left out with its flag when None): train the first ``stop_after`` epochs of the full
    run, under its full schedule, save in ``run_dir`` what resuming needs, and return the
    metrics there. Called again with ``stop_after`` None and the same ``run_dir``, it
    resumes and trains to the end. The record says ``fidelity_epochs`` where the low
    fidelity stopped before the universe's epochs (``epochs`` among its choices, else
    ``training.epochs``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    params = dict(universe["params"])
    device = resolve_device(training.get("device", "cpu"))  # checked once per shard (train_user_shard)
    progress = Progress(universe["id"], log, clock, slot)
    if fn is not None:
        result = call(fn, {**params, "params": params, "seed": universe["seed"], "device": device,
                           "run_dir": str(run_dir), "data": data, "progress": progress, "stop_after": stop_after})
        history = progress.history
    else:
        out = run_dir / "metrics.json"
        values = {**{k: v for k, v in params.items() if v is not None}, "seed": universe["seed"], "out": str(out),
                  "run_dir": str(run_dir), "device": device, "data": data_path or "", "python": sys.executable,
                  **({"stop_after": stop_after} if stop_after is not None else {})}
        inactive = [k for k, v in params.items() if v is None] + (["stop_after"] if stop_after is None else [])
        args = command_args(training["command"], values, inactive)
        result = run_command(args, out, universe["id"], log)
        # its epochs were logged live, from its output; its own history is kept as written
        history = result.get("history", []) if isinstance(result, Mapping) else []
    metrics = checked_metrics(result, declared)
    planned = params.get("epochs") or training.get("epochs")
    return {"status": "ok", "metrics": metrics, "history": history,
            "train_seconds": time.perf_counter() - progress.start, "epochs_run": len(history),
            **({"fidelity_epochs": stop_after} if stop_after is not None and (planned is None or stop_after < planned)
               else {})}


def read_prepared(path: str | None) -> Any:
    """What the data step prepared: the built-in dataset's arrays, or a user data entry
    point's object (pickled by ``prepare_data``); None without a data step."""
    if path is None:
        return None
    if path.endswith(".npz"):
        # deferred: data loads numpy, and multiverse.spec imports this module when the Snakefile is parsed (a user entry point)
        from multiverse.data import read_data

        return read_data(path)
    with open(path, "rb") as fh:
        return pickle.load(fh)


def prepare_user_data(spec: str, pythonpath: Sequence[str], seed: int, path: str | None, out: str) -> Any:
    """Rule ``prepare_data`` with ``data.entrypoint``: call it once (with ``seed`` and
    ``path``, the config's ``data.path``, where it takes them) and pickle what it returns."""
    data = call(load(spec, pythonpath), {"seed": seed, "path": path})

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)

    atomic_write(out, write)
    return data


#: A finished universe's record in its ``run/`` folder until its shard's job is done, so
#: that a rerun of a killed job keeps it (:func:`train_user_shard`). Snakemake deletes a
#: failed job's declared outputs; this file is not one.
KEPT_RECORD = "multiverse_record.json"
#: ``clear_runs(record_paths)``: a finished shard's kept records and attempts files
#: (:func:`multiverse.shard.clear_runs`), its declared records being what counts now;
#: the user's own files in ``run/``, and the folder itself, stay.
clear_runs = partial(shard.clear_runs, names=(KEPT_RECORD, ATTEMPTS), own_folder=False)


def read_kept(path: Path, key: Mapping[str, Any], declared: Mapping[str, Any], log: logging.Logger
              ) -> dict[str, Any] | None:
    """The record a universe finished under ``key`` in an earlier run of its shard, or
    None (a damaged file is reported and the universe trains again)."""
    if not path.exists():
        return None
    try:
        kept = json.loads(path.read_text())
        if kept.get("key") != key:
            return None
        record = kept["record"]
        if not isinstance(record, dict) or not {"status", "metrics", "train_seconds"} <= set(record) \
                or set(record["metrics"]) != set(declared):
            raise ValueError("it lacks the fields of a record")
        return record
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as err:
        log.warning("%s is damaged, not used (%s): the universe trains again", path, err)
        return None


def train_user_shard(universes: Sequence[Mapping[str, Any]], training: Mapping[str, Any],
                     declared: Mapping[str, Any], record_paths: Sequence[str], log: logging.Logger,
                     data_path: str | None = None, retries: int = 1, lane: tuple[int, int] = (0, 1),
                     fidelity: Mapping[str, Any] | None = None, subset: Sequence[int] | None = None,
                     user_runs: Sequence[str] | None = None) -> None:
    """Train each universe of a shard with the user's code and write its record (slot
    order): its identity, outcome, metrics (NaN for a failed one) and history. Each
    universe's ``run_dir`` is ``run/`` beside its record.

    A finished universe's record is also kept in its ``run_dir`` (:data:`KEPT_RECORD`)
    until the whole shard is done: when a killed job runs again, a universe finished
    under the same identity, training and metrics is not trained again (logged as
    ``kept``). Resuming inside a universe is the user's code's own (from its ``run_dir``).
    ``lane`` ``(i, k)``: only slots ``i, i + k, ...``, one of the k lanes of
    ``training.per_device`` (:func:`multiverse.failures.guard_lanes`); an entry point on
    CUDA gets its lane's share of the GPU's memory, a command reads it from the
    environment (``MULTIVERSE_GPU_SHARE``); a lane keeps its kept records until every
    lane is done (:func:`clear_runs`).

    ``fidelity`` (``design.fidelity``): each universe at its low fidelity only (its code
    given ``stop_after``, :func:`train_user_universe`). ``subset``: train only these
    slots (the continued universes of :func:`train_user_continued_shard`), each in
    ``user_runs``' folder (one a slot: its low fidelity's ``run_dir``, where it resumes).
    """
    device = resolve_device(training.get("device", "cpu"), log)  # no GPU where one is asked for: stop before any universe

    user_runs = list(user_runs) if user_runs is not None else [None] * len(record_paths)
    universes, record_paths, user_runs = lane_slots(universes, lane, record_paths, user_runs)
    if subset is not None:
        keep_slots = [i for i, u in enumerate(universes) if u["slot"] in set(subset)]
        universes, record_paths, user_runs = ([xs[i] for i in keep_slots] for xs in (universes, record_paths, user_runs))
    stops = [None if fidelity is None else low_epochs(fidelity, u["params"].get("epochs") or training.get("epochs"))
             for u in universes]
    fn = load(training["entrypoint"], training.get("pythonpath", [])) if training.get("entrypoint") else None
    data = read_prepared(data_path) if fn is not None else None
    if fn is not None:  # in this process: cap its CUDA memory to the lane's share
        take_gpu_share(device, log)
    env = versions(["numpy"])
    clock = ShardClock([None] * len(universes), lane)
    # JSON's form (tuples as lists), as the kept file holds it
    keys = [json.loads(json.dumps({"universe": universe_fields(u), "declared": declared, "training": {
        k: training.get(k) for k in ("entrypoint", "command", "pythonpath", "device")},
        **({"fidelity_epochs": k} if k is not None else {})})) for u, k in zip(universes, stops)]

    def read(path: Path, key: Mapping[str, Any]) -> tuple[None, dict[str, Any]] | None:
        record = read_kept(path, key, declared, log)
        return None if record is None else (None, record)

    def train(slot: int, u: Mapping[str, Any], run: Path) -> tuple[None, dict[str, Any]]:
        own = Path(user_runs[slot]) if user_runs[slot] is not None else run  # a continuation resumes in its low run_dir
        return None, train_user_universe(u, training, declared, own, data, data_path, log, fn, clock, slot,
                                         stop_after=stops[slot])

    def keep(run: Path, key: Mapping[str, Any], _: Any, record: Mapping[str, Any]) -> None:
        write_json(run / KEPT_RECORD, {"key": key, "record": record})

    def outcome(record: Mapping[str, Any]) -> str:
        return f" ({record.get('failure')}: {record['error']})" if record.get("error") else f" {record['metrics']}"

    train_slots(universes, record_paths, keys, log, kept_name=KEPT_RECORD, read_kept=read, train=train, keep=keep,
                clear_runs=clear_runs if subset is None else lambda _: None, outcome=outcome, env=env, clock=clock, retries=retries, lane=lane,
                failed={"metrics": {m: math.nan for m in declared}})


def train_user_continued_shard(universes: Sequence[Mapping[str, Any]], continuation: Mapping[str, Any],
                               training: Mapping[str, Any], declared: Mapping[str, Any],
                               low_records: Sequence[str], record_paths: Sequence[str], log: logging.Logger,
                               data_path: str | None = None, retries: int = 1) -> None:
    """Rule ``train_continued`` for a user's training, as
    :func:`multiverse.train.train_continued_shard` is for the built-in one: a continued
    universe's code is called again without ``stop_after`` in its low fidelity's
    ``run_dir`` (beside ``low_records``), where it resumes; one whose low fidelity was
    final keeps that record; one not continued is recorded ``not_continued`` (NaN
    metrics). The continued universes' kept records stay, so a rerun with a larger
    budget trains only the new continuations."""
    universes, draws, trained = shard_draws(universes, continuation)
    for slot, (u, d) in enumerate(zip(universes, draws)):
        if slot in trained:
            continue
        if d["continued"]:
            record = json.loads(Path(low_records[slot]).read_text())
        else:
            record = not_continued_record(universe_fields(u), d, metrics={m: math.nan for m in declared},
                                          versions=versions(["numpy"]))
            log.info("%s: not continued (probability %.3f)", u["id"], d["probability"])
        write_json(record_paths[slot], record)
    if trained:
        train_user_shard(universes, training, declared, record_paths, log, data_path=data_path, retries=retries,
                         subset=trained, user_runs=[str(shard.run_dir(p)) for p in low_records])
