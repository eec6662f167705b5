"""The GP surrogate shared by the design rounds and the claim verdicts.

A BoTorch GP per outcome on the search space's raw features
(:meth:`multiverse.space.SearchSpace.encode`). Its input transform
(:func:`input_transform`) rounds integer dimensions (``Round``), takes ``log10`` of
log-scaled ones (``Log10``) and maps the box to the unit cube (``Normalize``); the
outcome is standardised by the default ``Standardize``. Categorical dimensions are
one-hot columns of a ``SingleTaskGP`` (``categorical="onehot"``, the default) or
level indices under the categorical kernel of a ``MixedSingleTaskGP``
(``categorical="kernel"``); ``benchmarks/exploration.py`` measures both. With
replicates, ``yvar`` gives each universe's observed noise (``train_Yvar``:
heteroscedastic, fixed-noise likelihood). Everything is float64.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
from botorch.cross_validation import loo_cv
from botorch.fit import fit_gpytorch_mll
from botorch.models import MixedSingleTaskGP, SingleTaskGP
from botorch.models.transforms.input import ChainedInputTransform, Log10, Normalize, Round
from botorch.models.transforms.input import Warp as KumaraswamyWarp
from botorch.models.utils.gpytorch_modules import (
    get_gaussian_likelihood_with_gamma_prior,
    get_matern_kernel_with_gamma_prior,
)
from botorch.posteriors import GPyTorchPosterior
from gpytorch.kernels import LinearKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.priors import LogNormalPrior
from linear_operator.utils.errors import NotPSDError
from scipy.stats import binomtest, norm

from multiverse.space import SearchSpace
from multiverse.stats import bootstrap

DTYPE = torch.float64

#: Fewest finite outcomes a surrogate is fitted to; below it the design falls back to
#: Sobol and the report says there is no surrogate.
MIN_FIT = 2


#: How categorical dimensions enter the GP: ``onehot`` columns of a SingleTaskGP, or a
#: ``kernel`` for categories (MixedSingleTaskGP). One-hot is the default because it
#: explored as well or better in ``benchmarks/exploration.py`` (docs/benchmarks.md).
CATEGORICAL = ("onehot", "kernel")


#: The kernels :func:`fit_gp` offers. The report uses ``matern+linear``: a Matern-5/2
#: kernel plus a scaled linear kernel (Bayesian linear regression on the unit cube), so a
#: trend is not pulled back to the mean at the ends of the range; its credible intervals
#: covered the truth most often in ``tests/test_claim_types.py``'s calibration (the
#: docs/benchmarks.md's "Measured choices" has the counts for each kernel).
KERNELS = ("rbf", "matern", "matern+linear")


class DenseLinearKernel(LinearKernel):
    """gpytorch's :class:`~gpytorch.kernels.LinearKernel` as a dense matrix.

    gpytorch returns ``x x^T`` as a low-rank root, and a dense kernel matrix plus a
    low-rank root is formed by ``add_low_rank``, which re-derives a root of the sum (a
    Cholesky of the dense part, an SVD and N x N x N products) whether or not anything
    needs one. The report's Matern + linear kernel paid that at every fitting step and
    at every posterior over a point set: 19 of the trend's 26 s on 5,436 points, for a
    matrix whose sum is one addition away (measured 2026-12-06; docs/benchmarks.md, "The
    report rule's time"). The kernel, its hyperparameters and priors are gpytorch's."""

    def forward(self, x1, x2, diag=False, last_dim_is_batch=False, **params):
        out = super().forward(x1, x2, diag=diag, last_dim_is_batch=last_dim_is_batch, **params)
        return out if diag else out.to_dense()


def encoding(categorical: str) -> str:
    """The feature encoding of categorical dimensions that a GP of this kind reads."""
    return "onehot" if categorical == "onehot" else "index"


#: Prior of the Kumaraswamy concentrations of input warping (BoTorch's input-warping
#: tutorial's choice: median 1, i.e. no warp, and two thirds of the mass within a factor of 2.4).
WARP_PRIOR_SCALE = 0.75**0.5


def input_transform(space: SearchSpace, categorical: str = "onehot", warping: bool = False):
    """``Round`` (integer dimensions) -> ``Log10`` (log-scaled ones) -> ``Normalize``
    (the space's box, in log10 where log-scaled, to the unit cube); with ``warping``, then
    BoTorch's learned Kumaraswamy-CDF ``Warp`` of every numeric dimension (Snoek et al.
    2014's input warping, for surfaces whose smoothness changes across the range)."""
    cols = space.columns(encoding(categorical))
    steps = {}
    ints = [cols[d.name][0] for d in space.numeric if d.kind == "int"]
    if ints:
        steps["round"] = Round(integer_indices=ints)
    logs = [cols[d.name][0] for d in space.numeric if d.log]
    if logs:
        steps["log10"] = Log10(indices=logs)
    bounds = torch.as_tensor(space.bounds(encoding(categorical)), dtype=DTYPE)
    steps["normalize"] = Normalize(d=bounds.shape[-1], bounds=bounds)
    numeric = [cols[d.name][0] for d in space.numeric]
    if warping and numeric:
        steps["warp"] = KumaraswamyWarp(d=bounds.shape[-1], indices=numeric,
                                        concentration1_prior=LogNormalPrior(0.0, WARP_PRIOR_SCALE),
                                        concentration0_prior=LogNormalPrior(0.0, WARP_PRIOR_SCALE))
    return ChainedInputTransform(**steps)


def fit_gp(
    space: SearchSpace,
    universes: Sequence[Mapping[str, Any]],
    y: Sequence[float],
    seed: int,
    yvar: Sequence[float] | None = None,
    categorical: str = "onehot",
    kernel: str = "rbf",
    warping: bool = False,
):
    """Fit a GP of outcome ``y`` on ``universes``; rows with a non-finite ``y`` are left out.

    Args:
        yvar: optional observed noise variance of each ``y`` (e.g. the variance of a
            mean over seeds); the GP then uses it as fixed, per-universe noise.
        categorical: ``onehot`` (SingleTaskGP) or ``kernel`` (MixedSingleTaskGP).
        kernel: ``rbf``, BoTorch's default (an RBF kernel with dimension-scaled
            lengthscale priors and no outputscale), which the design uses;
            ``matern``, a Matern-5/2 kernel with a learned outputscale and Gamma priors
            (BoTorch's earlier default); or ``matern+linear``, that plus a scaled linear
            kernel, which the report uses because its credible intervals covered the
            truth most often (see :data:`KERNELS`).
        warping: learn an input warping of the numeric dimensions (:func:`input_transform`).

    Returns a fitted model in eval mode; ``model.categorical`` records the kind, so
    that :func:`features` encodes new points the same way.
    """
    y = np.asarray(y, dtype=float)
    keep = np.isfinite(y)
    if keep.sum() < MIN_FIT:
        raise ValueError(f"a GP needs at least {MIN_FIT} finite outcomes, got {int(keep.sum())}")
    enc = encoding(categorical)
    X = torch.as_tensor(space.encode([u for u, k in zip(universes, keep) if k], enc), dtype=DTYPE)
    Y = torch.as_tensor(y[keep], dtype=DTYPE).unsqueeze(-1)
    Yvar = None if yvar is None else torch.as_tensor(np.asarray(yvar, dtype=float)[keep], dtype=DTYPE).unsqueeze(-1)
    torch.manual_seed(seed)
    tf = input_transform(space, categorical, warping)
    cat_dims = [space.columns(enc)[d.name][0] for d in space.categorical]
    if categorical == "kernel" and cat_dims:
        model = MixedSingleTaskGP(X, Y, cat_dims=cat_dims, train_Yvar=Yvar, input_transform=tf)
    elif kernel in ("matern", "matern+linear"):
        lik = None if Yvar is not None else get_gaussian_likelihood_with_gamma_prior()
        covar = get_matern_kernel_with_gamma_prior(X.shape[-1])
        if kernel == "matern+linear":
            covar = covar + ScaleKernel(DenseLinearKernel())
        model = SingleTaskGP(X, Y, train_Yvar=Yvar, input_transform=tf, likelihood=lik, covar_module=covar)
    else:
        model = SingleTaskGP(X, Y, train_Yvar=Yvar, input_transform=tf)
    # An ill-conditioned kernel matrix (e.g. many universes on one plateau under the linear
    # kernel) can make L-BFGS's eigendecomposition fail; like a NotPSDError, that attempt
    # is dropped and BoTorch retries from hyperparameters drawn from their priors.
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model),
                     caught_exception_types=(NotPSDError, torch.linalg.LinAlgError))
    model.eval()
    model.categorical = categorical
    return model


