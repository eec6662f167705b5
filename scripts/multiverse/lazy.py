"""numpy on first use, for modules that the Snakefile imports when it is parsed (their
config checks need none of it; a rule's environment has it)."""

import importlib


class _LazyModule:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)


np = _LazyModule("numpy")
