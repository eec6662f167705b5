"""multiverse: a reproducible multiverse analysis of machine-learning claims.

The package is importable from every rule's environment. This module and ``config``
need only PyYAML (``config`` is imported when the Snakefile is parsed); torch, BoTorch,
pandas and seaborn are imported by the modules that use them.
"""

__version__ = "0.1.0"

#: Metrics written by the ``metrics`` rule for every universe.
METRICS = (
    "train_acc",
    "train_loss",
    "val_acc",
    "val_loss",
    "test_acc",
    "test_loss",
    "gap",
)