class Warp:
    """The scale a metric's GP works on, from the metric's range.

    A metric bounded on both sides (an accuracy in [0, 1], the gap in [-1, 1]) is
    modelled as ``logit((y - low) / (high - low))``, its observations clipped to
    ``[margin, 1 - margin]`` of the range first (a test accuracy of exactly 1 is
    common); one bounded below only (a loss, sharpness) as ``log(y - low)``, clipped at
    ``margin``; an unbounded one as is. Samples come back through the inverse
    (sigmoid, exp), so every sample, band and maximum lies inside the range.
    Quantiles of a monotone transform are the transformed quantiles, so marginal bands
    are exact; a mean is not (it is read from samples).
    """

    def __init__(self, low: float | None = None, high: float | None = None, margin: float | None = None):
        self.low, self.high = low, high
        if low is not None and high is not None:
            self.kind, self.margin = "logit", 0.005 if margin is None else margin
        elif low is not None:
            self.kind, self.margin = "log", 1e-6 if margin is None else margin
        else:
            self.kind, self.margin = "identity", 0.0

    def __repr__(self) -> str:
        return f"Warp({self.kind}, low={self.low}, high={self.high})"

    def forward(self, y):
        y = np.asarray(y, dtype=float)
        if self.kind == "logit":
            p = np.clip((y - self.low) / (self.high - self.low), self.margin, 1 - self.margin)
            return np.log(p) - np.log1p(-p)
        if self.kind == "log":
            return np.log(np.maximum(y - self.low, self.margin))
        return y

    def inverse(self, f):
        f = np.asarray(f, dtype=float)
        if self.kind == "logit":
            return self.low + (self.high - self.low) / (1 + np.exp(-f))
        if self.kind == "log":
            return self.low + np.exp(f)
        return f


