"""multiverse: a reproducible multiverse analysis of machine-learning claims.

The package is importable from every rule's environment. This module and ``spec``
need only PyYAML (``spec`` is what the Snakefile imports when it is parsed); torch,
BoTorch, pandas and seaborn are imported by the modules that use them.
"""

from pathlib import Path

__version__ = "0.2.0"


def resources() -> Path:
    """The folder that holds the workflow's ``workflow/``, ``envs/`` and ``scripts/``
    (the step scripts): the installed package itself (they ship as its package data,
    pyproject.toml), or, for the package imported from a clone (``pip install -e .`` or
    ``scripts/`` on the path), the clone's root."""
    here = Path(__file__).resolve().parent
    return here if (here / "workflow" / "Snakefile").is_file() else here.parents[1]


def workflow_snakefile() -> str:
    """The installed workflow's Snakefile, for a user's ``module`` statement::

        from multiverse import workflow_snakefile

        module multiverse:
            snakefile: workflow_snakefile()
            config: config

        use rule * from multiverse
    """
    return str(resources() / "workflow" / "Snakefile")

#: The built-in trainer's metrics, declared as a user's training entry point declares
#: its own (config key ``metrics``, :func:`multiverse.spec.study_metrics`): each one's
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
    ``declared`` (a study's metrics, :func:`multiverse.spec.study_metrics`; None: the
    built-in trainer's), unbounded for a name it does not hold."""
    known = BUILTIN_METRICS if declared is None else declared
    decl = known.get(metric, {})
    return {"range": tuple(decl.get("range") or (None, None)), "goal": decl.get("goal"),
            "converged_only": bool(decl.get("converged_only", False))}
