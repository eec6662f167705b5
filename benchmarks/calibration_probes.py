"""Surrogate options probed on the calibration benchmark's digits and SVM draws
(``benchmarks/calibration.py``), kept so that the README's "what was tried" rows can be
rerun; none became a default.

    .venv/bin/python benchmarks/calibration_probes.py bagging [--draws 3] [--bags 8]
    .venv/bin/python benchmarks/calibration_probes.py loo-scale [--draws 4]
    .venv/bin/python benchmarks/calibration_probes.py latents [--draws 12]
    .venv/bin/python benchmarks/calibration_probes.py nuts [--draws 12] [--steps 1000]
    .venv/bin/python benchmarks/calibration_probes.py nuts-single [--draws 12] [--grids svm digits]
    .venv/bin/python benchmarks/calibration_probes.py share-plugin [--draws 12] [--grids svm digits]
    .venv/bin/python benchmarks/calibration_probes.py jackknife [--draws 12] [--bags 8] [--fixed]
    .venv/bin/python benchmarks/calibration_probes.py starts [--draws 12] [--bags 4]

``bagging``: the correlation claim (train loss against val_acc on the digits grid) from
the report's two-outcome model, and from a bagged posterior (BayesBag, Huggins & Miller
2023: the model refitted on ``--bags`` bootstrap resamples of the universes, at each
fit's MAP, the samples pooled), which widens a posterior that is too sure under
misspecification. Prints each draw's estimate and 95% interval and the coverage of the
grid's true tau.

``latents``: the correlation claim from the two-outcome model with 2 latent GPs (the
report's), 3 latent GPs, and 2 with a three times longer hyperparameter chain.

``nuts``: the two-outcome model's hyperparameters drawn by NumPyro's NUTS on the same
density instead of adaptive Metropolis. ``nuts-single``: every single-output surrogate
(comparisons, trends, expected best) replaced by BoTorch's ``FullyBayesianSingleTaskGP``
fitted by NUTS; its draws go to ``--out``/draws.csv and are summarised as the benchmark
does. Both need JAX and NumPyro, which the project does not install:
``.venv/bin/pip install "botorch[fully_bayesian]==0.18.1"``.

``share-plugin``: the share where a comparison or trend holds, read two ways on the same
draws: the posterior mean of each sample's share (the report's until the calibration
issue) and the share of points where the claim more likely than not holds (the report's
now, :func:`multiverse.claims.common.with_fraction`).

``jackknife``: the correlation's posterior samples widened by a delete-d jackknife
estimate of the design's variance (the model refitted at its MAP on ``--bags`` random
subsets holding 80% of the universes, no duplicates; variance ``(n - d) / (d B)`` times
the sum of squared deviations of the subsets' tau estimates; each sample plus a normal
draw of that variance). With ``--fixed`` the subsets are not refitted: the report's model,
each of its hyperparameter draws held as it is, is conditioned on each subset, so that only
the data move.

``starts``: the correlation from hyperparameter chains started at ``--bags`` MAP fits (the
report's, and others whose L-BFGS started from its values with every log lengthscale and
loading moved by a standard normal draw), 16 draws pooled equally over the chains.

``loo-scale``: the mean squared standardised leave-one-out residual of each report
surrogate (BoTorch's ``loo_cv``; 1 for a calibrated GP). Rescaling the GP's variance by
it (Bachoc 2013's cross-validation estimate of the variance) scales every posterior
standard deviation by its square root.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import calibration as CB  # noqa: E402


def correlation_claim():
    """The digits grid, its correlation claim and the claim's true tau (printed)."""
    grid = CB.GRIDS["digits"]()
    claim = next(c for c in grid.claims if c.get("type") == "correlation")
    truth = CB.truth(grid, claim)["truth"]
    print(f"digits, {claim['name']}: true tau {truth:+.3f}")
    return grid, claim, truth


def correlation_draws(grid, claim, draws: int):
    """Per draw ``s``: the report's context, the claim's reference set (as
    :func:`multiverse.claims.correlation.analyse` reads it), its two metrics, their normal
    scores (``warps``) and the two-outcome model's data ``Y`` on them."""
    from types import SimpleNamespace

    from multiverse import report as R
    from multiverse.claims import correlation as CO
    from multiverse.gp import RankWarp
    from multiverse.ids import derive_seed

    for s in range(draws):
        df, _ = CB.draw_table(grid, s)
        ctx = R.context(df, CB.study_config(grid, s))
        x, y = ctx.values(claim["x"]), ctx.values(claim["y"])
        base, _ = ctx.converging(CO.metrics(claim), ctx.space.sobol(ctx.reference, derive_seed(ctx.seed, 1)))
        warps = [RankWarp(x), RankWarp(y)]
        yield SimpleNamespace(s=s, ctx=ctx, base=base, x=x, y=y, warps=warps,
                              Y=np.c_[warps[0].forward(x), warps[1].forward(y)])


