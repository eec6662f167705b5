"""The metrics step in bounded memory (issue 19): evaluation and sharpness in minibatches
on the training device, with the default study's results unchanged."""

import json
import logging
import math

import numpy as np
import pytest
import torch

from multiverse.metrics import metrics_shard, universe_metrics
from multiverse.sharpness import SHARPNESS_BATCH, adaptive_sharpness
from multiverse.train import EVAL_BATCH, evaluate, make_model, train_universe

U = {"optimizer": "adam", "lr": 3e-3, "weight_decay": 1e-5, "batch_size": 64}


@pytest.fixture(scope="module")
def trained(digits):
    state, record = train_universe(digits, U, seed=1, epochs=2, width=16, depth=1)
    model = make_model(64, record["n_classes"], 16, 1)
    model.load_state_dict(state)
    return model.eval(), state, record


def split(data, name):
    return torch.as_tensor(data[f"X_{name}"]), torch.as_tensor(data[f"y_{name}"])


def passes(model, X, y, **kw) -> int:
    calls = []
    handle = model.register_forward_hook(lambda *_: calls.append(1))
    try:
        evaluate(model, X, y, **kw)
    finally:
        handle.remove()
    return len(calls)


def test_a_split_up_to_the_chunk_is_one_pass_bitwise_as_before(digits, trained):
    model = trained[0]
    assert EVAL_BATCH >= 2048  # the default study's splits (about 1,078 / 360 / 359 rows) stay one pass
    for name in ("train", "val", "test"):
        X, y = split(digits, name)
        with torch.no_grad():  # the evaluation before chunking
            logits = model(X)
            before = ((logits.argmax(dim=1) == y).double().mean().item(),
                      torch.nn.functional.cross_entropy(logits, y).item())
        assert evaluate(model, X, y) == before
        assert evaluate(model, X, y, batch=0) == before
    X = torch.rand(2049, 64)
    y = torch.randint(0, 10, (2049,))
    assert passes(model, X[:2048], y[:2048]) == 1 and passes(model, X, y) == 2 and passes(model, X, y, batch=0) == 1


def test_chunked_evaluation_equals_one_pass(digits, trained):
    model = trained[0]
    X, y = split(digits, "train")
    acc, loss = evaluate(model, X, y, batch=0)
    for batch in (100, 333, len(y) - 1):
        assert passes(model, X, y, batch=batch) == math.ceil(len(y) / batch)
        a, lo = evaluate(model, X, y, batch=batch)
        assert a == acc and lo == pytest.approx(loss, abs=1e-6)


def test_chunked_sharpness_equals_one_pass(digits, trained):
    model = trained[0]
    X, y = split(digits, "train")
    X, y = X[:600], y[:600]
    for norm in ("linf", "l2"):
        one = adaptive_sharpness(model, X, y, 0.05, norm, 5, batch=0)
        assert adaptive_sharpness(model, X[:SHARPNESS_BATCH], y[:SHARPNESS_BATCH], 0.05, norm, 5) == \
            adaptive_sharpness(model, X[:SHARPNESS_BATCH], y[:SHARPNESS_BATCH], 0.05, norm, 5, batch=0)
        assert adaptive_sharpness(model, X, y, 0.05, norm, 5, batch=128) == pytest.approx(one, rel=1e-4, abs=1e-6)


def test_metrics_shard_on_cpu_and_auto(digits, trained, tmp_path, config):
    _, state, record = trained
    data = tmp_path / "data.npz"
    np.savez(data, **digits)
    model_path, record_path = tmp_path / "u.pt", tmp_path / "u.json"
    torch.save(state, model_path)
    record_path.write_text(json.dumps({**record, "id": "r0u000", "round": 0, "index": 0, "shard": 0, "slot": 0,
                                       "seed": 1, "params": U}))
    model = {**config["model"], "width": 16, "depth": 1}
    sharpness = {"rho": 0.01, "norm": "linf", "steps": 2, "samples": 64}
    out = {}
    for device in ("cpu", "auto"):
        path = tmp_path / f"m_{device}.json"
        metrics_shard(str(data), [str(model_path)], [str(record_path)], model, [str(path)],
                      logging.getLogger("test"), sharpness, device=device)
        out[device] = json.loads(path.read_text())["metrics"]
    expected = universe_metrics(digits, state, record, width=16, depth=1, sharpness=sharpness)
    assert out["cpu"] == expected
    if not torch.cuda.is_available():
        assert out["auto"] == expected


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a node without a GPU")
def test_metrics_on_cuda_without_a_gpu_raises(digits, trained):
    from multiverse.runtime import DeviceUnavailable

    _, state, record = trained
    with pytest.raises(DeviceUnavailable):
        universe_metrics(digits, state, record, width=16, depth=1, device="cuda")
