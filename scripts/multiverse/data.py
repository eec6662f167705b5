"""Datasets: a stratified, seeded train/validation/test split saved as one ``.npz``."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from multiverse.runtime import atomic_write

SPLITS = ("train", "val", "test")


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features scaled to [0, 1] and integer labels of a dataset bundled with scikit-learn."""
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return (X / 16.0).astype(np.float32), y.astype(np.int64)
    raise ValueError(f"config key 'data.dataset': unknown dataset {name!r}")


def split_dataset(X: np.ndarray, y: np.ndarray, split: Mapping[str, float], seed: int) -> dict[str, np.ndarray]:
    """Stratified train/validation/test split; returns ``X_train, y_train, X_val, ...``."""
    from sklearn.model_selection import train_test_split

    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=split["train"], stratify=y, random_state=seed
    )
    val_share = split["validation"] / (split["validation"] + split["test"])
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, train_size=val_share, stratify=y_rest, random_state=seed
    )
    return {
        "X_train": X_train, "y_train": y_train,
        "X_val": X_val, "y_val": y_val,
        "X_test": X_test, "y_test": y_test,
    }


def prepare_data(name: str, split: Mapping[str, float], seed: int, path: str | Path) -> dict[str, np.ndarray]:
    arrays = split_dataset(*load_dataset(name), split, seed)

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    atomic_write(path, _write)
    return arrays


def read_data(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}
