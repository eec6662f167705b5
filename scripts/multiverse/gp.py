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

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from multiverse.space import SearchSpace

DTYPE = torch.float64

#: Fewest finite outcomes a surrogate is fitted to; below it the design falls back to
#: Sobol and the report says there is no surrogate.
MIN_FIT = 2
#: L-BFGS iterations per attempt of the multi-output fit (see :func:`fit_multitask_gp`).
MULTITASK_MAXITER = 500


#: How categorical dimensions enter the GP: ``onehot`` columns of a SingleTaskGP, or a
#: ``kernel`` for categories (MixedSingleTaskGP). One-hot is the default because it
#: explored as well or better in ``benchmarks/exploration.py`` (see the README).
CATEGORICAL = ("onehot", "kernel")


#: The kernels :func:`fit_gp` offers. The report uses ``matern+linear``: a Matern-5/2
#: kernel plus a scaled linear kernel (Bayesian linear regression on the unit cube), so a
#: trend is not pulled back to the mean at the ends of the range; its credible intervals
#: covered the truth most often in ``tests/test_claim_types.py``'s calibration (the
#: README's "Measured choices" has the counts for each kernel).
KERNELS = ("rbf", "matern", "matern+linear")


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
    from botorch.models.transforms.input import ChainedInputTransform, Log10, Normalize, Round, Warp
    from gpytorch.priors import LogNormalPrior

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
        steps["warp"] = Warp(d=bounds.shape[-1], indices=numeric,
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
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import MixedSingleTaskGP, SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

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
        from botorch.models.utils.gpytorch_modules import (
            get_gaussian_likelihood_with_gamma_prior,
            get_matern_kernel_with_gamma_prior,
        )
        from gpytorch.kernels import LinearKernel, ScaleKernel

        lik = None if Yvar is not None else get_gaussian_likelihood_with_gamma_prior()
        covar = get_matern_kernel_with_gamma_prior(X.shape[-1])
        if kernel == "matern+linear":
            covar = covar + ScaleKernel(LinearKernel())
        model = SingleTaskGP(X, Y, train_Yvar=Yvar, input_transform=tf, likelihood=lik, covar_module=covar)
    else:
        model = SingleTaskGP(X, Y, train_Yvar=Yvar, input_transform=tf)
    # An ill-conditioned kernel matrix (e.g. many universes on one plateau under the linear
    # kernel) can make L-BFGS's eigendecomposition fail; like a NotPSDError, that attempt
    # is dropped and BoTorch retries from hyperparameters drawn from their priors.
    from linear_operator.utils.errors import NotPSDError

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
        from scipy.stats import norm

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
        f = model.posterior(X).rsample(torch.Size([n]))
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
    points is formed (the same numbers, many times faster: README, "Measured choices").
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
    from botorch.cross_validation import loo_cv

    with torch.no_grad():
        cv = loo_cv(model, observation_noise=True)
    mean = cv.posterior.mean.reshape(-1).numpy()
    sd = cv.posterior.variance.clamp_min(0).sqrt().reshape(-1).numpy()
    latent = cv.observed_Y.reshape(-1).numpy()
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
    from scipy.stats import binomtest

    from multiverse.stats import bootstrap

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


# --- the two-outcome model of a correlation claim ----------------------------------
#: Latent functions of the two-outcome model (:class:`LMCMultiTaskGP`).
MULTITASK_LATENTS = 2
#: Hyperparameter draws the two-outcome model averages over, and the Metropolis steps
#: (half of them burn-in) they are thinned from (:func:`sample_hyperparameters`).
HYPER_DRAWS, HYPER_STEPS = 16, 2000
#: Hyperparameter chains, each started at its own MAP fit (:func:`fit_multitask_gp`; the
#: report's ``report.hyperparameter_starts``).
HYPER_STARTS = 1
#: Gamma(concentration, rate) priors of the two-outcome model: on each lengthscale (the
#: report's Matern kernel, :func:`fit_gp`), and on each outcome's noise variance.
LENGTHSCALE_PRIOR, NOISE_PRIOR = (3.0, 6.0), (1.1, 0.05)

from botorch.models.gpytorch import GPyTorchModel  # noqa: E402  (the model below subclasses them)
from gpytorch.models import ExactGP  # noqa: E402


class LMCMultiTaskGP(ExactGP, GPyTorchModel):
    """Several outcomes as a sum of latent GPs, a linear model of coregionalisation:
    ``K((u, i), (u', j)) = sum_q k_q(u, u') w_qi w_qj``, each latent ``q`` with its own
    Matern-5/2 kernel ``k_q`` (ARD, Gamma lengthscale prior as in :func:`fit_gp`) and its
    own rank-1 task covariance ``w_q w_q^T`` (the loadings ``w_q`` of the outcomes on it,
    flat prior); a constant mean and a noise variance per outcome.

    Unlike one kernel times one task covariance (ICM, BoTorch's ``KroneckerMultiTaskGP``),
    the outcomes' correlation can differ by dimension: with two latents, ``x`` and ``y``
    may move together along one dimension and apart, or not at all, along another.

    ``train_X`` is ``n x d``, ``train_Y`` ``n x m`` (every outcome at every universe);
    ``posterior(X)`` for ``q x d`` ``X`` is joint over the ``q x m`` outputs.
    """

    def __init__(self, train_X: torch.Tensor, train_Y: torch.Tensor, n_latent: int = MULTITASK_LATENTS,
                 input_transform=None, outcome_transform=None):
        from botorch.models.utils.gpytorch_modules import MIN_INFERRED_NOISE_LEVEL
        from gpytorch.constraints import GreaterThan
        from gpytorch.kernels import LCMKernel, MaternKernel
        from gpytorch.likelihoods import MultitaskGaussianLikelihood
        from gpytorch.means import ConstantMean, MultitaskMean
        from gpytorch.priors import GammaPrior

        with torch.no_grad():
            X = self.transform_inputs(X=train_X, input_transform=input_transform)
        if outcome_transform is not None:
            outcome_transform.train()
            train_Y, _ = outcome_transform(train_Y, X=X)
        self._validate_tensor_args(X=X, Y=train_Y)
        m, d = train_Y.shape[-1], train_X.shape[-1]
        self._num_outputs = m
        likelihood = MultitaskGaussianLikelihood(
            num_tasks=m, rank=0, has_global_noise=False, noise_prior=GammaPrior(*NOISE_PRIOR),
            noise_constraint=GreaterThan(MIN_INFERRED_NOISE_LEVEL, initial_value=(NOISE_PRIOR[0] - 1) / NOISE_PRIOR[1]))
        super().__init__(train_X, train_Y, likelihood)
        self.mean_module = MultitaskMean(ConstantMean(), num_tasks=m)
        kernels = [MaternKernel(nu=2.5, ard_num_dims=d, lengthscale_prior=GammaPrior(*LENGTHSCALE_PRIOR))
                   for _ in range(n_latent)]
        self.covar_module = LCMKernel(kernels, num_tasks=m, rank=1)
        for k in self.covar_module.covar_module_list:  # w w^T only: no diagonal part
            k.task_covar_module.raw_var.data.fill_(-30.0)
            k.task_covar_module.raw_var.requires_grad_(False)
        if outcome_transform is not None:
            self.outcome_transform = outcome_transform
        if input_transform is not None:
            self.input_transform = input_transform
        self.to(train_X)

    def forward(self, X: torch.Tensor):
        from gpytorch.distributions import MultitaskMultivariateNormal

        if self.training:
            X = self.transform_inputs(X)
        return MultitaskMultivariateNormal(self.mean_module(X), self.covar_module(X))

    def hyperparameters(self) -> np.ndarray:
        """The hyperparameters as one vector, as :func:`sample_hyperparameters` moves
        them: per latent its log lengthscales (``d``) and loadings (``m``); then the
        outcomes' log noise variances and their means (``m`` each)."""
        parts = []
        for k in self.covar_module.covar_module_list:
            parts += [k.data_covar_module.lengthscale.detach().log().reshape(-1),
                      k.task_covar_module.covar_factor.detach().reshape(-1)]
        parts += [self.likelihood.task_noises.detach().log().reshape(-1),
                  torch.stack([c.constant.detach().reshape(()) for c in self.mean_module.base_means])]
        return torch.cat(parts).numpy().copy()

    def set_hyperparameters(self, theta: np.ndarray) -> None:
        """Set the hyperparameters from a vector laid out as :meth:`hyperparameters`'."""
        t = torch.as_tensor(theta, dtype=DTYPE)
        m, i = self.num_outputs, 0
        with torch.no_grad():
            for k in self.covar_module.covar_module_list:
                d = k.data_covar_module.lengthscale.numel()
                k.data_covar_module.lengthscale = t[i:i + d].exp().reshape(1, d)
                k.task_covar_module.covar_factor.copy_(t[i + d:i + d + m].reshape(m, 1))
                i += d + m
            self.likelihood.task_noises = t[i:i + m].exp()
            for c, v in zip(self.mean_module.base_means, t[i + m:i + 2 * m]):
                c.constant.fill_(v)
        self.prediction_strategy = None  # the posterior's caches belong to the old values


def lmc_log_posterior(theta, X, Y, n_latent: int, xp=np):
    """Log density, up to a constant, of :class:`LMCMultiTaskGP`'s hyperparameters
    ``theta`` (:meth:`~LMCMultiTaskGP.hyperparameters`) given ``n x d`` transformed inputs
    ``X`` and ``n x m`` standardised outcomes ``Y``: the Gaussian marginal likelihood, the
    Gamma priors, and the Jacobian of the log transforms the sampler moves lengthscales
    and noise variances in. Flat in loadings and means.

    ``xp`` is the array module: ``numpy`` (a float, ``-inf`` where the covariance is not
    positive definite) or ``jax.numpy`` (a differentiable scalar, so that NumPyro's NUTS
    can read the same density; NaN where the Cholesky factor fails)."""
    from botorch.models.utils.gpytorch_modules import MIN_INFERRED_NOISE_LEVEL

    if xp is np:
        from scipy.linalg import solve_triangular
    else:
        from jax.scipy.linalg import solve_triangular
    n, m = Y.shape
    d = X.shape[1]
    sq = (X[:, None, :] - X[None, :, :]) ** 2
    K = xp.zeros((n * m, n * m))
    lp, i = 0.0, 0
    a, b = LENGTHSCALE_PRIOR
    for _ in range(n_latent):
        log_ls, w = theta[i:i + d], theta[i + d:i + d + m]
        i += d + m
        r = xp.sqrt(sq @ xp.exp(-2 * log_ls))
        k = (1 + np.sqrt(5) * r + 5 / 3 * r**2) * xp.exp(-np.sqrt(5) * r)
        K = K + xp.kron(k, xp.outer(w, w))  # universe-major, as GPyTorch's multitask kernels
        lp = lp + xp.sum(a * log_ls - b * xp.exp(log_ls))  # Gamma(a, b) on e^s, times e^s
    log_noise, mean = theta[i:i + m], theta[i + m:i + 2 * m]
    a, b = NOISE_PRIOR
    lp = lp + xp.sum(a * log_noise - b * xp.exp(log_noise))
    K = K + xp.diag(xp.tile(xp.exp(log_noise), n))
    resid = (Y - mean).reshape(-1)
    if xp is np:
        if np.any(np.exp(log_noise) < MIN_INFERRED_NOISE_LEVEL):
            return -np.inf
        try:
            L = np.linalg.cholesky(K)
        except np.linalg.LinAlgError:
            return -np.inf
    else:
        L = xp.linalg.cholesky(K)
        lp = xp.where(xp.all(xp.exp(log_noise) >= MIN_INFERRED_NOISE_LEVEL), lp, -xp.inf)
    z = solve_triangular(L, resid, lower=True)
    out = lp - 0.5 * z @ z - xp.log(xp.diag(L)).sum()
    return float(out) if xp is np else out


def sample_hyperparameters(model: LMCMultiTaskGP, n_draws: int, n_steps: int, seed: int) -> np.ndarray:
    """``n_draws x p`` draws of ``model``'s hyperparameters from their posterior
    (:func:`lmc_log_posterior`), by adaptive Metropolis (Haario et al. 2001) started at
    the fitted values: a Gaussian random walk whose covariance, after the first 200
    steps, is ``2.38^2 / p`` times that of the chain so far; the draws are evenly spaced
    over the second half of ``n_steps``.

    Written here because the libraries do not cover it: BoTorch's fully Bayesian models
    (``SaasFullyBayesianSingleTaskGP`` and its multi-task form) sample with NumPyro's
    NUTS (JAX), which the pinned environments do not have, and they have no LMC kernel.
    NUTS on this same density (``benchmarks/calibration_probes.py nuts``, with JAX
    installed) reached a mode where one latent carries both outcomes, so that every
    sampled tau was -1 in 5 of 12 digits draws (coverage 3/12 against this sampler's
    6/12): the flat prior on the loadings admits it, and this chain, started at the MAP,
    stays away from it."""
    X = model.train_inputs[0].detach().numpy()
    Y = model.train_targets.detach().numpy()
    q = len(model.covar_module.covar_module_list)
    rng = np.random.default_rng(seed)
    theta = model.hyperparameters()
    p = len(theta)
    lp = lmc_log_posterior(theta, X, Y, q)
    chain = np.empty((n_steps, p))
    chol = np.sqrt(0.01) * np.eye(p)
    for t in range(n_steps):
        if t >= 200 and t % 100 == 0:
            cov = 2.38**2 / p * np.cov(chain[t // 2:t].T) + 1e-8 * np.eye(p)
            chol = np.linalg.cholesky(cov)
        prop = theta + chol @ rng.standard_normal(p)
        lq = lmc_log_posterior(prop, X, Y, q)
        if np.log(rng.random()) < lq - lp:
            theta, lp = prop, lq
        chain[t] = theta
    half = n_steps // 2
    return chain[half + np.linspace(0, n_steps - half - 1, n_draws).astype(int)]


class MixturePosterior:
    """An equal mixture of GPyTorch posteriors (one per hyperparameter draw):
    ``rsample(torch.Size([n]))`` gives ``n x q x m`` samples, ``n / len(posteriors)``
    from each (the remainder from the first ones); ``mean`` and ``variance`` are the
    mixture's moments."""

    def __init__(self, posteriors: Sequence[Any]):
        self.posteriors = list(posteriors)

    def rsample(self, sample_shape: torch.Size = torch.Size([1])) -> torch.Tensor:
        n, k = int(np.prod(sample_shape)), len(self.posteriors)
        sizes = [n // k + (j < n % k) for j in range(k)]
        f = torch.cat([p.rsample(torch.Size([s])) for p, s in zip(self.posteriors, sizes) if s], 0)
        return f.reshape(*sample_shape, *f.shape[1:])

    @property
    def mean(self) -> torch.Tensor:
        return torch.stack([p.mean for p in self.posteriors]).mean(0)

    @property
    def variance(self) -> torch.Tensor:
        means = torch.stack([p.mean for p in self.posteriors])
        return torch.stack([p.variance for p in self.posteriors]).mean(0) + means.var(0, unbiased=False)


class HyperparameterMixture:
    """A two-outcome GP averaged over its hyperparameters: ``members`` are
    :class:`LMCMultiTaskGP` s on the same data, one per posterior draw of the
    hyperparameters (:func:`sample_hyperparameters`), mixed equally; ``fitted`` is the
    MAP fit they were sampled around. ``posterior(X)`` is a :class:`MixturePosterior`,
    so :func:`joint_samples` and :func:`posterior_mean_std` read it as any model."""

    categorical = "onehot"

    def __init__(self, members: Sequence[LMCMultiTaskGP], fitted: LMCMultiTaskGP):
        self.members, self.fitted = list(members), fitted
        self.num_outputs = fitted.num_outputs

    def posterior(self, X: torch.Tensor, observation_noise: bool = False) -> MixturePosterior:
        return MixturePosterior([m.posterior(X, observation_noise=observation_noise) for m in self.members])


def fit_multitask_gp(space: SearchSpace, universes: Sequence[Mapping[str, Any]], Y: np.ndarray, seed: int,
                     n_draws: int = HYPER_DRAWS, n_steps: int = HYPER_STEPS,
                     n_latent: int = MULTITASK_LATENTS, starts: int = HYPER_STARTS,
                     sampler: Callable[[LMCMultiTaskGP, int, int, int], np.ndarray] | None = None,
                     ) -> HyperparameterMixture:
    """One GP of several outcomes that learns how they co-vary (:class:`LMCMultiTaskGP`),
    on the rows where every outcome is finite, averaged over ``n_draws`` posterior draws
    of its hyperparameters (``n_draws=0``: the MAP fit alone).

    A correlation claim needs it: two independent GPs give posterior samples whose
    unexplained wiggles are independent, which pulls a sampled Kendall tau towards 0,
    and one shared kernel (ICM) makes the outcomes' correlation the same along every
    dimension. Tau hinges on how the outcomes co-vary, which 64 noisy universes pin down
    loosely, so one MAP fit is too sure of it: refitted with the hyperparameters of other
    draws, a draw's tau moved by up to 0.2. In ``tests/test_claim_types.py``'s calibration
    setting (true tau 0.73, 64 universes, draws 0-23; then draws 24-47) the 95% interval
    held the truth in 3 draws for two independent GPs, 18 for a ``KroneckerMultiTaskGP``
    (RBF, unstandardised outcomes), 20 for one with a Matern kernel on standardised
    outcomes, 21 (21) for this model at its MAP, 23 (21) averaged over 16 hyperparameter
    draws (- (22) over 32, - (21) with 4,000 steps); with a full task covariance per
    latent under an LKJ(1.5) prior instead, 22 (18), its intervals too low (tau pulled
    towards 0). Fit and 16 draws take 2-3 s.
    """
    import copy

    from botorch.models.transforms.outcome import Standardize
    from botorch.optim.fit import fit_gpytorch_mll_scipy
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from linear_operator.utils.errors import NotPSDError

    Y = np.asarray(Y, dtype=float)
    keep = np.isfinite(Y).all(1)
    if keep.sum() < MIN_FIT:
        raise ValueError(f"a GP needs at least {MIN_FIT} universes with every outcome finite, got {int(keep.sum())}")
    X = torch.as_tensor(space.encode([u for u, k in zip(universes, keep) if k]), dtype=DTYPE)
    torch.manual_seed(seed)
    model = LMCMultiTaskGP(X, torch.as_tensor(Y[keep], dtype=DTYPE), n_latent=n_latent,
                           input_transform=input_transform(space), outcome_transform=Standardize(m=Y.shape[1]))
    # One L-BFGS run capped at MULTITASK_MAXITER iterations (an iteration cap, unlike a
    # wall-clock timeout, keeps the fit deterministic), without fit_gpytorch_mll's retries
    # from prior samples: the MAP only starts the sampler.
    def fit(m) -> None:
        mll = ExactMarginalLogLikelihood(m.likelihood, m).train()
        try:
            fit_gpytorch_mll_scipy(mll, options={"maxiter": MULTITASK_MAXITER})
        except NotPSDError:  # rare; the sampler starts from where the fit stopped
            pass
        m.eval()
        m.categorical = "onehot"

    fit(model)
    if not n_draws:
        return HyperparameterMixture([model], model)
    # With starts > 1, chains from several MAP fits: the first from the fit above, each
    # other from L-BFGS started there with every log lengthscale and loading moved by a
    # standard normal draw. One chain stays near one mode, while the fits of different
    # designs differ far more than its draws do (benchmarks/calibration_probes.py
    # jackknife --fixed; starts). With starts = 1 this is the single chain as before.
    rng = np.random.default_rng(seed)
    theta0, m = model.hyperparameters(), Y.shape[1]
    members = []
    for k in range(max(1, starts)):
        start = model
        if k:
            start = copy.deepcopy(model)
            theta = theta0.copy()
            theta[: len(theta) - 2 * m] += rng.standard_normal(len(theta) - 2 * m)
            start.set_hyperparameters(theta)
            fit(start)
        per = n_draws // starts + (k < n_draws % starts)
        for theta in (sampler or sample_hyperparameters)(start, per, n_steps, seed + k) if per else []:
            member = copy.deepcopy(start)
            member.set_hyperparameters(theta)
            members.append(member)
    return HyperparameterMixture(members, model)


def multitask_loo(model: LMCMultiTaskGP) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact leave-one-universe-out predictions of a multi-output GP for fixed
    hyperparameters: with ``K`` the ``nm x nm`` covariance of the observations (noise
    included) and ``r`` the residuals from the prior mean, universe ``i``'s ``m``
    outcomes, predicted from every other universe, have covariance
    ``S_i = ([K^-1]_ii)^-1`` (the ``m x m`` diagonal block) and mean
    ``y_i - S_i [K^-1 r]_i`` (the block form of BoTorch's ``efficient_loo_cv``, which
    leaves out one observation at a time).

    Returns the ``n x m`` predictive means, variances (observation noise included) and
    observations, on the outcomes' scale (``Standardize`` undone)."""
    from linear_operator.utils.cholesky import psd_safe_cholesky

    with torch.no_grad():
        prior = model.forward(model.train_inputs[0])
        K = model.likelihood(prior).covariance_matrix  # interleaved: universe-major
        y = model.train_targets
        n, m = y.shape
        K_inv = torch.cholesky_inverse(psd_safe_cholesky(K))
        i = torch.arange(n)
        S = torch.linalg.inv(K_inv.reshape(n, m, n, m)[i, :, i, :])
        a = (K_inv @ (y - prior.mean).reshape(-1)).reshape(n, m)
        mean = y - (S @ a.unsqueeze(-1)).squeeze(-1)
        var = torch.diagonal(S, dim1=-2, dim2=-1)
        sd = model.outcome_transform.stdvs.reshape(1, m)
        shift = model.outcome_transform.means.reshape(1, m)
    return (shift + sd * mean).numpy(), (sd**2 * var).numpy(), (shift + sd * y).numpy()


def multitask_loo_diagnostics(model: HyperparameterMixture, warps: Sequence[Warp]) -> list[dict[str, Any]]:
    """:func:`loo_diagnostics` of each outcome of a two-outcome model, from
    :func:`multitask_loo`: for a mixture over hyperparameter draws, each universe's
    prediction is the mixture's mean and its 95% interval the mean +- 1.96 mixture sd
    (the draws' LOO means and variances, mixed equally)."""
    loo = [multitask_loo(member) for member in model.members]
    means = np.stack([mu for mu, _, _ in loo])
    mean = means.mean(0)
    sd = np.sqrt(np.stack([v for _, v, _ in loo]).mean(0) + means.var(0))
    latent = loo[0][2]
    out = []
    for k, warp in enumerate(warps):
        covered = np.abs(latent[:, k] - mean[:, k]) <= 1.96 * sd[:, k]
        y, pred = warp.inverse(latent[:, k]), warp.inverse(mean[:, k])
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        var = float(np.var(y))
        r2 = 1.0 - rmse**2 / var if var > 0 else float("nan")
        coverage = float(covered.mean())
        ok = bool(np.isfinite(r2) and r2 >= MIN_LOO_R2 and coverage >= MIN_COVERAGE)
        d = {"rmse": rmse, "r2": r2, "coverage": coverage, "n": int(len(y)), "ok": ok,
             "observed": y.tolist(), "predicted": pred.tolist(),
             "predicted_lo": warp.inverse(mean[:, k] - 1.96 * sd[:, k]).tolist(),
             "predicted_hi": warp.inverse(mean[:, k] + 1.96 * sd[:, k]).tolist()}
        out.append({**d, **loo_intervals(y, pred, covered)})
    return out
