"""No universe can stop the study: a universe's failures, by cause, and the train job's
guard against the ones that end or hang its process.

A universe fails in one of five ways (:data:`CAUSES`): its training *raised*; its
process *died* (a signal, SIGKILL and the kernel's OOM killer included, or an exit
code: a segfault in a native library, ``os._exit``, a command's non-zero status); it
*timed out* (``training.timeout``); it ran *out of memory* (CUDA's, or a
:class:`MemoryError`); or it gave *invalid metrics* (not a mapping, a declared one
missing, NaN or outside its range, a command that wrote no JSON). Each is retried
``training.retries`` times, then recorded as ``failed`` with its cause (the record's
``failure``) and error, and the shard goes on.

A universe that ends or hangs the process it runs in cannot record itself, so the train
job runs its shard in a forked *worker* (:func:`guard`) and only watches: the worker
says when each universe starts and ends (:class:`Attempts`, also a file in the
universe's ``run/`` folder), and when the worker dies or a universe overruns its time,
the guard records that attempt's cause and error (the signal or exit code, the last
lines of output) in the universe's attempts file, kills the worker's process group
(a command and its children with it) and starts a new worker for the rest of the shard.
A universe whose attempts are used up is recorded as failed without running again, so
a rerun of the job never retries it. The cost is one ``fork`` per shard.

SIGTERM (a SLURM preemption, ``scancel --signal=TERM``) or SIGINT to the job asks the
worker to stop: the built-in trainer saves the running universe's training state at
the next minibatch and the job exits with :data:`PREEMPTED_EXIT`, so that Snakemake's
retries or SLURM's requeue run it again, resuming from there (:class:`Preempted`).
"""

from __future__ import annotations

import faulthandler
import gc
import json
import logging
import os
import select
import signal
import sys
import time
import traceback
from collections import deque
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from multiverse.errors import Preempted, ShardFailed, UniverseDied  # noqa: F401  (re-exported)
from multiverse.runtime import LANE_ENV, SHARE_ENV  # noqa: F401  (re-exported)
from multiverse.runtime import set_parent_death_signal as _set_parent_death_signal
from multiverse.runtime import write_json

#: The causes of a failed universe, as the report's status table counts them.
CAUSES = ("raised", "died", "timed out", "out of memory", "invalid metrics")
#: A universe's attempts file in its ``run/`` folder (:class:`Attempts`).
ATTEMPTS = "attempts.json"
#: The train job's exit status after a SIGTERM or SIGINT (128 + SIGTERM, as a shell says
#: of a process SIGTERM ended): not 0, so Snakemake retries the job or SLURM requeues it.
PREEMPTED_EXIT = 128 + signal.SIGTERM
#: Lines of a dead worker's or command's output kept in its universe's error.
TAIL_LINES = 5


_STOP = False  # set by the worker's SIGTERM/SIGINT handler


def stop_requested() -> bool:
    """True once the job was asked to stop: the trainer saves its state and raises
    :class:`Preempted` at its next minibatch."""
    return _STOP


def request_stop(*_: Any) -> None:
    global _STOP
    _STOP = True


def cause_of(err: BaseException) -> str:
    """The cause (:data:`CAUSES`) of the error a universe's attempt raised."""
    cause = getattr(err, "cause", None)
    if cause in CAUSES:
        return cause
    if isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError" or "out of memory" in str(err):
        return "out of memory"  # torch.OutOfMemoryError (CUDA), MPS's RuntimeError, a host MemoryError
    return "raised"


def failed_record(error: BaseException | str, cause: str | None = None) -> dict[str, Any]:
    """The record of a universe whose training failed: kept as data, not a crash.
    ``failure`` is its cause (:data:`CAUSES`; from the error when
    not given), ``error`` what happened."""
    if isinstance(error, BaseException):
        cause = cause or cause_of(error)
        error = f"{type(error).__name__}: {error}"
    return {
        "status": "failed",
        "failure": cause or "raised",
        "error": error,
        "diverged_epoch": None,
        "epochs_run": 0,
        "history": [],
        "train_seconds": 0.0,
    }


