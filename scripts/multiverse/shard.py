"""A shard's universes, one after another, whoever trains them: the built-in trainer
(:func:`multiverse.train.train_shard`) or the user's code
(:func:`multiverse.entrypoint.train_user_shard`).

Both keep the same books: a universe's attempts in its ``run/`` folder
(:class:`multiverse.failures.Attempts`), its finished result there too until the whole
shard is done (so that a rerun of a killed job keeps it), its record beside that
folder, and one log line per universe. What differs, how a universe trains and what its
result holds and is kept as, is given to :func:`train_slots` as callables.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from multiverse.failures import Attempts
from multiverse.ids import with_replicate
from multiverse.runtime import DeviceUnavailable, universe_fields, write_json

#: A universe's result: what its trainer keeps besides the record (the built-in's
#: weights; None for the user's code) and its record.
Result = tuple[Any, dict[str, Any]]


def shard_universes(design: Mapping[str, Any], shard: int, replicate: int, seed: int) -> list[dict[str, Any]]:
    """The universes of design round ``design``'s shard ``shard``, as trained under seed
    ``replicate`` (:func:`multiverse.ids.with_replicate`): what a train job trains."""
    return [with_replicate(u, int(replicate), seed) for u in design["universes"] if u["shard"] == int(shard)]


def run_dir(record_path: str | Path) -> Path:
    """A universe's ``run/`` folder, beside its record."""
    return Path(record_path).parent / "run"


def lane_slots(universes: Sequence[Mapping[str, Any]], lane: tuple[int, int],
               *paths: Sequence[str]) -> list[list[Any]]:
    """The shard's universes in slot order, and each of ``paths`` (one path a slot),
    those of ``lane`` ``(i, k)`` alone: slots ``i, i + k, ...``. Raises
    :class:`ValueError` unless the slots are those of the first of ``paths``."""
    universes = sorted(universes, key=lambda u: u["slot"])
    if [u["slot"] for u in universes] != list(range(len(paths[0]))):
        raise ValueError(f"shard holds slots {[u['slot'] for u in universes]}, expected {len(paths[0])}")
    return [list(x)[lane[0]::lane[1]] for x in (universes, *paths)]


def train_slots(
    universes: Sequence[Mapping[str, Any]],
    record_paths: Sequence[str],
    keys: Sequence[Mapping[str, Any]],
    log: logging.Logger,
    *,
    kept_name: str,
    read_kept: Callable[[Path, Mapping[str, Any]], Result | None],
    train: Callable[[int, Mapping[str, Any], Path], Result],
    keep: Callable[[Path, Mapping[str, Any], Any, dict[str, Any]], None],
    clear_runs: Callable[[Sequence[str]], None],
    outcome: Callable[[Mapping[str, Any]], str],
    env: Mapping[str, str],
    clock: Any,
    retries: int,
    lane: tuple[int, int],
    failed: Mapping[str, Any] | None = None,
    write: Callable[[int, Any], None] | None = None,
    quiet: Collection[int] = (),
) -> None:
    """Train a lane's universes (:func:`lane_slots`) one after another: slot ``i`` is
    ``universes[i]``, its record goes to ``record_paths[i]`` and its result is kept
    under ``keys[i]`` in its ``run/`` folder (:func:`run_dir`). When the lane is the
    whole shard, the ``run/`` folders are cleared at the end (``clear_runs(record_paths)``).

    A universe that an earlier run of its shard finished (``read_kept(run / kept_name,
    key)`` gives its result) is kept, logged ``kept``. Any other trains, ``train(slot,
    universe, run)``, under its :class:`multiverse.failures.Attempts`, up to ``1 +
    retries`` attempts (:class:`multiverse.runtime.DeviceUnavailable` is the node's
    fault and propagates); one whose attempts are used up gets their failed record,
    with ``failed``'s fields, and ``{}`` for its state. Its record, with its identity,
    its attempts and ``env``, is kept, ``keep(run, key, state, record)``, before its
    outputs are written: ``write(slot, state)`` (when given), then its record. Each
    universe ends with one log line, its outcome after its status as
    ``outcome(record)`` words it.

    ``clock``: the lane's :class:`multiverse.entrypoint.ShardClock` (not imported: that
    module imports this one), told of each universe done. ``quiet``: the slots the
    caller trained already in this job (the built-in trainer's stacks,
    :func:`multiverse.train.train_stacks`): they are kept without a ``kept`` line and
    ``clock`` counted them already.
    """
    for slot, (u, record_path) in enumerate(zip(universes, record_paths)):
        run, key = run_dir(record_path), keys[slot]
        kept = read_kept(run / kept_name, key)
        if kept is not None:
            state, record = kept
            if slot not in quiet:
                log.info("%s kept: finished by an earlier run of this shard (%s)", u["id"], run / kept_name)
        else:
            attempts = Attempts(run, key, u, log)
            result, attempt = attempts.run(lambda slot=slot, u=u, run=run: train(slot, u, run), retries,
                                           passthrough=(DeviceUnavailable,))  # the node's fault, not the universe's
            if result is None:  # every attempt failed, here or in a worker that died or overran
                state, record = {}, {**attempts.record(), **(failed or {})}
            else:
                state, record = result
            record = {**universe_fields(u), **record, "attempts": attempt, "versions": env}
            keep(run, key, state, record)
        if slot not in quiet:
            clock.finish(slot, record.get("epochs_run") or 0)
        if write is not None:
            write(slot, state)
        write_json(record_path, record)
        log.info("%s %s in %.2fs: %s%s", u["id"], u["params"], record["train_seconds"], record["status"],
                 outcome(record))
    if lane[1] == 1:  # the shard is done (with lanes, once every lane is: scripts/train.py)
        clear_runs(record_paths)


def clear_runs(record_paths: Sequence[str], names: Sequence[str], *, own_folder: bool) -> None:
    """A finished shard's ``run/`` files of ``names`` (its trainer's checkpoints, kept
    results and attempts), its declared outputs being what counts now. With
    ``own_folder`` (the folder holds the trainer's files alone, not the user's) a
    ``run/`` folder left empty goes too."""
    for record_path in record_paths:
        run = run_dir(record_path)
        for name in names:
            (run / name).unlink(missing_ok=True)
        if own_folder and run.is_dir() and not any(run.iterdir()):
            run.rmdir()
