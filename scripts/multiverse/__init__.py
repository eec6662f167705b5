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

#: The range of each built-in metric (``None``: unbounded on that side). The report's GP
#: models a metric on the scale this implies (:class:`multiverse.gp.Warp`): logit for
#: accuracies and the gap, log for losses and sharpness, so that no posterior sample,
#: band or expected maximum leaves the range.
METRIC_RANGE = {
    "train_acc": (0.0, 1.0), "val_acc": (0.0, 1.0), "test_acc": (0.0, 1.0), "ood_acc": (0.0, 1.0),
    "gap": (-1.0, 1.0),
    "train_loss": (0.0, None), "val_loss": (0.0, None), "test_loss": (0.0, None), "ood_loss": (0.0, None),
    "sharpness": (0.0, None),
}
#: Metrics that mean nothing for a diverged universe (its loss is NaN; its gap is
#: exactly 0 at chance accuracy, which would read as a perfect generaliser): their
#: surrogates are fitted, and their claims read, on converged universes only.
CONVERGED_ONLY = ("train_loss", "val_loss", "test_loss", "ood_loss", "gap", "sharpness")
