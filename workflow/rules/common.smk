import os
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

# The workflow's library is the installed package `multiverse` (pip install
# multiverse-analysis, or pip install -e . in a clone). Nothing is looked up beside these
# rules: a remote module (snakefile: github(...)) has only workflow/ in Snakemake's
# source cache. The step scripts and conda env files come from the same installed package
# (multiverse.resources()), so the rules and the library they call are one version.
try:
    import multiverse
except ImportError as err:
    raise WorkflowError(
        "the multiverse workflow needs its Python package in the environment that runs snakemake: "
        "pip install multiverse-analysis (in a clone of the repository: pip install -r requirements.txt -e .)"
    ) from err
from multiverse.spec import (  # noqa: E402
    check_config,
    compose,
    continuation_settings,
    data_file,
    derive_rounds,
    gpus_per_job,
    load_config,
    low_fidelity,
    multiverse_hash,
    n_shards,
    reads_outcomes,
    report_metrics,
    round_settings,
    round_sizes,
    shards_per_submission,
    study_metrics,
    train_job_size,
    trainer,
)

# A --configfile holding a whole study (a `study` key) stands alone; one without is
# merged key by key into the files before it (multiverse.spec.compose). Snakemake
# itself merges every file key by key; in module form the user's Snakefile owns the config.
if not workflow.modifier.skip_configfile:
    _cli = [str(p) for p in workflow.overwrite_configfiles]
    _files = [p for p in map(str, workflow.configfiles) if p not in _cli] + _cli
    _composed = compose([load_config(p) or {} for p in _files], dict(workflow.config_settings.config))
    config.clear()
    config.update(_composed)

validate(config, "../schemas/config.schema.yaml")
derive_rounds(config)  # design.budget -> initial, rounds, batch (keys the config gives win)
# with --sdm conda the jobs run in the rules' envs (envs/export.yaml has the tracker's library)
check_config(config, conda=DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method)

OUT = f"results/{config['study']}"
TRAINER = trainer(config)
BUILTIN = TRAINER == "builtin"
DATA = f"{OUT}/{data_file(config)}" if data_file(config) else None
METRICS = study_metrics(config)
ROUNDS = range(len(round_sizes(config)))
SLOTS = range(config["training"]["shard_size"])
SEEDS = range(config["training"]["seeds"])
RESOURCES = config["resources"]
GPUS = gpus_per_job(config)
# a train job: training.per_device universes at once, each with training.threads and mem_mb
TRAIN_JOB = train_job_size(config)
# design.fidelity (multiverse.fidelity): every universe trains at a low fidelity into its
# low/ folder (rule train), and a random subset is continued (rules/fidelity.smk)
FIDELITY = bool(config["design"].get("fidelity"))
LOW = "low/" if FIDELITY else ""

# On a cluster, a round's shards (each a train job and its metrics job) travel in
# submissions of as many shards as fit the declared node side by side (`cluster:`,
# multiverse.spec.layout.shards_per_submission), one submission per shard without a node.
# Snakemake makes one submission of a group's jobs when they are connected: rule
# `submission` joins the shards of one submission (its marker depends on their metrics).
# Groups take effect only with a cluster executor; a local run ignores them.
PER_SUBMISSION = shards_per_submission(config)
CLUSTER = bool(config.get("cluster"))


def submission_group(wildcards):
    """The group (one cluster submission) of a train, metrics or submission job; without
    a declared node PER_SUBMISSION is 1, so each shard is its own."""
    part = wildcards.part if "part" in wildcards.keys() else int(wildcards.shard) // PER_SUBMISSION
    return f"round{wildcards.round}-seed{wildcards.replicate}-part{part}"


def continued_group(wildcards):
    """design.fidelity: the group of a continued shard's jobs, a submission apart from its
    low-fidelity one (the round's continuation draw stands between them)."""
    return "continued-" + submission_group(wildcards)