def bagging(draws: int, bags: int) -> None:
    from multiverse.claims import correlation as CO
    from multiverse.gp import HyperparameterMixture, fit_multitask_gp

    grid, claim, truth = correlation_claim()
    print("| draw | report's model [95% CrI] | bagged [95% CrI] | seconds (report's, bagged) |\n|---|---|---|---|")
    cover = np.zeros((draws, 2), dtype=bool)
    for d in correlation_draws(grid, claim, draws):
        s, ctx, base, x, y = d.s, d.ctx, d.base, d.x, d.y
        t0 = time.perf_counter()
        joint = CO.fit_joint(ctx.space, ctx.universes, x, y, s, d.warps)
        a = CO.gp_answer(joint, ctx.space, claim, base, ctx.samples, s, n_granulated=0)
        t1 = time.perf_counter()
        rng = np.random.default_rng(s)
        rows = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
        members = []
        for b in range(bags):
            i = rng.choice(rows, len(rows))
            Y = np.c_[joint.warps[0].forward(x[i]), joint.warps[1].forward(y[i])]
            members += fit_multitask_gp(ctx.space, [ctx.universes[k] for k in i], Y, b, n_draws=0).members
        bag = CO.JointSurrogate(HyperparameterMixture(members, members[0]), ctx.space, joint.warps)
        b_ = CO.gp_answer(bag, ctx.space, claim, base, ctx.samples, s, n_granulated=0)
        t2 = time.perf_counter()
        cover[s] = [a["effect_lo"] <= truth <= a["effect_hi"], b_["effect_lo"] <= truth <= b_["effect_hi"]]
        print(f"| {s} | {a['effect']:+.3f} [{a['effect_lo']:+.3f}, {a['effect_hi']:+.3f}] | "
              f"{b_['effect']:+.3f} [{b_['effect_lo']:+.3f}, {b_['effect_hi']:+.3f}] | {t1 - t0:.0f}, {t2 - t1:.0f} |",
              flush=True)
    print(f"\ncoverage: report's model {cover[:, 0].sum()}/{draws}, bagged {cover[:, 1].sum()}/{draws}")


def latents(draws: int) -> None:
    from multiverse.gp import HYPER_DRAWS, HYPER_STEPS

    compare_models(draws, {"2 latents (report)": {}, "3 latents": {"n_latent": 3},
                           "2 latents, 3x chain": {"n_steps": 3 * HYPER_STEPS, "n_draws": HYPER_DRAWS}})


