"""What a study is, read when the Snakefile is parsed: its config (loaded, composed,
checked), the layout of its rounds and jobs, its claim types' and design strategies'
registries, and the typed records that cross modules.

The Snakefile imports this package and nothing heavier: it needs PyYAML and the
standard library only (``tests/test_layers.py`` holds that set). The analysis (numpy,
GPs, torch, pandas, seaborn) lives in the rest of :mod:`multiverse` and imports what it
needs at the top of its modules.

- :mod:`.config`: loading, composing, defaults, hashes and cross-key checks;
- :mod:`.layout`: the design rounds' sizes, their shards, and a train job's and a cluster
  submission's size;
- :mod:`.claims`: the claim types' registry (name, statistic, metrics, statement, check);
- :mod:`.strategies`: the design strategies' registry (traits, settings, ``choose``);
- :mod:`.records`: the typed records (a claim, a universe, an answer).
"""

from multiverse.errors import ConfigError
from multiverse.spec.claims import (
    SPECS,
    Checks,
    ClaimSpec,
    check_claim,
    claim_metrics,
    claim_type,
    spec_of,
)
from multiverse.spec.config import (
    OPTIMIZERS,
    RESERVED_NAMES,
    SCHEMA,
    TRACKERS,
    check_config,
    check_sizes,
    check_trackers,
    compose,
    config_hash,
    data_file,
    data_step,
    load_config,
    multiverse_hash,
    report_metrics,
    study_metrics,
    trainer,
    with_defaults,
)
from multiverse.spec.layout import (
    budget_rounds,
    continuation_settings,
    derive_rounds,
    gpus_per_job,
    low_fidelity,
    n_shards,
    round_sizes,
    shards_per_submission,
    train_job_size,
)
from multiverse.spec.records import Answer, Claim, Universe
from multiverse.spec.strategies import (
    STRATEGIES,
    Strategy,
    reads_outcomes,
    round_settings,
    round_strategy,
)

__all__ = [
    "Answer", "Checks", "Claim", "ClaimSpec", "ConfigError", "OPTIMIZERS", "RESERVED_NAMES", "SCHEMA", "SPECS",
    "STRATEGIES", "Strategy", "TRACKERS", "Universe", "budget_rounds", "check_claim", "check_config", "check_sizes",
    "check_trackers", "claim_metrics", "claim_type", "compose", "config_hash", "continuation_settings", "data_file",
    "data_step", "derive_rounds", "gpus_per_job", "low_fidelity", "load_config", "multiverse_hash", "n_shards",
    "reads_outcomes", "report_metrics",
    "round_settings", "round_sizes", "round_strategy", "shards_per_submission", "spec_of", "study_metrics",
    "train_job_size", "trainer", "with_defaults",
]
