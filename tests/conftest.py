import copy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from multiverse.config import load_config  # noqa: E402


@pytest.fixture(scope="session")
def default_config():
    return load_config(ROOT / "config" / "config.yaml")


@pytest.fixture
def config(default_config):
    """A fresh copy of the default study's config, free to edit."""
    return copy.deepcopy(default_config)


@pytest.fixture(scope="session")
def digits():
    from multiverse.data import load_dataset, split_dataset

    return split_dataset(*load_dataset("digits"), {"train": 0.6, "validation": 0.2, "test": 0.2}, seed=0)
