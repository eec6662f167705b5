"""Which choices matter: first- and total-order Sobol indices of a surrogate's metric.

Ax's Saltelli/Jansen estimators (``ax.utils.sensitivity.sobol_measures.SobolSensitivity``)
run on the unit cube with one column per dimension of the space
(:meth:`multiverse.space.SearchSpace.from_cube`): a categorical dimension is one
column whose intervals pick its levels, so its levels share one index, and log
dimensions are uniform on their log scale as in the design. Ax's own GP wrappers
(``SobolSensitivityGPSampling``) sample the model's raw inputs uniformly instead,
which would put one-hot columns between levels and log dimensions on a linear scale;
so the function values come from joint posterior samples (sampled functions, "paths")
at the Saltelli points, through a ``sample`` callable that the caller builds from its
GP and outcome warp.

The Saltelli matrices ``A`` and ``B`` are the two halves of one ``2k``-dimensional
scrambled Sobol sequence. Ax's ``input_qmc=True`` draws them as two scramblings of the
same ``k``-dimensional sequence instead, whose points pair up correlated, which biased
the indices badly on a known function (measured: docs/benchmarks.md, "Measured choices").

One path's indices are biased up: a path is the posterior mean plus a deviation that
wiggles along every dimension, so its partial variances are ``Var_i(mean) +
Var_i(deviation) + 2 Cov_i``, and an inert dimension's interval never reached 0. Ax's
estimators are quadratic forms in one function's values; the same forms between two
*independent* paths lose the deviation term in expectation, and their mean over all
pairs of paths is, by polarisation, the form of the mean path less its ``1/n`` share of
the posterior variance (:func:`cross_path`), so Ax computes that too. The interval
keeps the spread of the per-path indices, shifted onto the cross-path estimate.

The paths are split among several scramblings of the Saltelli points so that the
interval holds the quasi-Monte Carlo error as well (one scrambling's error is common to
all of its paths). Resampling one scrambling's rows instead treats them as independent
and overstated that error (docs/benchmarks.md, "Measured choices").
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from multiverse.ids import derive_seed
from multiverse.space import scrambled_sobol

#: Scramblings of the Saltelli points that the paths are split among (at most).
SCRAMBLINGS = 8


def sobol_indices(
    sample: Callable[[list[dict], int, int], np.ndarray],
    space,
    n_mc: int = 256,
    n_samples: int = 64,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """First- and total-order Sobol indices of a sampled metric, with 95% intervals.

    Args:
        sample: ``sample(points, n, seed)`` -> ``n x len(points)`` joint samples of the
            metric on its own scale at the universes ``points`` (e.g.
            ``lambda pts, n, s: gp.joint_samples(model, space, pts, n, s)``); called
            once per scrambling, at ``n_mc x (k + 2)`` universes for ``k`` dimensions.
        n_mc: rows of each Saltelli matrix.
        n_samples: joint posterior paths in all (at least 2), split among up to
            :data:`SCRAMBLINGS` scramblings of the points, at least 2 paths each.

    Returns ``{dimension: {"first", "first_lo", "first_hi", "total", "total_lo",
    "total_hi"}}`` in space order. The interval is the 2.5-97.5% range of the
    ``n_samples`` per-path indices, each path's numerators and denominator shifted by the
    same amounts so that their mean is the cross-path one (the indices of the posterior
    mean, without the posterior's own variance); the point is their median. Both are
    clipped to [0, 1], where an index lies: an inert dimension's reads 0, and a weakly
    determined surrogate's interval reads [0, 1], "unknown". NaN when the cross-path
    total variance is not positive (a flat posterior mean: nothing to apportion). How
    often the intervals hold the truth: docs/benchmarks.md, "Measured choices".
    """
    if n_samples < 2:
        raise ValueError("sobol_indices needs at least 2 posterior paths")
    per_path, cross = [], []
    for r, paths in enumerate(np.array_split(np.arange(n_samples), min(SCRAMBLINGS, n_samples // 2))):
        sens, f = saltelli_paths(sample, space, n_mc, len(paths), derive_seed(seed, r))
        own = np.array([forms(sens, p) for p in f])
        per_path.append(own)
        cross.append(cross_path(forms(sens, f.mean(axis=0)), own.mean(axis=0), len(paths)))
    per_path, cross = np.concatenate(per_path), np.mean(cross, axis=0)
    shifted = per_path - per_path.mean(axis=0) + cross
    if cross[-1] > 0:
        point, dist = cross[:-1] / cross[-1], shifted[:, :-1] / shifted[:, -1:]
    else:
        point, dist = np.full(len(cross) - 1, np.nan), np.full(shifted[:, :-1].shape, np.nan)
    lo, hi = np.quantile(dist, [0.025, 0.975], axis=0)
    # A ratio of means need not lie between the quantiles of the per-path ratios (it fell
    # outside them on the default study): the point is the ratio's median over the
    # shifted paths, which is centred on the cross-path estimate.
    point = np.where(np.isfinite(point), np.median(dist, axis=0), point)
    # An index lies in [0, 1]; a weakly determined surrogate's ratios spread far beyond
    # (e.g. [-7.0, 2.2] on a poorly fitting sharpness surrogate): report the interval's
    # part inside [0, 1], which holds the truth whenever the unclipped one does.
    point, lo, hi = (np.clip(v, 0.0, 1.0) for v in (point, lo, hi))
    k = len(space.dimensions)
    out = {}
    for j, name in enumerate(space.cube_names()):
        out[name] = {"first": float(point[j]), "first_lo": float(lo[j]), "first_hi": float(hi[j]),
                     "total": float(point[k + j]), "total_lo": float(lo[k + j]), "total_hi": float(hi[k + j])}
    return {d.name: out[d.name] for d in space.dimensions}


def saltelli_paths(sample, space, n_mc: int, n: int, seed: int):
    """Ax's Saltelli layout on one scrambling and ``n x (k + 2) x n_mc`` sampled paths at
    its ``A``, ``B``, ``AB_1..AB_k`` rows, each path centred on its mean over ``A`` and ``B``.

    Ax's first-order estimator ``mean[f(B) (f(AB_i) - f(A))]`` is not shift-invariant:
    for an accuracy near 0.9 it was mostly noise (lr's interval [-0.57, 0.42], true 0.47).
    """
    import torch  # deferred: only the Sobol estimators use torch; the module loads with numpy alone

    # deferred: Ax takes seconds to import, and report_analysis.analyse(sensitivity=False), as the calibration benchmark
    # runs it, computes no Sobol indices
    from ax.utils.sensitivity.sobol_measures import SobolSensitivity

    k = len(space.dimensions)
    sens = SobolSensitivity(bounds=torch.stack([torch.zeros(k), torch.ones(k)]).double(), num_mc_samples=n_mc)
    u = torch.as_tensor(scrambled_sobol(n_mc, 2 * k, seed))
    sens.A, sens.B = u[:, :k], u[:, k:]
    sens.A_B_ABi = sens.generate_all_input_matrix()
    f = np.asarray(sample(space.from_cube(sens.A_B_ABi.numpy()), n, seed), dtype=float).reshape(n, k + 2, n_mc)
    return sens, f - f[:, :2].mean(axis=(1, 2), keepdims=True)


def forms(sens, values: np.ndarray) -> np.ndarray:
    """Ax's Saltelli first-order and Jansen total-order numerators and the total variance
    of one function's ``(k + 2) x n_mc`` values at ``sens``'s rows: ``2k + 1`` numbers
    (first-order of each cube column, total-order of each, the variance over A and B)."""
    import torch  # deferred: as in saltelli_paths

    sens.evalute_function(torch.as_tensor(np.ascontiguousarray(values).reshape(-1)))
    var = sens.f_total_var
    return torch.cat([sens.first_order_indices() * var, sens.total_order_indices() * var, var.reshape(1)]).numpy()


def cross_path(of_mean: np.ndarray, mean_of_paths: np.ndarray, n: int) -> np.ndarray:
    """Mean over all pairs of ``n`` paths of a quadratic form between two paths, from the
    form of the mean path and the mean of the paths' own forms.

    A quadratic form of the sum of ``n`` paths is the sum of their own forms plus twice
    the sum of the symmetrised cross forms over pairs (polarisation), so the mean cross
    form is ``(n Q(mean path) - mean Q(path)) / (n - 1)``. Ax has no two-path estimator;
    this gets one from its one-path estimators instead of writing them again.
    """
    return (n * of_mean - mean_of_paths) / (n - 1)
