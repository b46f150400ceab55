"""cumprod, logcumsumexp, cummax and cummin, called as scripts call them (a diffusion schedule's
alphas_cumprod, running maxima): against numpy float64 references on every device, gradients by
finite differences (zeros included for cumprod), and against PyTorch itself where installed."""
import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, gradcheck, t64, to_numpy

rng = np.random.default_rng(17)


def test_against_numpy(device):
    a = rng.standard_normal((5, 37))
    t = t64(a, device)
    assert_close(t.cumprod(1), np.cumprod(a, 1), rtol=1e-12)
    assert_close(rt.cumprod(t, dim=0), np.cumprod(a, 0), rtol=1e-12)
    betas = rt.linspace(1e-4, 0.02, 1000, device=device)
    alphas_cumprod = rt.cumprod(1.0 - betas, dim=0)
    assert_close(alphas_cumprod, np.cumprod(1.0 - np.linspace(1e-4, 0.02, 1000)), rtol=1e-5)
    assert rt.cumprod(rt.tensor([True, True, False], device=device), 0).dtype == rt.int64
    assert_close(rt.cumprod(rt.tensor([2, 3, 4], device=device), 0, dtype=rt.float64), [2, 6, 24])
    assert_close(t.logcumsumexp(1), np.logaddexp.accumulate(a, 1), rtol=1e-12)
    big = t64([1000.0, 1000.0, -np.inf, 999.0], device)
    assert_close(big.logcumsumexp(0), np.logaddexp.accumulate([1000.0, 1000.0, -np.inf, 999.0]))
    for name, acc, arg in (("cummax", np.maximum.accumulate, np.argmax), ("cummin", np.minimum.accumulate, np.argmin)):
        v, i = getattr(t, name)(1)
        assert_close(v, acc(a, 1))
        assert i.dtype == rt.int64
        np.testing.assert_array_equal(to_numpy(v), np.take_along_axis(a, to_numpy(i).astype(np.int64), 1))
    v, i = rt.cummax(rt.tensor([1.0, 1.0, np.nan, 3.0, np.nan, 2.0], device=device), 0)
    assert_close(v, [1, 1, np.nan, np.nan, np.nan, np.nan]) and assert_close(i, [0, 1, 2, 2, 4, 4])
    v, i = rt.cummin(rt.tensor([2, 1, 1, 3], device=device), 0)
    assert_close(v, [2, 1, 1, 1]) and assert_close(i, [0, 1, 2, 2])
    u = t.clone()
    assert u.cumprod_(1) is u and u.cumsum_(0) is u


def test_gradients(device):
    a = rng.standard_normal((3, 6))
    a[1, 2] = 0.0  # a zero in the product
    assert gradcheck(lambda x: x.cumprod(1), [a], device)
    assert gradcheck(lambda x: x.logcumsumexp(1), [a], device)
    assert gradcheck(lambda x: x.cummax(1).values, [a], device)
    assert gradcheck(lambda x: x.cummin(0).values, [a], device)


def test_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((4, 9))
    a[2, 3] = 0.0
    for case in (lambda lib, x: x.cumprod(1), lambda lib, x: lib.logcumsumexp(x, 0),
                 lambda lib, x: x.cummax(1).indices, lambda lib, x: lib.cummin(x, 0).values,
                 lambda lib, x: lib.cumprod(x[0].long(), 0)):
        ours, theirs = case(rt, rt.tensor(a)), case(torch, torch.tensor(a))
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        np.testing.assert_allclose(to_numpy(ours), theirs.numpy(), rtol=1e-12)
    x = torch.tensor(a, requires_grad=True)
    x.cumprod(1).sum().backward()
    y = rt.tensor(a, requires_grad=True)
    y.cumprod(1).sum().backward()
    np.testing.assert_allclose(to_numpy(y.grad), x.grad.numpy(), rtol=1e-10)
