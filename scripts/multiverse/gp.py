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


#: The kernels :func:`fit_gp` offers. Measured in ``tests/test_claim_types.py``'s
#: setting (3-D mixed space, noise sd 0.01, 24 draws; 95% intervals of a comparison's
#: effect / a trend's slope holding the truth): with 64 universes, ``rbf`` 20/24 and
#: 19/24, ``matern`` 22/24 and 21/24; with 32 universes, ``rbf`` 18 and 12, ``matern``
#: 22 and 13 (a weak trend is shrunk towards flat: its slope came out at 0.031 for a
#: true 0.040 with either kernel, and also with the true noise given). ``matern+linear``
#: adds a scaled linear kernel (Bayesian linear regression on the unit cube) to the
#: Matern, so a trend is not pulled back to the mean at the edges of the range: with
#: 64 universes, comparison 24/24 and trend 22/24 (Matern alone 24 and 21, after the
#: reference-set bootstrap of :func:`multiverse.stats.reference_mean`; 2026-12-04).
KERNELS = ("rbf", "matern", "matern+linear")


def encoding(categorical: str) -> str:
    """The feature encoding of categorical dimensions that a GP of this kind reads."""
    return "onehot" if categorical == "onehot" else "index"


def input_transform(space: SearchSpace, categorical: str = "onehot"):
    """``Round`` (integer dimensions) -> ``Log10`` (log-scaled ones) -> ``Normalize``
    (the space's box, in log10 where log-scaled, to the unit cube)."""
    from botorch.models.transforms.input import ChainedInputTransform, Log10, Normalize, Round

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
    return ChainedInputTransform(**steps)


def fit_gp(
    space: SearchSpace,
    universes: Sequence[Mapping[str, Any]],
    y: Sequence[float],
    seed: int,
    yvar: Sequence[float] | None = None,
    categorical: str = "onehot",
    kernel: str = "rbf",
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
    tf = input_transform(space, categorical)
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
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
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
def posterior_mean_std(model, X: torch.Tensor, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Marginal posterior mean and standard deviation of the latent function at ``n x d`` ``X``.

    Evaluated in chunks: 40k points took 0.3 s in chunks of 1,024 and 3.9 s in chunks
    of 8,192 (measured here), as larger chunks hit slower paths in GPyTorch.
    """
    means, stds = [], []
    for i in range(0, len(X), chunk):
        post = model.posterior(X[i : i + chunk])
        means.append(post.mean.squeeze(-1))
        stds.append(post.variance.clamp_min(0).sqrt().squeeze(-1))
    return torch.cat(means).numpy(), torch.cat(stds).numpy()


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

    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(y), (n_boot, len(y)))
    mse = ((mean[i] - y[i]) ** 2).mean(1)
    var = y[i].var(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = np.where(var > 0, 1 - mse / var, np.nan)
    ci = binomtest(int(covered.sum()), len(covered)).proportion_ci(0.95, method="wilson")
    q = lambda v: [float(x) for x in np.nanquantile(v, [0.025, 0.975])]  # noqa: E731
    (rlo, rhi), (r2lo, r2hi) = q(np.sqrt(mse)), q(r2)
    return {"rmse_lo": rlo, "rmse_hi": rhi, "r2_lo": r2lo, "r2_hi": r2hi,
            "coverage_lo": float(ci.low), "coverage_hi": float(ci.high)}


def fit_multitask_gp(space: SearchSpace, universes: Sequence[Mapping[str, Any]], Y: np.ndarray, seed: int):
    """One GP of several outcomes that learns how they co-vary (BoTorch's
    ``KroneckerMultiTaskGP``: a shared kernel over universes times a learned
    between-outcome covariance), on the rows where every outcome is finite.

    A correlation claim needs it: two independent GPs give posterior samples whose
    unexplained wiggles are independent, which pulls a sampled Kendall tau towards 0.
    In ``tests/test_claim_types.py``'s setting (true tau 0.73, 64 universes) the 95%
    interval from two independent GPs held the truth in 3 of 24 draws, and from this
    model in 10 of the first 12.
    """
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import KroneckerMultiTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    Y = np.asarray(Y, dtype=float)
    keep = np.isfinite(Y).all(1)
    if keep.sum() < MIN_FIT:
        raise ValueError(f"a GP needs at least {MIN_FIT} universes with every outcome finite, got {int(keep.sum())}")
    X = torch.as_tensor(space.encode([u for u, k in zip(universes, keep) if k]), dtype=DTYPE)
    torch.manual_seed(seed)
    model = KroneckerMultiTaskGP(X, torch.as_tensor(Y[keep], dtype=DTYPE), input_transform=input_transform(space))
    # L-BFGS stops after MULTITASK_MAXITER iterations (scipy's default is 15,000 per attempt,
    # times up to 5 attempts): a fit on a handful of universes once took 116-237 s under load,
    # while 4-16 universes converge in 3-6 s on an idle machine. An iteration cap, unlike a
    # wall-clock timeout, keeps the fit deterministic.
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model),
                     optimizer_kwargs={"options": {"maxiter": MULTITASK_MAXITER}})
    model.eval()
    model.categorical = "onehot"
    return model