def submission_markers(rounds):
    """The markers of every submission of `rounds` (none without a declared node)."""
    if not CLUSTER:
        return []
    return [
        f"{OUT}/universes/r{r}/seed{j}_part{p}{stage}.done"
        for r in rounds
        for j in SEEDS
        for p in range(-(-n_shards(config, r) // PER_SUBMISSION))
        for stage in ([".low", ""] if FIDELITY else [""])
    ]


def step(name):
    """The step script `name` of the installed package (scripts/`name` in a clone): rule
    train runs step("train.py"), i.e. scripts/train.py, which calls multiverse.train."""
    return str(multiverse.resources() / "scripts" / name)


def env_file(name):
    """The pinned conda env `name` (envs/`name`) of the installed package; every env
    installs the package itself at the same version (tests/test_envs.py)."""
    return str(multiverse.resources() / "envs" / name)


def torch_env():
    """The train and metrics rules' conda env: a CUDA build of torch for device cuda."""
    if config["training"]["device"] == "cuda":
        return env_file("torch-cuda.yaml")
    return env_file("torch.yaml")


wildcard_constraints:
    round=r"\d+",
    shard=r"\d+",
    slot=r"\d+",
    replicate=r"\d+",
    part=r"\d+",


def user_env(config):
    """The conda env file of a user's training (training.conda) as an absolute path, so
    that it resolves against the user's folder, not this file's; None without one."""
    env = config["training"].get("conda")
    return str(Path(env).resolve()) if env else None


def universe_files(name, rounds, seeds=SEEDS):
    """`name` (e.g. metrics.json) of every universe of `rounds`, under each of `seeds`."""
    return [
        f"{OUT}/universes/r{r}/s{s}/u{k}/seed{j}/{name}"
        for r in rounds
        for s in range(n_shards(config, r))
        for k in SLOTS
        for j in seeds
    ]


def shard_files(name):
    """`name` of every universe of the shard {round}/{shard} under seed {replicate} (wildcards kept)."""
    return expand(
        f"{OUT}/universes/r{{{{round}}}}/s{{{{shard}}}}/u{{slot}}/seed{{{{replicate}}}}/{name}",
        slot=SLOTS,
    )


def space_only(wildcards):
    """Whether round r's strategy chooses from the space alone (one that reads no outcomes
    in multiverse.spec.strategies; round 0 of a GP strategy is a Sobol round)."""
    return not reads_outcomes(config["design"], int(wildcards.round))


def design_inputs(wildcards):
    """What round r's design reads. A GP round: every result of the rounds before it, the
    first `design.replicates` seeds of each universe (so adding seeds to a finished study
    redoes no design). A Sobol, random or grid round: the earlier rounds' design files
    only, so it need not wait for their training."""
    rounds = range(int(wildcards.round))
    if space_only(wildcards):
        return [f"{OUT}/design/round_{r}.json" for r in rounds]
    seeds = range(config["design"]["replicates"])
    return universe_files("metrics.json", rounds, seeds=seeds)


def design_threads(wildcards):
    """A GP round's threads are `design.threads`; a Sobol, random or grid round fits no
    GP and takes one core, so that it runs beside data preparation and training."""
    return 1 if space_only(wildcards) else config["design"]["threads"]


CLAIMS = [c["name"] for c in config["claims"]]


def report_figures(root=None):
    """Every figure's path keyed by what it shows: per metric and per claim (under
    `root`, by default the study's results folder)."""
    root = root or OUT
    per_metric = {"maps": "posterior_map", "curves": "specification_curve", "sobol": "sobol", "loo": "loo"}
    figures = {
        kind: {m: f"{root}/report/{stem}_{m}.png" for m in report_metrics(config)}
        for kind, stem in per_metric.items()
    }
    figures["claim_figures"] = {c: f"{root}/report/claim_{c}.png" for c in CLAIMS}
    figures["where_figures"] = {c: f"{root}/report/claim_{c}_where.png" for c in CLAIMS}
    return figures


def report_outputs(root=None):
    """Every file the report rule writes (under `root`, as report_figures)."""
    root = root or OUT
    figures = [p for paths in report_figures(root).values() for p in paths.values()]
    return [f"{root}/report/claims.json", f"{root}/report/claims.csv", f"{root}/report.html",
            f"{root}/report/outcomes_vs_dimensions.png", f"{root}/report/claims.png"] + figures


def tracker_outputs():
    """The summaries of the exports that report.trackers names (rule export_mlflow's)."""
    return [f"{OUT}/mlflow.json"] if "mlflow" in config["report"]["trackers"] else []


PARTIAL = f"{OUT}/partial"


def finished_rounds():
    """Rounds 0..k whose design and every universe's metrics (each seed) are on disk."""
    done = []
    for r in ROUNDS:
        files = universe_files("metrics.json", [r]) + [f"{OUT}/design/round_{r}.json"]
        if not all(os.path.exists(f) for f in files):
            break
        done.append(r)
    if not done:
        raise WorkflowError(
            f"partial_report: no design round of study '{config['study']}' has finished yet "
            f"(round 0 needs {len(universe_files('metrics.json', [0]))} metrics files under {OUT}/universes/r0)"
        )
    return done