def sample_hyperparameters_nuts(model, n_draws: int, n_steps: int, seed: int) -> np.ndarray:
    """As :func:`multiverse.gp.sample_hyperparameters`, by NumPyro's NUTS (the sampler BoTorch's fully
    Bayesian models use) on the same density (:func:`multiverse.gp.lmc_log_posterior` in JAX, float64),
    started at the fitted values: ``n_steps // 2`` warm-up steps (step size and a dense
    mass matrix adapted), then ``n_steps // 2`` draws, ``n_draws`` of them evenly spaced."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    from multiverse.gp import lmc_log_posterior

    jax.config.update("jax_enable_x64", True)
    X = jnp.asarray(model.train_inputs[0].detach().numpy())
    Y = jnp.asarray(model.train_targets.detach().numpy())
    q = len(model.covar_module.covar_module_list)

    def potential(theta):
        return -lmc_log_posterior(theta, X, Y, q, xp=jnp)

    half = max(1, n_steps // 2)
    mcmc = MCMC(NUTS(potential_fn=potential, dense_mass=True, max_tree_depth=6),
                num_warmup=half, num_samples=half, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), init_params=jnp.asarray(model.hyperparameters()))
    chain = np.asarray(mcmc.get_samples())
    return chain[np.linspace(0, len(chain) - 1, n_draws).astype(int)]


def nuts(draws: int, steps: int) -> None:
    compare_models(draws, {"adaptive Metropolis (report)": {},
                           f"NUTS, {steps // 2} warm-up + {steps // 2} steps":
                           {"sampler": sample_hyperparameters_nuts, "n_steps": steps}})


def compare_models(draws: int, variants: dict) -> None:
    """The correlation claim from the two-outcome model fitted with each variant's
    keyword arguments to :func:`multiverse.gp.fit_multitask_gp`."""
    from multiverse.claims import correlation as CO
    from multiverse.gp import fit_multitask_gp

    grid, claim, truth = correlation_claim()
    rows = {v: [] for v in variants}
    for d in correlation_draws(grid, claim, draws):
        s, ctx, base, warps, Y = d.s, d.ctx, d.base, d.warps, d.Y
        for name, kw in variants.items():
            t0 = time.perf_counter()
            joint = CO.JointSurrogate(fit_multitask_gp(ctx.space, ctx.universes, Y, s, **kw), ctx.space, warps)
            a = CO.gp_answer(joint, ctx.space, claim, base, ctx.samples, s, n_granulated=0)
            rows[name].append((a["effect"], a["effect_lo"], a["effect_hi"], time.perf_counter() - t0))
        print(f"  draw {s}: " + "; ".join(f"{n} {r[-1][0]:+.3f} [{r[-1][1]:+.3f}, {r[-1][2]:+.3f}]"
                                         for n, r in rows.items()), flush=True)
    print("\n| model | coverage | mean estimate | sd of estimates | mean interval sd | seconds per fit |\n|---|---|---|---|---|---|")
    for name, r in rows.items():
        a = np.array(r)
        cov = int(((a[:, 1] <= truth) & (truth <= a[:, 2])).sum())
        print(f"| {name} | {cov}/{len(a)} | {a[:, 0].mean():+.3f} | {a[:, 0].std(ddof=1):.3f} "
              f"| {((a[:, 2] - a[:, 1]) / 3.92).mean():.3f} | {a[:, 3].mean():.1f} |")


def conditioned_on(joint, space, universes, Y):
    """The two-outcome model ``joint`` (a :class:`multiverse.gp.HyperparameterMixture`),
    each member's hyperparameters held, on the data ``universes``, ``Y`` instead."""
    import torch
    from botorch.models.transforms.outcome import Standardize

    from multiverse.gp import DTYPE, HyperparameterMixture, LMCMultiTaskGP, input_transform

    X = torch.as_tensor(space.encode(universes), dtype=DTYPE)
    members = []
    for member in joint.model.members:
        m = LMCMultiTaskGP(X, torch.as_tensor(Y, dtype=DTYPE), n_latent=len(member.covar_module.covar_module_list),
                           input_transform=input_transform(space), outcome_transform=Standardize(m=Y.shape[1]))
        m.set_hyperparameters(member.hyperparameters())
        m.eval()
        m.categorical = "onehot"
        members.append(m)
    return type(joint)(HyperparameterMixture(members, members[0]), joint.space, joint.warps)