IDENTITY = Warp()


class RankWarp:
    """The normal scores of a metric's observed values (van der Waerden's): ``Phi^-1(r / (n + 1))``
    for a value of rank ``r`` among the ``n`` finite ones (1-based, ties averaged); back
    through monotone interpolation between the observed values (linear beyond them, so
    distinct samples stay distinct).

    For a statistic of ranks only (Kendall's tau), any increasing scale models the same
    claim; on this one the GP sees no outliers: a collapsed run's loss of 1e30 is just
    the largest value, where on the log scale it is 60 units above the rest and the GP's
    lengthscales and noise shrink to fit it (``benchmarks/calibration.py``).
    """

    kind = "rank"

    def __init__(self, values):
        v = np.asarray(values, dtype=float)
        self.values = np.unique(v[np.isfinite(v)])
        self.n = int(np.isfinite(v).sum())
        self._sorted = np.sort(v[np.isfinite(v)])
        self.knots = self.forward(self.values)

    def __repr__(self) -> str:
        return f"RankWarp(n={self.n})"

    def forward(self, y):
        y = np.asarray(y, dtype=float)
        ok = np.isfinite(y)
        r = (np.searchsorted(self._sorted, np.where(ok, y, 0.0), "left")
             + np.searchsorted(self._sorted, np.where(ok, y, 0.0), "right")) / 2
        return np.where(ok, norm.ppf((r + 0.5) / (self.n + 1)), np.nan)

    def inverse(self, f):
        f = np.asarray(f, dtype=float)
        z, v = self.knots, self.values
        if len(v) < 2:
            return np.full_like(f, v[0] if len(v) else np.nan)
        out = np.interp(f, z, v)
        lo, hi = (v[1] - v[0]) / (z[1] - z[0]), (v[-1] - v[-2]) / (z[-1] - z[-2])
        return np.where(f < z[0], v[0] + (f - z[0]) * lo, np.where(f > z[-1], v[-1] + (f - z[-1]) * hi, out))


#: Points sampled jointly from which :func:`joint_samples` adds :data:`JITTER` to the
#: posterior covariance's diagonal before its Cholesky factorisation: the report's
#: Saltelli matrices (1,536 points) and the trend's family (5,436) are never positive
#: definite in float64 without it, so gpytorch factorised each twice (the trend's:
#: 1.4 s each on one thread).
JITTER_FROM = 1024
#: gpytorch's first jitter for float64 (``linear_operator.settings.cholesky_jitter``).
JITTER = 1e-8


