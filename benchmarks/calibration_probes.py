"""Two surrogate options probed on the calibration benchmark's digits and SVM draws
(``benchmarks/calibration.py``), kept so that the README's "what was tried" rows can be
rerun; neither became a default.

    .venv/bin/python benchmarks/calibration_probes.py bagging [--draws 3] [--bags 8]
    .venv/bin/python benchmarks/calibration_probes.py loo-scale [--draws 4]
    .venv/bin/python benchmarks/calibration_probes.py latents [--draws 12]
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
    from multiverse.claims import correlation as CO
    from multiverse.gp import HYPER_DRAWS, HYPER_STEPS, fit_multitask_gp

    grid, claim, truth = correlation_claim()
    variants = {"2 latents (report)": {}, "3 latents": {"n_latent": 3},
                "2 latents, 3x chain": {"n_steps": 3 * HYPER_STEPS, "n_draws": HYPER_DRAWS}}
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
    import copy

    from botorch.optim.fit import fit_gpytorch_mll_scipy
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from multiverse.claims import correlation as CO
    from multiverse.gp import HYPER_STEPS, HyperparameterMixture, fit_multitask_gp, sample_hyperparameters

    grid, claim, truth = correlation_claim()
    rows = []
    for d in correlation_draws(grid, claim, draws):
        s, ctx, base, warps, Y = d.s, d.ctx, d.base, d.warps, d.Y
        joint = CO.JointSurrogate(fit_multitask_gp(ctx.space, ctx.universes, Y, s), ctx.space, warps)
        a = CO.gp_answer(joint, ctx.space, claim, base, ctx.samples, s, n_granulated=0)
        t0 = time.perf_counter()
        fitted = joint.model.fitted
        theta0 = fitted.hyperparameters()
        m = fitted.num_outputs
        rng = np.random.default_rng(s)
        per = 16 // n_starts
        members = []
        for k in range(n_starts):
            model = copy.deepcopy(fitted)
            if k:
                theta = theta0.copy()
                theta[: len(theta) - 2 * m] += rng.standard_normal(len(theta) - 2 * m)
                model.set_hyperparameters(theta)
                model.train()
                try:
                    fit_gpytorch_mll_scipy(ExactMarginalLogLikelihood(model.likelihood, model), options={"maxiter": 500})
                except Exception:  # noqa: BLE001
                    pass
                model.eval()
            for th in sample_hyperparameters(model, per, HYPER_STEPS, s + k):
                mem = copy.deepcopy(model)
                mem.set_hyperparameters(th)
                members.append(mem)
        multi = CO.JointSurrogate(HyperparameterMixture(members, fitted), ctx.space, warps)
        b = CO.gp_answer(multi, ctx.space, claim, base, ctx.samples, s, n_granulated=0)
        rows.append((a["effect"], a["effect_lo"], a["effect_hi"], b["effect"], b["effect_lo"], b["effect_hi"],
                     time.perf_counter() - t0))
        print(f"  draw {s}: one chain {a['effect']:+.3f} [{a['effect_lo']:+.3f}, {a['effect_hi']:+.3f}]; "
              f"{n_starts} starts {b['effect']:+.3f} [{b['effect_lo']:+.3f}, {b['effect_hi']:+.3f}]", flush=True)
    r = np.array(rows)
    print("\n| hyperparameter chains | coverage | mean estimate | sd of estimates | mean interval sd |\n|---|---|---|---|---|")
    for name, e, lo, hi in (("one, from the MAP (report's)", 0, 1, 2), (f"{n_starts}, from {n_starts} MAP fits", 3, 4, 5)):
        cov = int(((r[:, lo] <= truth) & (truth <= r[:, hi])).sum())
        print(f"| {name} | {cov}/{len(r)} | {r[:, e].mean():+.3f} | {r[:, e].std(ddof=1):.3f} "
              f"| {((r[:, hi] - r[:, lo]) / 3.92).mean():.3f} |")
    print(f"\nextra seconds per claim: {r[:, 6].mean():.1f}")


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


def main(argv) -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probe", choices=["bagging", "loo-scale", "latents", "jackknife", "starts"])
    ap.add_argument("--draws", type=int, default=None)
    ap.add_argument("--bags", type=int, default=8)
    ap.add_argument("--fixed", action="store_true", help="jackknife: hold the hyperparameters")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.probe == "bagging":
        bagging(args.draws or 3, args.bags)
    elif args.probe == "latents":
        latents(args.draws or 12)
    elif args.probe == "starts":
        starts(args.draws or 12, args.bags if args.bags != 8 else 4)
    elif args.probe == "jackknife":
        jackknife(args.draws or 12, args.bags, args.fixed)
    else:
        loo_scale(args.draws or 4)


if __name__ == "__main__":
    main(sys.argv[1:])
