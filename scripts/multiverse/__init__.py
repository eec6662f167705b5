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
#: Metrics a study adds with a config key: the OOD split's (``data.ood``) and the
#: adaptive sharpness (``metrics.sharpness``).
OPTIONAL_METRICS = {"ood_acc": "data.ood", "ood_loss": "data.ood", "sharpness": "metrics.sharpness"}

#: The range each bounded metric can take (accuracies); the report clips sampled
#: outcomes to it where a statistic depends on extremes (expected best).
METRIC_RANGE = {"train_acc": (0.0, 1.0), "val_acc": (0.0, 1.0), "test_acc": (0.0, 1.0), "ood_acc": (0.0, 1.0)}
