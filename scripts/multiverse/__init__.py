"""multiverse: a reproducible multiverse analysis of machine-learning claims.

The package is importable from every rule's environment. This module and ``config``
need only PyYAML (``config`` is imported when the Snakefile is parsed); torch, BoTorch,
pandas and seaborn are imported by the modules that use them.
"""

__version__ = "0.1.0"

#: The built-in trainer's metrics, declared as a user's training entry point declares
#: its own (config key ``metrics``, :func:`multiverse.config.study_metrics`): each one's
#: ``range`` (``None``: unbounded on that side) and ``goal``. The report's GP models a
#: metric on the scale its range implies (:class:`multiverse.gp.Warp`): logit for
#: accuracies and the gap, log for losses and sharpness, so that no posterior sample,
#: band or expected maximum leaves the range. ``converged_only``: the metric means
#: nothing for a diverged universe (its loss is NaN; its gap is exactly 0 at chance
#: accuracy, which would read as a perfect generaliser), so its surrogate is fitted, and
#: its claims read, on converged universes only.
BUILTIN_METRICS = {
    "train_acc": {"range": (0.0, 1.0), "goal": "maximize"},
    "train_loss": {"range": (0.0, None), "goal": "minimize", "converged_only": True},
    "val_acc": {"range": (0.0, 1.0), "goal": "maximize"},
    "val_loss": {"range": (0.0, None), "goal": "minimize", "converged_only": True},
    "test_acc": {"range": (0.0, 1.0), "goal": "maximize"},
    "test_loss": {"range": (0.0, None), "goal": "minimize", "converged_only": True},
    "gap": {"range": (-1.0, 1.0), "goal": "minimize", "converged_only": True},
    "ood_acc": {"range": (0.0, 1.0), "goal": "maximize"},
    "ood_loss": {"range": (0.0, None), "goal": "minimize", "converged_only": True},
    "sharpness": {"range": (0.0, None), "goal": "minimize", "converged_only": True},
}
#: Metrics the built-in trainer adds with a config key: the OOD split's (``data.ood``)
#: and the adaptive sharpness (``metrics.sharpness``).
OPTIONAL_METRICS = {"ood_acc": "data.ood", "ood_loss": "data.ood", "sharpness": "metrics.sharpness"}
#: Metrics the built-in trainer writes for every universe.
METRICS = tuple(m for m in BUILTIN_METRICS if m not in OPTIONAL_METRICS)


def declaration(metric: str, declared=None) -> dict:
    """``metric``'s declaration: ``range``, ``goal`` and ``converged_only``, from
    ``declared`` (a study's metrics, :func:`multiverse.config.study_metrics`; None: the
    built-in trainer's), unbounded for a name it does not hold."""
    known = BUILTIN_METRICS if declared is None else declared
    decl = known.get(metric, {})
    return {"range": tuple(decl.get("range") or (None, None)), "goal": decl.get("goal"),
            "converged_only": bool(decl.get("converged_only", False))}
