"""benchmarks/gpu_universes.py: the prepared GPU benchmark runs end to end (on the CPU, at
tiny sizes) and prints its table of the three models and their methods."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_universes as G  # noqa: E402


def test_the_synthetic_images_are_mnist_and_cifar_shaped_and_seeded():
    a, b = (G.synthetic_images((3, 32, 32), 40, seed=1) for _ in range(2))
    assert a["X_train"].shape == (40, 3072) and a["X_train"].dtype == np.float32
    assert a["X_val"].shape == a["X_test"].shape == (10, 3072) and list(a["shape"]) == [3, 32, 32]
    assert 0 <= a["X_train"].min() and a["X_train"].max() <= 1 and set(a["y_train"]) == set(range(10))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert G.synthetic_images((1, 28, 28), 16, seed=0)["X_train"].shape == (16, 784)


@pytest.mark.slow
def test_quick_cpu_run_prints_every_model_and_method(tmp_path):
    out = tmp_path / "gpu.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_universes.py"), "--device", "cpu", "--quick",
                          "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    table = [line for line in res.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| model | universes | method | seconds | universes/h | speed-up | peak GPU MB |"
    cells = {(line.split(" | ")[0][2:].split(" (")[0], line.split(" | ")[2]): line for line in table[1:]}
    expected = {("digits MLP", "loop"), ("digits MLP", "packed"), ("digits MLP", "shared 2"),
                ("MNIST CNN", "loop"), ("MNIST CNN", "packed"), ("MNIST CNN", "shared 2"),
                ("CIFAR ResNet-18", "loop"), ("CIFAR ResNet-18", "packed"), ("CIFAR ResNet-18", "shared 2")}
    assert set(cells) == expected
    assert "n/a" in cells["MNIST CNN", "packed"] and "n/a" in cells["CIFAR ResNet-18", "packed"]
    assert "failed" not in res.stdout and "1.00x" in cells["digits MLP", "loop"]
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 7 and all(r["seconds"] > 0 for r in rows)
    # equal epochs: the lanes train the same universes as the loop, with the same trainer
    for model in ("mlp", "cnn", "resnet18"):
        assert len({r["epochs"] for r in rows if r["model"] == model and r["method"] != "packed"}) == 1
    assert all(r["peak"] == "-" for r in rows)  # no GPU memory on the CPU
