"""One design round by Ax's standard BoTorch generator with BoTorch's qNIPV, as a
reference to compare our own design code against.

    from ax_qnipv import ax_qnipv_round
    new = ax_qnipv_round(space_config, observed, y, q=4, seed=0)

Route (Ax 1.3.1): a core ``Experiment`` built through ``ax.api.Client`` (flat search
space, one single-arm trial per observed universe, completed with its ``y``), then a
``GenerationStrategy`` of one ``GenerationNode`` holding one ``GeneratorSpec`` of
``Generators.BOTORCH_MODULAR`` (``ModularBoTorchGenerator`` with the default
``SurrogateSpec``, ``botorch_acqf_class=qNegIntegratedPosteriorVariance``), asked for
all ``q`` arms in a single ``GenerationStrategy.gen(n=q)`` call, so BoTorch optimises
one joint q-batch. (``Client.get_next_trials`` would instead make q one-arm trials one
after another, each conditioned on the previous ones as pending points.)

``mc_points``: Ax hands ``botorch_acqf_options`` to BoTorch's registered input
constructor for qNIPV (``construct_inputs_NIPV``), whose ``num_mc_points`` argument
draws that many Sobol points over the search-space digest's bounds, i.e. over Ax's
transformed space (log10 for log-scale dimensions, one-hot columns in [0, 1]) that the
GP takes as input before its own ``Normalize``. The Sobol seed comes from torch's
global RNG, which is seeded here.

Conditional dimensions (``when``) stay in the flat space: an inactive one is attached at
Ax's dummy value (``get_dummy_value_for_parameter``: the (log-)middle of its range) and
is set back to ``None`` in the returned candidates.
"""

from __future__ import annotations

import logging
import math
import warnings

# Ax logs at INFO while it is imported (e.g. the SQL storage line); hold that back.
_disabled = logging.root.manager.disable
logging.disable(logging.INFO)
try:
    from ax.api.client import Client
    from ax.api.configs import ChoiceParameterConfig, RangeParameterConfig
    from ax.adapter.registry import Generators
    from ax.core.parameter import get_dummy_value_for_parameter
    from ax.generation_strategy.generation_node import GenerationNode
    from ax.generation_strategy.generation_strategy import GenerationStrategy
    from ax.generation_strategy.generator_spec import GeneratorSpec
    from ax.generators.torch.botorch_modular.surrogate import ModelConfig, SurrogateSpec
    from ax.utils.common.random import with_rng_seed
    from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance
finally:
    logging.disable(_disabled)

OUTCOME = "y"


def _quiet_ax() -> None:
    """Ax loggers (each set to INFO by Ax's get_logger) and the handler on "ax" to WARNING."""
    root = logging.getLogger("ax")
    root.setLevel(logging.WARNING)
    for handler in root.handlers:
        handler.setLevel(logging.WARNING)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("ax."):
            logging.getLogger(name).setLevel(logging.WARNING)


def _parameter_configs(space_config: dict) -> list:
    out = []
    for name, spec in space_config.items():
        kind = spec["type"]
        if kind == "categorical":
            out.append(ChoiceParameterConfig(name=name, values=list(spec["choices"]),
                                             parameter_type="str", is_ordered=False))
        elif kind in ("float", "int"):
            bounds = (float(spec["low"]), float(spec["high"])) if kind == "float" \
                else (int(spec["low"]), int(spec["high"]))
            out.append(RangeParameterConfig(name=name, parameter_type=kind, bounds=bounds,
                                            scaling="log" if spec.get("log") else "linear"))
        else:
            raise ValueError(f"space.{name}: unknown type {kind!r}")
    return out


def _active(spec: dict, universe: dict) -> bool:
    when = spec.get("when")
    return not when or all(universe.get(parent) in levels for parent, levels in when.items())


def _generation_strategy(num_restarts: int, raw_samples: int, mc_points: int) -> GenerationStrategy:
    spec = GeneratorSpec(
        generator_enum=Generators.BOTORCH_MODULAR,
        generator_kwargs={
            "surrogate_spec": SurrogateSpec(model_configs=[ModelConfig(name="MBM defaults")]),
            "botorch_acqf_class": qNegIntegratedPosteriorVariance,
            "botorch_acqf_options": {"num_mc_points": int(mc_points)},
        },
        generator_gen_kwargs={"model_gen_options": {
            "optimizer_kwargs": {"num_restarts": int(num_restarts), "raw_samples": int(raw_samples)},
        }},
    )
    # fallback_specs={}: never fall back to Sobol silently; an error is an error here.
    node = GenerationNode(name="BoTorch+qNIPV", generator_specs=[spec], fallback_specs={})
    return GenerationStrategy(nodes=[node], name="BoTorch+qNIPV")


def ax_qnipv_round(space_config: dict, observed: list[dict], y: list[float], q: int, seed: int,
                   num_restarts: int = 8, raw_samples: int = 256, mc_points: int = 128) -> list[dict]:
    """q new universes chosen by Ax's BoTorch generator with qNIPV, fitted to `observed` (parameter dicts)
    and their outcome `y` (one float per universe; NaN ones are left out)."""
    if len(observed) != len(y):
        raise ValueError(f"{len(observed)} universes but {len(y)} outcomes")
    _quiet_ax()
    with with_rng_seed(seed), warnings.catch_warnings():  # seeds random, numpy, torch (restored on exit)
        # pandas/Ax deprecation chatter from inside Ax; BoTorch's optimiser warnings stay.
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*(deprecated|inplace keyword).*")
        client = Client(random_seed=seed)
        client.configure_experiment(parameters=_parameter_configs(space_config), name="ax_qnipv")
        client.configure_optimization(objective=OUTCOME)  # qNIPV ignores the direction
        _quiet_ax()  # loggers created by the calls above
        experiment = client._experiment
        params = experiment.search_space.parameters
        dummy = {name: get_dummy_value_for_parameter(params[name]) for name in space_config}
        n_used = 0
        for universe, value in zip(observed, y):
            if value is None or math.isnan(float(value)):
                continue
            flat = {}
            for name, spec in space_config.items():
                v = universe.get(name)
                if v is None or not _active(spec, universe):
                    v = dummy[name]
                elif spec["type"] == "int":
                    v = int(v)
                elif spec["type"] == "float":
                    v = float(v)
                flat[name] = v
            index = client.attach_trial(parameters=flat)
            client.complete_trial(trial_index=index, raw_data={OUTCOME: float(value)})
            n_used += 1
        if n_used == 0:
            raise ValueError("no observed universe with a finite outcome")
        gs = _generation_strategy(num_restarts, raw_samples, mc_points)
        client.set_generation_strategy(gs)
        ((gr,),) = gs.gen(experiment=experiment, n=q)
    out = []
    for arm in gr.arms:
        u = {}
        for name, spec in space_config.items():
            v = arm.parameters[name]
            if spec["type"] == "int":
                v = int(round(float(v)))
            elif spec["type"] == "float":
                v = float(v)
            u[name] = v
        for name, spec in space_config.items():
            if not _active(spec, u):
                u[name] = None
        out.append(u)
    return out
