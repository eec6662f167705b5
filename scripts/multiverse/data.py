"""Datasets: a stratified, seeded train/validation/test split saved as one ``.npz``."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from multiverse.runtime import atomic_write

SPLITS = ("train", "val", "test")


MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def load_dataset(name: str, path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Flat features scaled to [0, 1] and integer labels.

    ``digits`` ships with scikit-learn; ``mnist`` is read from the local folder ``path``
    (the four IDX files, gzipped or not; train and test are pooled, then split as
    configured). Nothing is downloaded.
    """
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return (X / 16.0).astype(np.float32), y.astype(np.int64)
    if name == "mnist":
        arrays = [read_idx(_find(Path(path), f)) for f in MNIST_FILES]
        X = np.concatenate([arrays[0], arrays[2]]).reshape(-1, 28 * 28)
        y = np.concatenate([arrays[1], arrays[3]])
        return (X / 255.0).astype(np.float32), y.astype(np.int64)
    raise ValueError(f"config key 'data.dataset': unknown dataset {name!r}")


def _find(folder: Path, stem: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"config key 'data.path': no {stem}[.gz] in {folder}")


def read_idx(path: str | Path) -> np.ndarray:
    """An unsigned-byte IDX array (the MNIST file format), gzipped or not."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write an unsigned-byte IDX file (gzipped when ``path`` ends in .gz)."""
    import gzip

    a = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, a.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in a.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as fh:
        fh.write(header + a.tobytes())


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


def prepare_data(
    name: str, split: Mapping[str, float], seed: int, path: str | Path, source: str | Path | None = None
) -> dict[str, np.ndarray]:
    """Load dataset ``name`` (from ``source`` if it is a local one), split it, save to ``path``."""
    arrays = split_dataset(*load_dataset(name, source), split, seed)

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    atomic_write(path, _write)
    return arrays


def read_data(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}
