"""Datasets: a stratified, seeded train/validation/test split saved as one ``.npz``."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from multiverse.runtime import atomic_write

SPLITS = ("train", "val", "test")


MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
#: The files of the python versions of CIFAR-10 and CIFAR-100 (``cifar-10-batches-py``,
#: ``cifar-100-python``): pickled dicts of uint8 ``data`` rows (3 x 32 x 32, channel-major)
#: and their labels.
CIFAR_FILES = {
    "cifar10": (tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",), b"labels"),
    "cifar100": (("train", "test"), b"fine_labels"),
}
#: (channels, height, width) of each dataset's images; the features are these, flattened.
IMAGE_SHAPES = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "cifar10": (3, 32, 32), "cifar100": (3, 32, 32)}
#: Shifts that make the out-of-distribution test split (``data.ood``): the test images
#: rotated by ``amount`` degrees, with Gaussian noise of standard deviation ``amount``
#: added, or translated by ``amount`` pixels right and down.
OOD_TRANSFORMS = ("rotate", "noise", "shift")


def load_dataset(name: str, path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Flat features scaled to [0, 1] (float32) and integer labels.

    ``digits`` ships with scikit-learn. ``mnist`` (the four IDX files, gzipped or not),
    ``cifar10`` and ``cifar100`` (:data:`CIFAR_FILES`) are read from the local folder
    ``path``; train and test are pooled, then split as configured. Nothing is downloaded.
    """
    X, y = raw_dataset(name, path)
    return unit_scale(name, X), y


def raw_dataset(name: str, path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The dataset as stored (pixels: uint8; digits: 0-16) and its integer labels;
    :func:`unit_scale` maps it to [0, 1]."""
    if name == "digits":
        # deferred: scikit-learn takes ~1 s to import; train and metrics jobs import data for read_data only
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X, y.astype(np.int64)
    if name == "mnist":
        arrays = [read_idx(_find(Path(path), f)) for f in MNIST_FILES]
        X = np.concatenate([arrays[0], arrays[2]]).reshape(-1, 28 * 28)
        y = np.concatenate([arrays[1], arrays[3]])
        return X, y.astype(np.int64)
    if name in CIFAR_FILES:
        files, label_key = CIFAR_FILES[name]
        batches = [read_cifar(_find(Path(path), f)) for f in files]
        X = np.concatenate([b[b"data"] for b in batches]).reshape(-1, 3 * 32 * 32)
        y = np.concatenate([b[label_key] for b in batches])
        return X, np.asarray(y, dtype=np.int64)
    raise ValueError(f"config key 'data.dataset': unknown dataset {name!r}")


def unit_scale(name: str, X: np.ndarray) -> np.ndarray:
    """:func:`raw_dataset`'s features as float32 in [0, 1]. uint8 pixels go to float32
    without a float64 copy (``X / 255.0`` made one of 1.5 GB on CIFAR-10)."""
    if name == "digits":
        return (X / 16.0).astype(np.float32)
    out = X.astype(np.float32)
    out /= np.float32(255.0)
    return out


def _find(folder: Path, stem: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"config key 'data.path': no {stem}[.gz] in {folder}")


def read_idx(path: str | Path) -> np.ndarray:
    """An unsigned-byte IDX array (the MNIST file format), gzipped or not."""
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
    a = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, a.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in a.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as fh:
        fh.write(header + a.tobytes())


def read_cifar(path: str | Path) -> dict:
    """One pickled batch of the python version of CIFAR-10/100."""
    with open(path, "rb") as fh:
        batch = pickle.load(fh, encoding="bytes")
    if not isinstance(batch, dict) or b"data" not in batch:
        raise ValueError(f"{path}: not a CIFAR python batch (a pickled dict with b'data')")
    return batch


def write_cifar(path: str | Path, data: np.ndarray, labels: Sequence[int], label_key: bytes = b"labels") -> None:
    """Write a CIFAR python batch (used by the tests to make small files in that format)."""
    with open(path, "wb") as fh:
        pickle.dump({b"data": np.ascontiguousarray(data, dtype=np.uint8), label_key: list(map(int, labels))}, fh)


def ood_split(X: np.ndarray, shape: Sequence[int], transform: str, amount: float, seed: int) -> np.ndarray:
    """The out-of-distribution copy of ``X`` (flat images of ``shape``): see
    :data:`OOD_TRANSFORMS`. Deterministic: the noise is drawn from ``seed``."""
    # deferred: only the OOD copy needs scipy; train and metrics jobs import data for read_data only
    from scipy import ndimage

    images = np.asarray(X, dtype=np.float64).reshape(-1, *shape)  # (n, channels, height, width)
    if transform == "rotate":
        out = ndimage.rotate(images, float(amount), axes=(2, 3), reshape=False, order=1, mode="constant")
    elif transform == "shift":
        out = ndimage.shift(images, (0, 0, float(amount), float(amount)), order=0, mode="constant")
    elif transform == "noise":
        out = images + float(amount) * np.random.default_rng(seed).standard_normal(images.shape)
    else:
        raise ValueError(f"config key 'data.ood.transform': expected one of {list(OOD_TRANSFORMS)}, got {transform!r}")
    return np.clip(out, 0.0, 1.0).reshape(len(X), -1).astype(np.float32)


def split_dataset(X: np.ndarray, y: np.ndarray, split: Mapping[str, float], seed: int) -> dict[str, np.ndarray]:
    """Stratified train/validation/test split; returns ``X_train, y_train, X_val, ...``."""
    # deferred: scikit-learn takes ~1 s to import; train and metrics jobs import data for read_data only
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
    name: str, split: Mapping[str, float], seed: int, path: str | Path, source: str | Path | None = None,
    ood: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Load dataset ``name`` (from ``source`` if it is a local one), split it, save to ``path``.

    The file also holds ``shape``, the images' (channels, height, width), and with ``ood``
    (``{transform, amount}``) an ``X_ood``/``y_ood`` split: the test split shifted by
    :func:`ood_split`.
    """
    # split the stored (uint8) pixels, then scale each split: the float32 copy is made once
    arrays = split_dataset(*raw_dataset(name, source), split, seed)
    for part in ("train", "val", "test"):
        arrays[f"X_{part}"] = unit_scale(name, arrays[f"X_{part}"])
    arrays["shape"] = np.asarray(IMAGE_SHAPES[name], dtype=np.int64)
    if ood:
        arrays["X_ood"] = ood_split(arrays["X_test"], IMAGE_SHAPES[name], ood["transform"], ood["amount"], seed)
        arrays["y_ood"] = arrays["y_test"].copy()

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)

    atomic_write(path, _write)
    return arrays


def read_data(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}