def joint_samples(model, space: SearchSpace, universes: Sequence[Mapping[str, Any]], n: int, seed: int,
                  warp: Warp = IDENTITY, batch: int = 1) -> np.ndarray:
    """``n x len(universes)`` joint samples of the GP's latent function (sampled
    functions, on the metric's own scale through ``warp``); ``n x len(universes) x m``
    for a model of ``m > 1`` outcomes.

    With ``batch`` b, the universes are b equal consecutive blocks sampled jointly within
    each block and independently across blocks (a map's cells: b small Cholesky
    factorisations instead of one of the whole grid)."""
    X = features(space, universes, model)
    if batch > 1:
        X = X.reshape(batch, len(universes) // batch, -1)
    torch.manual_seed(seed)
    with torch.no_grad():
        posterior = model.posterior(X)
        if isinstance(posterior, GPyTorchPosterior) and X.shape[-2] >= JITTER_FROM:
            # the jitter gpytorch's Cholesky adds once its first try fails, which it did on
            # these point sets: given at once, the factorisation runs once, not twice
            posterior = GPyTorchPosterior(posterior.distribution.add_jitter(JITTER))
        f = posterior.rsample(torch.Size([n]))
    f = f.reshape(n, len(universes), -1)
    f = (f.squeeze(-1) if f.shape[-1] == 1 else f).numpy()
    return warp.inverse(f)


def features(space: SearchSpace, universes: Sequence[Mapping[str, Any]], model=None) -> torch.Tensor:
    """Raw features of ``universes`` as ``model`` reads them (one-hot when no model is given)."""
    enc = encoding(getattr(model, "categorical", "onehot"))
    return torch.as_tensor(space.encode(universes, enc), dtype=DTYPE)


def noise_variance(model) -> torch.Tensor:
    """The model's observation-noise variance in standardised units: the learned
    scalar, or each training point's fixed noise (``train_Yvar``)."""
    return model.likelihood.noise.detach().reshape(-1)


def lengthscales(model, space: SearchSpace) -> dict[str, float]:
    """The fitted lengthscales of the numeric (and one-hot) features, for the design's diagnostics."""
    names = space.feature_names(encoding(getattr(model, "categorical", "onehot")))
    out = {}
    for k in model.covar_module.modules():
        ls = getattr(k, "lengthscale", None)
        active = getattr(k, "active_dims", None)
        if ls is None:
            continue
        idx = active.tolist() if active is not None else list(range(ls.shape[-1]))
        for i, v in zip(idx, ls.detach().reshape(-1).tolist()):
            out.setdefault(names[i], v)
    return out


def outcome_scale(model) -> float:
    """The standard deviation used by the model's ``Standardize`` outcome transform."""
    return float(model.outcome_transform.stdvs.detach().squeeze())


@torch.no_grad()
def posterior_mean_std(model, X: torch.Tensor, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Marginal posterior mean and standard deviation of the latent function at ``n x d`` ``X``.

    Each point is its own batch (``n x 1 x d``), so no joint covariance between the
    points is formed (the same numbers, many times faster: docs/benchmarks.md, "Measured choices").
    """
    means, stds = [], []
    for i in range(0, len(X), chunk):
        post = model.posterior(X[i : i + chunk].unsqueeze(-2))
        means.append(post.mean.squeeze(-2))
        stds.append(post.variance.clamp_min(0).sqrt().squeeze(-2))
    mean, std = torch.cat(means), torch.cat(stds)
    if mean.shape[-1] == 1:  # one outcome: a vector; several: n x m
        mean, std = mean.squeeze(-1), std.squeeze(-1)
    return mean.numpy(), std.numpy()


def partial_dependence(
    model, space: SearchSpace, name: str, values: Sequence[Any], base: Sequence[Mapping[str, Any]]
) -> np.ndarray:
    """Posterior mean averaged over ``base`` universes with dimension ``name`` set to each value.

    Returns an array with one entry per value (the GP's partial-dependence curve).
    """
    grid = [{**u, name: v} for v in values for u in base]
    mean, _ = posterior_mean_std(model, features(space, grid, model))
    return mean.reshape(len(values), len(base)).mean(axis=1)


def dimension_grid(space: SearchSpace, name: str, n: int = 25) -> list[Any]:
    """Values spanning a dimension: its levels, or ``n`` points evenly spaced (in log space if log)."""
    d = space[name]
    if d.is_categorical:
        return list(d.choices)
    return sorted(set(d.from_unit(np.linspace(0.0, 1.0, n))))


def influence(model, space: SearchSpace, base: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Variance of each dimension's partial-dependence curve: a main-effect importance.

    Numeric grids are uniform on the dimension's own (log) scale, so the variance is
    that of the main effect under the uniform measure the design samples from.
    """
    return {
        d.name: float(np.var(partial_dependence(model, space, d.name, dimension_grid(space, d.name), base)))
        for d in space.dimensions
    }


#: A surrogate fits poorly (and verdicts resting on it are flagged) when its
#: leave-one-out R^2 is below this, or its 95% LOO intervals cover fewer than
#: ``MIN_COVERAGE`` of the held-out universes.
MIN_LOO_R2, MIN_COVERAGE = 0.5, 0.8


def loo_diagnostics(model, warp: Warp = IDENTITY) -> dict[str, Any]:
    """Leave-one-out predictions of every training universe (BoTorch's ``loo_cv``: exact
    LOO for fixed hyperparameters) and how well they fit: RMSE, R^2 and the coverage
    of the 95% predictive intervals (observation noise included).

    With a ``warp`` the LOO runs on the GP's scale and is reported on the metric's: the
    prediction is the predictive median, its interval the warped interval (coverage is
    the same on both scales)."""
    with torch.no_grad():
        cv = loo_cv(model, observation_noise=True)
    mean = cv.posterior.mean.reshape(-1).numpy()
    sd = cv.posterior.variance.clamp_min(0).sqrt().reshape(-1).numpy()
    latent = cv.observed_Y.reshape(-1).numpy()
    return loo_scores(latent, mean, sd, warp)


def loo_scores(latent: np.ndarray, mean: np.ndarray, sd: np.ndarray, warp: Warp = IDENTITY) -> dict[str, Any]:
    """The fit of leave-one-out predictions on the GP's scale (observations ``latent``,
    predictive means ``mean`` and sds ``sd``, one each a universe), reported on the
    metric's through ``warp``: RMSE, R^2, the coverage of the 95% intervals, whether the
    fit is ``ok`` (:data:`MIN_LOO_R2`, :data:`MIN_COVERAGE`), the per-universe points and
    the statistics' intervals (:func:`loo_intervals`). :func:`loo_diagnostics` and
    :func:`multiverse.two_outcome.multitask_loo_diagnostics` score with it."""
    covered = np.abs(latent - mean) <= 1.96 * sd
    y, pred = warp.inverse(latent), warp.inverse(mean)
    rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
    var = float(np.var(y))
    r2 = 1.0 - rmse**2 / var if var > 0 else float("nan")
    coverage = float(covered.mean())
    ok = bool(np.isfinite(r2) and r2 >= MIN_LOO_R2 and coverage >= MIN_COVERAGE)
    out = {"rmse": rmse, "r2": r2, "coverage": coverage, "n": int(len(y)), "ok": ok,
           "observed": y.tolist(), "predicted": pred.tolist(),
           "predicted_lo": warp.inverse(mean - 1.96 * sd).tolist(), "predicted_hi": warp.inverse(mean + 1.96 * sd).tolist()}
    return {**out, **loo_intervals(y, pred, covered)}


def loo_intervals(y: np.ndarray, mean: np.ndarray, covered: np.ndarray, n_boot: int = 1000, seed: int = 0) -> dict:
    """95% intervals of the LOO statistics: a bootstrap over universes for RMSE and R^2,
    Wilson's interval for the coverage (scipy's ``binomtest``)."""
    def mse_var(rows: np.ndarray) -> np.ndarray:  # n_boot x n x (observed, predicted)
        return np.stack([((rows[..., 1] - rows[..., 0]) ** 2).mean(1), rows[..., 0].var(1)])

    mse, var = bootstrap(mse_var, [np.c_[y, mean]], n_boot, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = np.where(var > 0, 1 - mse / var, np.nan)
    ci = binomtest(int(covered.sum()), len(covered)).proportion_ci(0.95, method="wilson")
    q = lambda v: [float(x) for x in np.nanquantile(v, [0.025, 0.975])]  # noqa: E731
    (rlo, rhi), (r2lo, r2hi) = q(np.sqrt(mse)), q(r2)
    return {"rmse_lo": rlo, "rmse_hi": rhi, "r2_lo": r2lo, "r2_hi": r2hi,
            "coverage_lo": float(ci.low), "coverage_hi": float(ci.high)}