def free_memory() -> None:
    """Give back what a failed universe held: its tensors (collected once its error is
    gone) and CUDA's cached blocks, so that the next universe has the whole GPU."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_words(status: int) -> str:
    """A process's exit as words: ``was killed by signal 9 (SIGKILL)`` or ``exited with status 3``
    (``status`` as :attr:`subprocess.Popen.returncode` gives it: negative for a signal)."""
    if status < 0:
        return f"was killed by signal {-status} ({signal_name(-status)})"
    return f"exited with status {status}"


def timeout_words(minutes: float) -> str:
    return f"timed out after {minutes:g} min"


def with_output(words: str, tail: Sequence[str]) -> str:
    lines = [line for line in tail if line.strip()]
    return f"{words}; its last output: {' / '.join(lines)}" if lines else f"{words}; it printed nothing"


# --- the attempts file ----------------------------------------------------------------
_CONTROL: int | None = None  # the worker's end of its pipe to the guard


#: The line a worker writes to its output as a universe's attempt starts: the guard keeps
#: the output after it as that universe's last lines (the output and the control pipe are
#: read apart, so only a mark in the output itself orders lines and universes).
MARK = "\x00multiverse: an attempt starts\x00"


def _tell(message: Mapping[str, Any]) -> None:
    if _CONTROL is not None:
        if "start" in message:
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(1, (MARK + "\n").encode())
        os.write(_CONTROL, (json.dumps(message) + "\n").encode())


class Attempts:
    """A universe's attempts: the causes and errors of those that failed, and the one
    running, in ``run_dir/attempts.json`` (written before each attempt, so that the
    guard, and a rerun of the job, knows which universe a dead worker was training).

    An attempt that was running when the whole job ended (a kill of the job, a
    preemption) is not counted: that was not the universe's doing. ``name``: the file's
    name (a stack of packed universes keeps its own, :data:`multiverse.train.STACK`)."""

    def __init__(self, run_dir: str | Path, key: Mapping[str, Any], universe: Mapping[str, Any],
                 log: logging.Logger, name: str = ATTEMPTS):
        self.path = Path(run_dir) / name
        self.key, self.universe, self.log = json.loads(json.dumps(key)), universe, log
        self.failed: list[dict[str, Any]] = []
        if self.path.exists():
            try:
                saved = json.loads(self.path.read_text())
                if saved.get("key") == self.key:
                    self.failed = [dict(a) for a in saved["failed"]]
            except (ValueError, KeyError, TypeError, AttributeError, OSError) as err:
                log.warning("%s is unreadable, not used (%s): universe %s starts its attempts afresh [seed %s, "
                            "parameters %s]", self.path, err, universe.get("id"), universe.get("seed"),
                            universe.get("params"))

    def _write(self, running: int | None) -> None:
        write_json(self.path, {"key": self.key, "failed": self.failed,
                               "running": None if running is None else {"attempt": running, "pid": os.getpid()}})

    def start(self, attempt: int) -> None:
        self._write(attempt)
        _tell({"start": str(self.path), "universe": json.loads(json.dumps(describe(self.universe), default=str)), "attempt": attempt})

    def given_up(self, retries: int) -> bool:
        """Whether its ``1 + retries`` attempts have all failed (here or in a worker that died)."""
        return len(self.failed) >= retries + 1

    def record(self) -> dict[str, Any]:
        """The failed record of a universe whose attempts are used up: its last cause and error."""
        return failed_record(self.failed[-1]["error"], self.failed[-1]["cause"])

    def fail(self, cause: str, error: str) -> None:
        self.failed.append({"cause": cause, "error": error})
        self._write(None)
        _tell({"end": str(self.path)})

    def succeed(self) -> None:
        # the file may still say it runs: the universe's kept result (written next) is what counts now
        _tell({"end": str(self.path)})

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def run(self, train: Callable[[], Any], retries: int, passthrough: tuple[type[BaseException], ...] = ()
            ) -> tuple[Any, int]:
        """Call ``train`` until it returns (not None) or the universe's ``1 + retries``
        attempts, this job's and earlier ones', have failed; returns its result (None when
        every attempt failed: :meth:`record` then gives the failed record) and the number of
        the last attempt. An exception of ``passthrough`` (the node's fault, not the
        universe's) propagates. A universe that ran out of memory has its memory freed
        before the next attempt or universe (:func:`free_memory`)."""
        result, attempt = None, len(self.failed)
        while result is None and not self.given_up(retries):
            attempt += 1
            self.start(attempt)
            out_of_memory = False
            try:
                result = train()
                self.succeed()
            except passthrough:
                raise
            except Exception as err:  # a universe's own failure is data, not a crash
                cause, error = cause_of(err), f"{type(err).__name__}: {err}"
                self.log.exception("%s", failure_line(self.universe, attempt, retries + 1, f"{cause}: {error}"))
                self.fail(cause, error)
                out_of_memory = cause == "out of memory"
                # a log handler may keep the record, its traceback and the frames' tensors with it
                traceback.clear_frames(err.__traceback__)
            if out_of_memory:  # its error (and what its frames held) is gone now
                free_memory()
        return result, attempt


def record_outside(path: str | Path, cause: str, error: str) -> int:
    """Record the running attempt of the attempts file at ``path`` as failed (by the
    guard, for a worker that died or overran); returns how many attempts failed so far."""
    saved = json.loads(Path(path).read_text())
    saved["failed"] = [*saved["failed"], {"cause": cause, "error": error}]
    saved["running"] = None
    write_json(path, saved)
    return len(saved["failed"])


def describe(universe: Mapping[str, Any]) -> dict[str, Any]:
    """What every failure line says of a universe: its id, seed and parameters."""
    return {"id": universe.get("id"), "seed": universe.get("seed"), "params": universe.get("params")}


def failure_line(universe: Mapping[str, Any], attempt: int, attempts: int, error: str, more: str = "") -> str:
    """``universe r0u001 failed (attempt 1 of 2): <error> [seed 3, parameters {...}]``."""
    return (f"universe {universe.get('id')} failed (attempt {attempt} of {attempts}): {error}{more} "
            f"[seed {universe.get('seed')}, parameters {json.dumps(universe.get('params'), sort_keys=True, default=str)}]")


# --- the guard ------------------------------------------------------------------------
def die_with_parent() -> None:
    """For a command's ``preexec_fn``: it dies with the worker that started it."""
    _set_parent_death_signal()


#: The signals that ask a job to stop (SLURM's preemption, Ctrl-C).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _hold_stop_signals() -> Any:
    """Block :data:`STOP_SIGNALS` (returns the mask before): from a fork until the parent's
    forwarding handler is in place, a stop waits rather than meets the handler before it
    (the job's, or the default, which kills the process). Parent and child each lift it
    once their own handlers are in place (:func:`_release_stop_signals`); a lane keeps it
    until its guard's first worker is forked."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


def _release_stop_signals() -> None:
    """The end of :func:`_hold_stop_signals`: a stop that came meanwhile is delivered now,
    to the handlers just installed."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _worker(work: Callable[[], None], control: int, output: int, parent: int) -> None:
    """The forked worker: its own process group, killed with its parent, its output to
    the guard; runs ``work`` and ends with 0, :data:`PREEMPTED_EXIT` or 1."""
    global _CONTROL
    status = 1
    try:
        os.setpgid(0, 0)
        _set_parent_death_signal()
        if os.getppid() != parent:  # the guard died before the line above
            os._exit(1)
        job_stderr = os.dup(2)
        os.dup2(output, 1)
        os.dup2(output, 2)
        # Python's own streams onto them too (a test runner may have put others in their place)
        sys.stdout = open(1, "w", buffering=1, errors="replace", closefd=False)
        sys.stderr = open(2, "w", buffering=1, errors="replace", closefd=False)
        _CONTROL = control
        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        _release_stop_signals()
        try:  # the OOM killer's first choice is the worker, never the guard
            Path("/proc/self/oom_score_adj").write_text("1000")
        except OSError:
            pass
        # a segfault's Python stack goes to the job's log, not to the last lines of output
        # that the universe's error keeps (those are the user's own)
        faulthandler.enable(file=job_stderr)
        try:
            work()
            status = 0
        except Preempted as err:
            _tell({"preempted": str(err)})
            status = PREEMPTED_EXIT
        except BaseException:  # noqa: BLE001  (the job's own failure: told, then the guard fails too)
            traceback.print_exc()
            _tell({"error": traceback.format_exc(limit=-1).strip().splitlines()[-1]})
    finally:
        _leave(status)


def _leave(status: int) -> None:
    """End a forked worker or lane: its output and logs flushed, then ``os._exit`` (not
    the job's own exit handlers)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
    finally:
        os._exit(status)


def guard(work: Callable[[], None], log: logging.Logger, *, retries: int, timeout: float | None = None,
          grace: float = 60.0, poll: float = 0.5) -> None:
    """Run ``work`` (a shard's training, which calls :class:`Attempts` around each
    universe) in forked workers until it finishes, recording universes that kill or
    hang a worker (see the module's docstring). ``timeout``: minutes per attempt (None:
    no limit). ``grace``: seconds a worker has to save and stop after SIGTERM.

    Raises :class:`ShardFailed` when the worker fails outside any universe; exits with
    :data:`PREEMPTED_EXIT` after SIGTERM or SIGINT. Without ``os.fork`` (Windows) it
    runs ``work`` in-process.

    Call it before this process runs any multi-threaded torch work (scripts/train.py
    does): GNU OpenMP is not fork-safe, and a worker forked after an OpenMP parallel
    region with several threads hangs at its own first one."""
    if not hasattr(os, "fork"):
        work()
        return
    stopping: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            status, running, tail, note = _watch(work, timeout, grace, poll, stopping, previous)
            if status == 0 and "preempted" not in note:
                return
            if stopping or "preempted" in note:
                log.warning("the train job was asked to stop (%s)%s: exiting with status %d so that it runs again and "
                            "resumes", signal_name(stopping[0]) if stopping else "SIGTERM to its worker",
                            f"; {note['preempted']}" if note.get("preempted") else "", PREEMPTED_EXIT)
                sys.stdout.flush()
                sys.stderr.flush()
                raise SystemExit(PREEMPTED_EXIT)
            if running is None:
                raise ShardFailed(f"the train job's worker {exit_words(status)} outside any universe: "
                                  f"{note.get('error') or with_output('', tail).lstrip('; ')}")
            path, universe, attempt = running
            if status == "timeout":
                cause, error = "timed out", timeout_words(timeout)
            else:
                cause, error = "died", with_output(f"its process {exit_words(status)}", tail)
            failed = record_outside(path, cause, error)
            log.error("%s", failure_line(universe, attempt, retries + 1, f"{cause}: {error}",
                                         "" if failed >= retries + 1 else "; trying again in a new worker"))
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def guard_lanes(works: Sequence[Callable[[], None]], log: logging.Logger, *, retries: int,
                timeout: float | None = None, grace: float = 60.0, poll: float = 0.5) -> None:
    """``training.per_device``: run each lane's ``work`` (a share of the shard's
    universes) side by side, each in a forked *lane* process that runs it under its own
    :func:`guard`, so that k universes train at once on the job's device, each in its
    own process, and one that kills or hangs its worker costs only its lane a new worker.

    A lane's processes see :data:`LANE_ENV` and :data:`SHARE_ENV` (``1/k``): the
    built-in trainer and an entry point on CUDA cap their process's torch allocator to that
    share of the GPU's memory (:func:`multiverse.runtime.take_gpu_share`; each process's
    CUDA context comes on top), and a command reads it. JAX's
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` is set to the same share where the user has not
    set it, since JAX otherwise takes 75% of the GPU at its first step.

    SIGTERM or SIGINT to the job reaches every lane (each saves and stops, as under
    :func:`guard`), and the job exits with :data:`PREEMPTED_EXIT`. A lane that fails
    outside any universe fails the job (:class:`ShardFailed`) once the other lanes have
    finished: what they finished is kept for the rerun."""
    if len(works) == 1 or not hasattr(os, "fork"):
        for work in works:
            guard(work, log, retries=retries, timeout=timeout, grace=grace, poll=poll)
        return
    share = 1.0 / len(works)
    lanes: dict[int, int] = {}
    stopping: list[int] = []
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    held = _hold_stop_signals()  # a stop while the lanes are forked waits for `forward`
    try:
        for lane, work in enumerate(works):
            sys.stdout.flush()
            sys.stderr.flush()
            parent = os.getpid()
            pid = os.fork()
            if pid == 0:
                _run_lane(lane, share, work, log, parent, retries=retries, timeout=timeout, grace=grace, poll=poll)
            lanes[pid] = lane
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise

    def forward(signum, _frame):
        if not stopping:
            stopping.append(signum)
        for pid, lane in lanes.items():
            if lane not in statuses:  # a lane reaped already may have passed its pid on
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass

    statuses: dict[int, int] = {}
    for s in previous:
        signal.signal(s, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a stop that came meanwhile: forwarded now
    try:
        while len(statuses) < len(lanes):
            pid, code = os.wait()  # PEP 475: a forwarded signal does not interrupt the wait
            if pid in lanes:
                statuses[lanes[pid]] = os.waitstatus_to_exitcode(code)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for pid in lanes:  # the job itself is failing: its lanes go with it
            if lanes[pid] not in statuses:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except OSError:
                    pass
    if stopping or PREEMPTED_EXIT in statuses.values():
        log.warning("the train job was asked to stop: exiting with status %d so that it runs again and resumes",
                    PREEMPTED_EXIT)
        raise SystemExit(PREEMPTED_EXIT)
    failed = sorted(lane for lane, status in statuses.items() if status != 0)
    if failed:
        raise ShardFailed(f"lane{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))} of {len(lanes)} "
                          f"failed outside any universe ({'; '.join(exit_words(statuses[f]) for f in failed)}): "
                          "see the lines above")


def _run_lane(lane: int, share: float, work: Callable[[], None], log: logging.Logger, parent: int,
              **guarded: Any) -> None:
    """A lane process (:func:`guard_lanes`): dies with the job, runs its work under
    :func:`guard` and ends with 0, :data:`PREEMPTED_EXIT` or 1."""
    status = 1
    try:
        _set_parent_death_signal()
        if os.getppid() != parent:  # the job died before the line above
            os._exit(1)
        os.environ[LANE_ENV] = str(lane)
        os.environ[SHARE_ENV] = f"{share:.6g}"
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{share:.6g}")
        for s in STOP_SIGNALS:  # the job's handlers are not the lane's. The stop signals stay
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        try:  # held (guard_lanes) until its guard forwards them to its first worker (_watch)
            guard(work, log, **guarded)
            status = 0
        except SystemExit as err:
            status = err.code if isinstance(err.code, int) else 1
        except ShardFailed as err:
            log.error("lane %d: %s", lane, err)
        except BaseException:  # noqa: BLE001  (told in the job's log; the job fails with it)
            log.error("lane %d failed: %s", lane, traceback.format_exc())
    finally:
        _leave(status)


def _watch(work, timeout, grace, poll, stopping, previous):
    """One worker's life: ``(status, running, tail, note)``: its exit status
    (:func:`exit_words`) or ``"timeout"``; the ``(attempts file, universe, attempt)`` it
    was on (None between universes); its last output lines; what it told of a
    preemption or an error of its own."""
    control_r, control_w = os.pipe()
    output_r, output_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    held = _hold_stop_signals()
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    if pid == 0:
        os.close(control_r)
        os.close(output_r)
        for s, handler in previous.items():
            signal.signal(s, handler)
        _worker(work, control_w, output_w, parent)
    os.close(control_w)
    os.close(output_w)
    try:
        os.setpgid(pid, pid)  # also the worker's first step; whichever comes first
    except OSError:
        pass

    def forward(signum, _frame):
        if not stopping:
            stopping.append(signum)
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass

    for s in previous:
        signal.signal(s, forward)
    # a stop that came meanwhile is forwarded now (in a lane, one since the lane was forked)
    _release_stop_signals()
    if stopping:  # one that came between two workers met the last one's handler: this one stops too
        forward(stopping[0], None)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    running, note, status, reaped = None, {}, None, False
    deadline = stop_deadline = drain_deadline = None
    buffers = {control_r: b"", output_r: b""}
    open_fds = [control_r, output_r]
    try:
        while status is None or (open_fds and time.monotonic() < drain_deadline):
            now = time.monotonic()
            if stopping and stop_deadline is None:
                stop_deadline = now + grace
            if status is None and not stopping and deadline is not None and now >= deadline:
                _kill_group(pid)
                status, drain_deadline = "timeout", now + 5.0
                continue
            if status is None and stop_deadline is not None and now >= stop_deadline:
                _kill_group(pid)
                status, drain_deadline = -signal.SIGKILL, now + 5.0
                continue
            wait = poll
            for d in (deadline, stop_deadline, drain_deadline):
                if d is not None:
                    wait = max(0.0, min(wait, d - now))
            ready = select.select(open_fds, [], [], wait)[0] if open_fds else (time.sleep(wait) or [])
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.remove(fd)
                    continue
                *lines, buffers[fd] = (buffers[fd] + chunk).split(b"\n")
                for raw in lines:
                    if fd == output_r:
                        text = raw.decode(errors="replace")
                        if text == MARK:
                            tail.clear()
                            continue
                        tail.append(text)
                        sys.stderr.write(text + "\n")
                        continue
                    msg = json.loads(raw)
                    if "start" in msg:
                        running = (msg["start"], msg["universe"], msg["attempt"])
                        deadline = None if timeout is None else time.monotonic() + 60.0 * timeout
                    elif "end" in msg:
                        running, deadline = None, None
                    else:
                        note.update(msg)
            if status is None:
                done, code = os.waitpid(pid, os.WNOHANG)
                if done:
                    status, reaped, drain_deadline = os.waitstatus_to_exitcode(code), True, time.monotonic() + 5.0
                    _kill_group(pid)  # whatever the worker left running in its group goes with it
        if buffers[output_r]:
            tail.append(buffers[output_r].decode(errors="replace"))
        sys.stderr.flush()
        return status, running, list(tail), note
    finally:
        for fd in open_fds:
            os.close(fd)
        if not reaped:
            _kill_group(pid)  # killed above, or the guard itself is failing: take the worker with it
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
