"""Process-level helpers shared by the step scripts: threads, atomic writes, versions."""

from __future__ import annotations

import ctypes
import json
import logging
import os
import pickle
import platform
import select
import signal
import socket
import sys
import tempfile
import traceback
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from multiverse.errors import DeviceUnavailable, OlderResults  # noqa: F401  (re-exported)


def set_threads(n: int, load_torch: bool = True) -> None:
    """Pin torch and BLAS to ``n`` threads (the rule's ``threads``).

    Oversubscription on small machines slowed training 30-60x in our
    measurements, so every job that imports torch calls this first.
    ``load_torch=False``: only the environment (which torch reads for its threads when
    it loads later), for a step that may not need torch at all (a Sobol design round:
    importing torch was 1 s of its 2.5 s).
    """
    n = max(1, int(n))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    if "torch" in sys.modules or (load_torch and _importable("torch")):
        import torch  # deferred: torch must load after the thread variables above (runtime loads before them)

        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already set in this process
            pass


def _importable(name: str) -> bool:
    return find_spec(name) is not None


def umask() -> int:
    """The process's umask (read by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write: Callable[[str], Any]) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: no partial file is ever at ``path``.

    The file gets the mode an ordinary ``open`` would give (0666 less the umask: 0644
    under the usual 022), not ``mkstemp``'s owner-only 0600, so colleagues on a shared
    filesystem can read the results."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~umask())  # after the write: a writer may have made the file anew
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise




def resolve_device(device: str, log: "logging.Logger | None" = None) -> str:
    """``cpu``, ``cuda`` or ``auto`` (cuda where torch sees a GPU, else cpu, logged).

    ``cuda`` without a working GPU raises :class:`DeviceUnavailable` naming the node and
    what ``torch.cuda.is_available()`` said, before any universe trains. Without torch
    in the job's env (a user's command brings its own), ``auto`` is cpu and ``cuda`` is
    left to the user's code."""
    try:
        import torch  # deferred: a user's command's env may lack torch; step scripts import runtime before set_threads
    except ImportError:
        if log is not None and device != "cpu":
            log.warning("training.device is %r but torch is not importable here: not checked", device)
        return "cpu" if device == "auto" else device
    available = torch.cuda.is_available()
    if device == "auto":
        if not available and log is not None:
            log.info("training.device is 'auto' and torch.cuda.is_available() is False on node %s: "
                     "training on the CPU", socket.gethostname())
        return "cuda" if available else "cpu"
    if device == "cuda" and not available:
        raise DeviceUnavailable(
            f"config key 'training.device' is 'cuda' but node {socket.gethostname()} has no usable GPU: "
            f"torch.cuda.is_available() is False (torch {torch.__version__}, CUDA build "
            f"{torch.version.cuda or 'none: a CPU build'}; CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}). Use a CUDA build of torch on a GPU node, "
            "or set training.device to 'auto' or 'cpu'")
    return device


#: The environment a lane's processes (and a universe's command) see under
#: ``training.per_device`` k (:func:`multiverse.failures.guard_lanes`): the lane's
#: number (0..k-1) and its share of the device.
LANE_ENV, SHARE_ENV = "MULTIVERSE_LANE", "MULTIVERSE_GPU_SHARE"


def take_gpu_share(device: str, log: "logging.Logger | None" = None) -> float | None:
    """Under ``training.per_device`` k (:func:`multiverse.failures.guard_lanes`), cap
    this process's CUDA memory to its share of the GPU (``MULTIVERSE_GPU_SHARE``, 1/k)
    with ``torch.cuda.set_per_process_memory_fraction``: torch's allocator in this
    process then raises out of memory (a failed universe, cause "out of memory") past
    that share, before it starves the others. The cap is torch's only: each process's
    CUDA context (a few hundred MB) and memory allocated outside torch come on top. The
    share, or None where there is none to take (not a lane, not CUDA, no torch)."""
    share = os.environ.get(SHARE_ENV)
    if not share or device != "cuda" or not ("torch" in sys.modules or _importable("torch")):
        return None
    import torch  # deferred: only a CUDA lane needs it (see resolve_device)

    torch.cuda.set_per_process_memory_fraction(float(share))
    if log is not None:
        log.info("lane %s: this process may use %s of the GPU's memory", os.environ.get(LANE_ENV), share)
    return float(share)


