"""A training step of the CNN trainer's model (conv, batch norm, ReLU, max pooling, linear) as a user
writes it: in float32 against the same step in float64 (whose convolutions run the im2col kernels,
the float32 ones oneDNN's where the build has it), and against PyTorch when it is installed."""
import numpy as np
import pytest

import rustytorch as rt
from rustytorch.train import vision

from conftest import assert_close, to_numpy


def step(lib, dtype, state, x, y, device="cpu"):
    """Loss and parameter gradients of one step of the CNN from state (numpy arrays by key)."""
    model = vision.cnn(lib.nn)
    model.load_state_dict({k: lib.from_numpy(v) for k, v in state.items()})
    model.to(device=device, dtype=dtype)
    for m in model.modules():
        if isinstance(m, lib.nn.Dropout):
            m.p = 0.0  # the same step in every library and dtype
    loss = lib.nn.functional.cross_entropy(model(lib.from_numpy(x).to(device=device, dtype=dtype)),
                                           lib.from_numpy(y).to(device))
    loss.backward()
    return loss.item(), {name: p.grad for name, p in model.named_parameters()}


@pytest.fixture(scope="module")
def batch():
    rt.manual_seed(0)
    state = {k: v.detach().numpy().copy() for k, v in vision.cnn(rt.nn).state_dict().items()}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 16, dtype=np.int64)
    return state, x, y


def assert_grads_close(grads, expected):
    """Every gradient within 1e-4 relative, or 1e-5 of the largest gradient of the model: the conv
    biases' gradients are zero but for rounding (batch norm takes the mean out)."""
    scale = max(np.abs(e).max() for e in expected.values())
    for name, g in grads.items():
        assert_close(g, expected[name], rtol=1e-4, atol=1e-5 * scale)


def test_float32_step_matches_float64(device, batch):
    loss32, grads32 = step(rt, rt.float32, *batch, device=device)
    loss64, grads64 = step(rt, rt.float64, *batch, device=device)
    assert abs(loss32 - loss64) < 1e-5
    assert_grads_close(grads32, {name: to_numpy(g) for name, g in grads64.items()})


def test_step_matches_torch(batch):
    torch = pytest.importorskip("torch")
    loss, grads = step(rt, rt.float32, *batch)
    torch_loss, torch_grads = step(torch, torch.float32, *batch)
    assert abs(loss - torch_loss) < 1e-5
    assert_grads_close(grads, {name: g.numpy().astype(np.float64) for name, g in torch_grads.items()})
