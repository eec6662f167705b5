"""The report's surrogate on tables that break a plain GP fit."""
import numpy as np
import pandas as pd
import torch

from multiverse.space import SearchSpace
from multiverse.surrogate import fit_surrogate

SPACE = SearchSpace.from_config({
    "kernel": {"type": "categorical", "choices": ["rbf", "sigmoid"]},
    "C": {"type": "float", "low": 1e-2, "high": 1e3, "log": True},
    "gamma": {"type": "float", "low": 1e-5, "high": 1e1, "log": True},
})
#: 24 universes of an SVM (benchmarks/claims_design.py's svm_kernel grid, random design,
#: seed 3), six of them on the majority-class plateau (val_acc 0.627): under the
#: report's Matern + linear kernel, L-BFGS's eigendecomposition of the kernel matrix
#: failed to converge (torch.linalg.LinAlgError) at every seed tried before fit_gp
#: caught it and let BoTorch retry.
ROWS = [
    ('rbf', 0.2015337685941733, 0.007405684692262435, 0.9490607048594939),
    ('sigmoid', 367.46619407366876, 0.9047357242349293, 0.8840086943021269),
    ('rbf', 18.233480008684403, 0.0002015337685941733, 0.9648501785437043),
    ('sigmoid', 0.01, 0.024620924014946255, 0.8558453656264554),
    ('sigmoid', 0.07405684692262435, 1e-05, 0.6274181027790716),
    ('rbf', 4.061585988376979, 0.08185467307069029, 0.9630802670392796),
    ('sigmoid', 81.8546730706903, 0.0003674661940736688, 0.971883247942866),
    ('rbf', 1.4924955450518291, 3.007882518043096, 0.6274181027790716),
    ('sigmoid', 2.4620924014946253, 6.061898993497572e-05, 0.7152305542617605),
    ('rbf', 135.03140378698723, 0.013503140378698722, 0.9542772861356932),
    ('sigmoid', 11.05295141126021, 0.0022275429519995563, 0.971883247942866),
    ('rbf', 0.12216773489967918, 0.4961947603002898, 0.6274181027790716),
    ('rbf', 0.027213387683753074, 0.0012216773489967918, 0.6274181027790716),
    ('sigmoid', 30.07882518043099, 5.484416576121015, 0.864679397609067),
    ('rbf', 606.1898993497572, 3.3245979322709384e-05, 0.9789163173420278),
    ('sigmoid', 0.5484416576121018, 0.1492495545051829, 0.912156497438286),
    ('sigmoid', 222.75429519995564, 0.00406158598837698, 0.9701133364384411),
    ('rbf', 1.4924955450518291, 0.00406158598837698, 0.9666200900481291),
    ('rbf', 0.01, 0.08185467307069029, 0.6274181027790716),
    ('rbf', 11.05295141126021, 10.0, 0.6274181027790716),
    ('sigmoid', 1000.0, 0.0022275429519995563, 0.9648657040832168),
    ('rbf', 606.1898993497572, 0.024620924014946255, 0.9455208818506444),
    ('rbf', 135.03140378698723, 3.3245979322709384e-05, 0.9701133364384411),
    ('sigmoid', 1000.0, 3.3245979322709384e-05, 0.9771619313771154),
]


def test_an_ill_conditioned_table_is_fitted_after_a_retry():
    df = pd.DataFrame(ROWS, columns=["kernel", "C", "gamma", "val_acc"])
    df.insert(0, "universe", [f"r0u{i:03d}" for i in range(len(df))])
    df.insert(1, "seed", 0)
    df.insert(2, "status", "ok")
    for seed in range(3):
        sur = fit_surrogate(df, SPACE, "val_acc", seed)
        m = sur.median([{"kernel": "rbf", "C": 1.0, "gamma": 1e-2}])
        assert np.isfinite(m).all() and 0 < m[0] < 1


def test_the_dense_linear_kernel_is_gpytorchs_linear_kernel_to_rounding():
    """gp.DenseLinearKernel only returns gpytorch's LinearKernel densely (so that Matern +
    linear is one addition, not add_low_rank's re-derived root): a fitted report GP's
    posterior mean and covariance equal those of the same GP with gpytorch's kernel."""
    import copy

    from gpytorch.kernels import LinearKernel

    from multiverse import gp
    from multiverse.space import SearchSpace

    space = SearchSpace.from_config({"lr": {"type": "float", "low": 1e-4, "high": 1.0, "log": True},
                                     "wd": {"type": "float", "low": 0.0, "high": 0.1},
                                     "opt": {"type": "categorical", "choices": ["sgd", "adam"]}})
    us = space.sobol(40, 3)
    y = [0.5 + 0.1 * np.log10(u["lr"]) + (0.05 if u["opt"] == "adam" else 0.0) + u["wd"] for u in us]
    model = gp.fit_gp(space, us, y, seed=0, kernel="matern+linear")
    assert isinstance(model.covar_module.kernels[1].base_kernel, gp.DenseLinearKernel)
    theirs = copy.deepcopy(model)
    linear = LinearKernel()
    linear.load_state_dict(model.covar_module.kernels[1].base_kernel.state_dict())
    theirs.covar_module.kernels[1].base_kernel = linear
    X = gp.features(space, space.sobol(300, 4), model)
    with torch.no_grad():
        a, b = model.posterior(X).distribution, theirs.posterior(X).distribution
        torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=1e-10)
        torch.testing.assert_close(a.covariance_matrix, b.covariance_matrix, rtol=0, atol=1e-10)