def set_parent_death_signal() -> None:
    """Linux: the kernel kills this process when its parent dies (a train job killed
    with SIGKILL takes its worker and command with it; a report its helpers)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def fork_map(tasks: Sequence[Callable[[], Any]], workers: int, meanwhile: Callable[[], Any] | None = None) -> list[Any]:
    """Each task's result, in order, from ``workers`` forked child processes that inherit
    this process's state (fitted models, data) and take the tasks in turn, each sending
    its result back pickled. A task that raises raises here, as itself where it pickles
    (else a :class:`RuntimeError` with its traceback; the lowest task's where several
    do), once the others have run, with the child's traceback as a note. One
    worker, one task or no ``os.fork``: the tasks run here, one after another.
    ``meanwhile``: run here once the children have started (or first, without
    children), e.g. an import that later tasks need, which this process then pays once.

    The report's step parallelism (2 cores; most of its work is Python-bound in gpytorch
    and matplotlib, so torch's own threads kept under one core busy). A child keeps
    taking tasks, so what a first call initialises lazily (gpytorch's, BoTorch's and
    matplotlib's caches and deferred imports) it pays once, not per task. Call it only
    from a process whose torch has run on one thread: GNU OpenMP is not fork-safe after
    a parallel region (:func:`multiverse.failures.guard` says the same of the train job's
    worker). Two children with two torch threads each took twice as long as with one each
    on the report's tasks (oversubscribed OpenMP, measured 2026-12-06)."""
    workers = min(workers, len(tasks))
    if workers <= 1 or not hasattr(os, "fork"):
        if meanwhile is not None:
            meanwhile()
        return [task() for task in tasks]
    results: list[Any] = [None] * len(tasks)
    failed: list[tuple[int, BaseException]] = []  # (task, its error)
    # result pipe's read end -> the child's pid, command pipe, the tasks it was given and has not answered, bytes
    children: dict[int, dict[str, Any]] = {}
    following = iter(range(len(tasks)))

    def give(child: dict[str, Any]) -> None:
        """One more task to ``child`` (told -1 when there is none): it holds up to two, so
        that it goes on while this process is busy (``meanwhile``)."""
        if child["done"]:
            return
        index = next(following, -1)
        if index < 0:
            child["done"] = True
        else:
            child["tasks"].append(index)  # before the write: a child that died reports it (EOF, below)
        try:
            os.write(child["command"], index.to_bytes(4, "little", signed=True))
        except BrokenPipeError:  # it died in a task it holds; its end of the result pipe says so
            pass

    try:
        for _ in range(workers):
            command_r, command_w = os.pipe()
            result_r, result_w = os.pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(command_w)
                os.close(result_r)
                for child in children.values():  # the other children's pipes are not this one's
                    os.close(child["command"])
                    os.close(child["fd"])
                _fork_map_child(tasks, command_r, result_w)
            os.close(command_r)
            os.close(result_w)
            children[result_r] = {"pid": pid, "command": command_w, "fd": result_r, "data": bytearray(),
                                   "tasks": [], "done": False}
        for child in children.values():
            give(child)
        for child in children.values():
            give(child)
        if meanwhile is not None:
            meanwhile()
        while any(c["tasks"] for c in children.values()):
            for fd in select.select([fd for fd, c in children.items() if c["tasks"]], [], [])[0]:
                child = children[fd]
                chunk = os.read(fd, 1 << 20)
                if not chunk:  # the child died in its task: the ones it was given after it go to no one
                    _, status = os.waitpid(child["pid"], 0)
                    failed.append((child["tasks"][0], RuntimeError(
                        f"task {child['tasks'][0]} of fork_map ended its process (exit status "
                        f"{os.waitstatus_to_exitcode(status)})")))
                    child["tasks"], child["pid"] = [], None
                    continue
                child["data"].extend(chunk)
                data = child["data"]
                while len(data) >= 8 and len(data) >= 8 + int.from_bytes(data[:8], "little"):
                    size = 8 + int.from_bytes(data[:8], "little")
                    message = pickle.loads(bytes(data[8:size]))
                    del data[:size]
                    index = child["tasks"].pop(0)
                    if message[0] == "ok":
                        results[index] = message[1]
                    else:
                        err = message[1] if message[1] is not None else RuntimeError(message[2])
                        err.add_note(f"in fork_map's task {index}, whose process printed:\n{message[2]}")
                        failed.append((index, err))
                    give(child)
    finally:
        for child in children.values():
            for fd in (child["command"], child["fd"]):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if child["pid"] is not None:
                if child["tasks"]:  # this process is failing: its children go with it
                    try:
                        os.kill(child["pid"], signal.SIGKILL)
                    except OSError:
                        pass
                try:
                    os.waitpid(child["pid"], 0)
                except OSError:
                    pass
    if failed:  # the first task's that failed, whichever ended first
        raise min(failed, key=lambda f: f[0])[1]
    return results


def _fork_map_child(tasks: Sequence[Callable[[], Any]], commands: int, results: int) -> None:
    """A :func:`fork_map` child: runs the tasks it is given until told -1, sending each
    result (or error) back length-prefixed; leaves without the parent's exit handlers."""
    code = 0
    try:
        set_parent_death_signal()
        while True:
            index = int.from_bytes(_read_exactly(commands, 4), "little", signed=True)
            if index < 0:
                break
            try:
                payload = pickle.dumps(("ok", tasks[index]()))
            except BaseException as err:  # noqa: BLE001  (sent to the parent, which raises it)
                text = "".join(traceback.format_exception(err))
                try:
                    payload = pickle.dumps(("error", err, text))
                    pickle.loads(payload)  # one that pickles but does not unpickle (a required argument) goes as text
                except Exception:  # noqa: BLE001  (an exception that does not pickle: its text)
                    payload = pickle.dumps(("error", None, text))
            view = memoryview(len(payload).to_bytes(8, "little") + payload)
            while view:
                view = view[os.write(results, view):]
    except BaseException:  # noqa: BLE001  (the parent sees the closed pipe)
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("fork_map's parent closed the pipe")
        data += chunk
    return data


def write_json(path: str | Path, obj: Any) -> None:
    def _write(tmp: str) -> None:
        with open(tmp, "w") as fh:
            json.dump(obj, fh, indent=1, sort_keys=True, allow_nan=True)
            fh.write("\n")

    atomic_write(path, _write)


def read_json(path: str | Path) -> Any:
    with open(path) as fh:
        return json.load(fh)




def read_record(path: str | Path, fields: Iterable[str]) -> dict[str, Any]:
    """A universe's train or metrics record at ``path``, which must hold ``fields``;
    raises :class:`OlderResults` saying what to do when it is unreadable or lacks one."""
    path = Path(path)
    try:
        record = read_json(path)
        missing = [] if isinstance(record, dict) else ["its fields"]
        missing = missing or [f for f in fields if f not in record]
    except (ValueError, OSError) as err:
        record, missing = None, [f"readable JSON ({err})"]
    if missing:
        parts = path.parts
        study = Path(*parts[: parts.index("universes")]) if "universes" in parts else path.parent
        raise OlderResults(
            f"{path} lacks {', '.join(map(str, missing))}: it was written by an older version of this project (or is "
            f"damaged), and this version cannot read it. Train its universes again with `snakemake --forcerun train`, "
            f"or move {study} away and run the study afresh")
    return record


def versions(packages: Iterable[str]) -> dict[str, str]:
    """Installed versions of ``packages`` plus Python's, for provenance."""
    out = {"python": platform.python_version()}
    for p in packages:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = "absent"
    return out


def step_logger(path: str | Path) -> "logging.Logger":
    """Log a step's progress to its rule's log file."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        filename=str(path), filemode="w", level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s", force=True,
    )
    logging.captureWarnings(True)
    logging.getLogger("multiverse").info("step started")
    return logging.getLogger("multiverse")


# --- a universe's records ------------------------------------------------------------
def universe_fields(universe: Mapping[str, Any]) -> dict[str, Any]:
    """The identity of a universe (and seed) that its train and metrics records carry."""
    fields = ("id", "round", "index", "shard", "slot", "replicate", "seed", "replicate_of", "params")
    return {k: universe.get(k, 0 if k == "replicate" else None) for k in fields}