def jackknife(draws: int, bags: int, fixed: bool = False) -> None:
    from multiverse import stats
    from multiverse.claims import correlation as CO
    from multiverse.gp import fit_multitask_gp

    grid, claim, truth = correlation_claim()
    rows = []
    for d in correlation_draws(grid, claim, draws):
        s, ctx, base, warps, Y = d.s, d.ctx, d.base, d.warps, d.Y
        t0 = time.perf_counter()
        joint = CO.JointSurrogate(fit_multitask_gp(ctx.space, ctx.universes, Y, s), ctx.space, warps)
        f = joint.sample(base, ctx.samples, s)
        tau = stats.kendall_tau(f[..., 0], f[..., 1])
        t1 = time.perf_counter()
        rng = np.random.default_rng(s)
        rows_ok = np.flatnonzero(np.isfinite(Y).all(1))
        n = len(rows_ok)
        d = max(1, n // 5)
        est = []
        for b in range(bags):
            keep = np.sort(rng.choice(rows_ok, n - d, replace=False))
            sub = [ctx.universes[k] for k in keep]
            if fixed:
                g = conditioned_on(joint, ctx.space, sub, Y[keep]).sample(base, 64, s)
            else:
                m = fit_multitask_gp(ctx.space, sub, Y[keep], b, n_draws=0)
                g = CO.JointSurrogate(m, ctx.space, warps).sample(base, 64, s)
            est.append(float(np.mean(stats.kendall_tau(g[..., 0], g[..., 1]))))
        var = (n - d) / (d * bags) * float(np.sum((np.array(est) - np.mean(est)) ** 2))
        wide = tau + rng.normal(0, np.sqrt(var), tau.shape)
        lo, hi = np.quantile(tau, [0.025, 0.975])
        wlo, whi = np.quantile(wide, [0.025, 0.975])
        rows.append((float(np.mean(tau)), lo, hi, wlo, whi, time.perf_counter() - t1, t1 - t0))
        print(f"  draw {s}: posterior {rows[-1][0]:+.3f} [{lo:+.3f}, {hi:+.3f}]; widened [{wlo:+.3f}, {whi:+.3f}] "
              f"(jackknife sd {np.sqrt(var):.3f})", flush=True)
    a = np.array(rows)
    print("\n| interval | coverage | mean interval sd | sd of estimates | seconds |\n|---|---|---|---|---|")
    for name, lo, hi, sec in (("posterior (report's)", 1, 2, 6), ("widened by the jackknife", 3, 4, 5)):
        cov = int(((a[:, lo] <= truth) & (truth <= a[:, hi])).sum())
        print(f"| {name} | {cov}/{len(a)} | {((a[:, hi] - a[:, lo]) / 3.92).mean():.3f} | {a[:, 0].std(ddof=1):.3f} "
              f"| {a[:, sec].mean():.1f} |")


def starts(draws: int, n_starts: int) -> None:
    compare_models(draws, {"one chain, from the MAP (report)": {},
                           f"{n_starts} chains, from {n_starts} MAP fits": {"starts": n_starts}})


def loo_scale(draws: int) -> None:
    import torch
    from botorch.cross_validation import loo_cv

    from multiverse import report as R

    print("| grid | draw | metric | mean z^2 | sd scale sqrt(mean z^2) |\n|---|---|---|---|---|")
    for g in ("svm", "digits"):
        grid = CB.GRIDS[g]()
        for s in range(draws):
            df, _ = CB.draw_table(grid, s)
            ctx = R.context(df, CB.study_config(grid, s))
            for m, sur in ctx.surrogates.items():
                if sur is None:
                    continue
                with torch.no_grad():
                    cv = loo_cv(sur.model, observation_noise=True)
                z = (cv.observed_Y - cv.posterior.mean) / cv.posterior.variance.sqrt()
                z2 = float((z**2).mean())
                print(f"| {g} | {s} | {m} | {z2:.2f} | {np.sqrt(z2):.2f} |", flush=True)


class FullyBayesianPosterior:
    """A BoTorch fully Bayesian posterior (one Gaussian per MCMC draw, on the batch
    dimension ``MCMC_DIM``) read as the report reads a posterior: ``rsample`` takes each
    sample from the draws in turn, ``mean`` and ``variance`` are the mixture's moments."""

    def __init__(self, post):
        self.post = post

    def rsample(self, sample_shape=None):
        import torch
        from botorch.posteriors.fully_bayesian import MCMC_DIM

        n = int(np.prod(sample_shape)) if sample_shape is not None else 1
        k = self.post.mean.shape[MCMC_DIM]
        f = self.post.rsample(torch.Size([-(-n // k)]))  # ceil(n / k) x batch x k x q x m
        f = f.movedim(MCMC_DIM, 1)
        return f.reshape(-1, *f.shape[2:])[:n].reshape(*(sample_shape or [1]), *f.shape[2:])

    @property
    def mean(self):
        return self.post.mixture_mean

    @property
    def variance(self):
        return self.post.mixture_variance


class FullyBayesianModel:
    """BoTorch's ``FullyBayesianSingleTaskGP`` (Matern-5/2, the dimension-scaled
    lengthscale prior, hyperparameters sampled by NumPyro's NUTS), wrapped so that the
    report's surrogate code reads it as one model."""

    categorical = "onehot"

    def __init__(self, fb):
        self.fb, self.likelihood, self.outcome_transform = fb, fb.likelihood, fb.outcome_transform
        self.covar_module = fb.covar_module

    def posterior(self, X, observation_noise: bool = False):
        return FullyBayesianPosterior(self.fb.posterior(X, observation_noise=observation_noise))


def fit_fully_bayesian(space, universes, y, seed, yvar=None, warping=False, **_):
    """:func:`multiverse.gp.fit_gp`'s signature, fitting :class:`FullyBayesianModel`."""
    import torch
    from botorch.fit import fit_fully_bayesian_model_nuts
    from botorch.models.fully_bayesian import FullyBayesianSingleTaskGP
    from botorch.models.transforms.outcome import Standardize

    from multiverse.gp import DTYPE, input_transform

    y = np.asarray(y, dtype=float)
    keep = np.isfinite(y)
    X = torch.as_tensor(space.encode([u for u, k in zip(universes, keep) if k]), dtype=DTYPE)
    Y = torch.as_tensor(y[keep], dtype=DTYPE).unsqueeze(-1)
    Yvar = None if yvar is None else torch.as_tensor(np.asarray(yvar, dtype=float)[keep], dtype=DTYPE).unsqueeze(-1)
    fb = FullyBayesianSingleTaskGP(X, Y, train_Yvar=Yvar, input_transform=input_transform(space, warping=False),
                                   outcome_transform=Standardize(m=1), use_input_warping=warping)
    fit_fully_bayesian_model_nuts(fb, seed=seed, disable_progbar=True, **NUTS_SETTINGS)
    return FullyBayesianModel(fb)


#: NUTS settings of the single-output probe (BoTorch's defaults are 512, 256, 16).
NUTS_SETTINGS = {"warmup_steps": 256, "num_samples": 256, "thinning": 16}


def nuts_single(grids, draws: int, out: str) -> None:
    """The calibration benchmark's draws with every single-output surrogate fully Bayesian
    (:func:`fit_fully_bayesian`), its rows written to ``out``/draws.csv and summarised.
    The LOO diagnostics (which only annotate a claim's summary) are skipped."""
    import pandas as pd

    from multiverse import report as R
    from multiverse import surrogate as S

    S.fit_gp = fit_fully_bayesian
    R.loo_diagnostics = lambda model, warp=None: None
    rows = []
    for name in grids:
        grid = CB.GRIDS[name]()
        for s in range(draws):
            t0 = time.perf_counter()
            rows += [{"grid": name, **r} for r in CB.run_draw(grid, s)]
            print(f"  {name} draw {s}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    Path(out).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(Path(out) / "draws.csv", index=False)
    print(CB.summary(rows).to_markdown(index=False))


def share_plugin(grids, draws: int) -> None:
    """The share of the multiverse where a comparison or trend holds, estimated two ways
    on the same draws: the posterior mean, over samples, of the share of reference points
    where the sampled local effect satisfies the claim (the report's until the
    calibration issue), and the share of reference points where the claim holds with
    posterior probability above one half (the report's now). Prints the median absolute
    error of each against the grid's truth."""
    import pandas as pd

    from multiverse import stats
    from multiverse.claims import common

    original = common.with_fraction

    def with_both(summary, local, claim):
        out = original(summary, local, claim)
        per_sample = stats.holds_mask(local, common.relation(claim), common.margin(claim)).mean(1)
        return {**out, "fraction_per_sample": float(per_sample.mean())}

    common.with_fraction = with_both
    score = CB.score

    def score_both(grid, result, labels_truth=None, cells=None):
        out = score(grid, result, labels_truth, cells)
        gp = result["gp"]
        if np.isfinite(out.get("share_error", np.nan)):
            out["share_error_per_sample"] = gp["fraction_per_sample"] - (gp["fraction_holds"] - out["share_error"])
        return out

    CB.score = score_both
    rows = []
    for name in grids:
        grid = CB.GRIDS[name]()
        for s in range(draws):
            rows += [{"grid": name, **r} for r in CB.run_draw(grid, s) if "share_error_per_sample" in r]
            print(f"  {name} draw {s}", file=sys.stderr, flush=True)
    d = pd.DataFrame(rows)
    print("| grid | claim | per-sample share: median abs error (mean error) | more likely than not (the report's): "
          "median abs error (mean error) |\n|---|---|---|---|")
    for (g, c), x in d.groupby(["grid", "claim"], sort=False):
        a, b = x["share_error_per_sample"], x["share_error"]
        print(f"| {g} | {c} | {a.abs().median():.3f} ({a.mean():+.3f}) | {b.abs().median():.3f} ({b.mean():+.3f}) |")


def main(argv) -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probe", choices=["bagging", "loo-scale", "latents", "nuts", "nuts-single", "jackknife", "starts",
                                       "share-plugin"])
    ap.add_argument("--grids", nargs="+", default=["svm", "digits"])
    ap.add_argument("--out", default=str(CB.CACHE_DIR / "nuts"))
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--bags", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1000, help="nuts: warm-up plus sampling steps")
    ap.add_argument("--fixed", action="store_true", help="jackknife: hold the hyperparameters")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.probe == "bagging":
        bagging(args.draws or 3, args.bags)
    elif args.probe == "latents":
        latents(args.draws or 12)
    elif args.probe == "nuts":
        nuts(args.draws or 12, args.steps)
    elif args.probe == "share-plugin":
        share_plugin(args.grids, args.draws or 12)
    elif args.probe == "nuts-single":
        nuts_single(args.grids, args.draws or 12, args.out)
    elif args.probe == "starts":
        starts(args.draws or 12, args.bags if args.bags != 8 else 4)
    elif args.probe == "jackknife":
        jackknife(args.draws or 12, args.bags, args.fixed)
    else:
        loo_scale(args.draws or 4)


if __name__ == "__main__":
    main(sys.argv[1:])
