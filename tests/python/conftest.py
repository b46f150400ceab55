"""Shared fixtures: the devices every device-parametrized test runs on (CUDA skips with the reason
when no GPU is usable), and helpers comparing rustytorch tensors with numpy arrays."""
import numpy as np
import pytest

import rustytorch as rt

DEVICES = ["cpu", "cuda"]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "cuda" and not rt.cuda.is_available():
        pytest.skip("CUDA is not available: " + rt._C._cuda.unavailable_reason())
    return request.param


def to_numpy(t):
    """A float64 (or bool / int64) numpy copy of a tensor on any device."""
    t = t.detach().cpu()
    if t.is_floating_point():
        t = t.to(rt.float64)
    return t.numpy().copy()


def assert_close(actual, expected, rtol=1e-6, atol=1e-7):
    """actual (a tensor) against expected (numpy or a tensor), with shapes checked."""
    a = to_numpy(actual)
    e = to_numpy(expected) if isinstance(expected, rt.Tensor) else np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


def t64(a, device="cpu", requires_grad=False):
    return rt.tensor(np.asarray(a, dtype=np.float64), dtype=rt.float64, device=device, requires_grad=requires_grad)


def gradcheck(fn, arrays, device):
    """gradcheck of fn on float64 leaves built from arrays, the computation running on device."""
    leaves = [t64(a, requires_grad=True) for a in arrays]
    return rt.autograd.gradcheck(lambda *xs: fn(*(x.to(device) for x in xs)).cpu(), leaves)
