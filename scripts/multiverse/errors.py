"""The library's errors, in one leaf module that imports nothing from the package, so
that any layer can raise or catch them. Each is re-exported where it was first defined
(``multiverse.spec.ConfigError``, ``multiverse.runtime.DeviceUnavailable``, ...)."""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and what was expected."""

    def __init__(self, key: str, expected: str, got: Any = None):
        msg = f"config key '{key}': expected {expected}"
        if got is not None:
            msg += f", got {got!r}"
        super().__init__(msg)
        self.key = key


class DeviceUnavailable(RuntimeError):
    """``training.device: cuda`` on a node where torch sees no GPU: the job stops (the
    rule fails, SLURM can requeue it) instead of recording universes as failed."""


class OlderResults(RuntimeError):
    """A results file this version cannot read: written by an older version of the project
    (or damaged). Step scripts print its message and exit, without a traceback."""


class Preempted(BaseException):
    """The job was asked to stop (SIGTERM, SIGINT): not a universe's failure, so no
    ``except Exception`` of a retry loop catches it."""


class UniverseDied(RuntimeError):
    """A universe's process died or was stopped (in a forked worker, or its command)."""

    def __init__(self, message: str, cause: str = "died"):
        super().__init__(message)
        self.cause = cause


class ShardFailed(RuntimeError):
    """The train job's own failure outside any universe (the worker raised or died
    while no universe ran): the job fails, as it did in-process."""


class UniverseError(RuntimeError):
    """A universe's training did not give valid metrics (``cause``: its
    :data:`multiverse.failures.CAUSES` entry)."""

    cause = "invalid metrics"
