"""Autograd from Python: backward, grad, hooks, grad modes, custom Functions, checkpointing,
anomaly detection and the errors it raises."""
import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close


def test_backward_accumulates_into_leaves(device):
    x = rt.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = (x * x).sum()
    assert y.grad_fn is not None and x.is_leaf and not y.is_leaf
    y.backward()
    assert_close(x.grad, [2.0, 4.0, 6.0])
    (x * 3).sum().backward()
    assert_close(x.grad, [5.0, 7.0, 9.0])
    x.grad = None
    assert x.grad is None


def test_grad_and_higher_order():
    x = rt.tensor(2.0, dtype=rt.float64, requires_grad=True)
    y = x ** 3
    (g,) = rt.autograd.grad(y, [x], create_graph=True)
    assert g.item() == pytest.approx(12.0)
    (g2,) = rt.autograd.grad(g, [x])
    assert g2.item() == pytest.approx(12.0)


def test_hooks_and_retain_grad():
    x = rt.ones(3, requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.tolist()))
    y = x * 2
    y.retain_grad()
    y.sum().backward()
    assert seen == [[2.0, 2.0, 2.0]] and y.grad.tolist() == [1.0, 1.0, 1.0]
    handle.remove()
    x.register_hook(lambda g: g * 10)
    x.grad = None
    (x * 1).sum().backward()
    assert x.grad.tolist() == [10.0, 10.0, 10.0]


def test_grad_modes():
    x = rt.ones(2, requires_grad=True)
    with rt.no_grad():
        assert not (x * 2).requires_grad
        with rt.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @rt.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    with rt.set_grad_enabled(False):
        assert not rt.is_grad_enabled()
    assert rt.is_grad_enabled()
    assert not x.detach().requires_grad


class Cube(rt.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x ** 3 * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * ctx.scale, None


def test_custom_function(device):
    x = rt.tensor([1.0, 2.0], dtype=rt.float64, device=device, requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert_close(y, [2.0, 16.0])
    y.sum().backward()
    assert_close(x.grad, [6.0, 24.0])
    assert rt.autograd.gradcheck(lambda t: Cube.apply(t, 0.5), (x.detach().cpu().requires_grad_(),))


def test_checkpoint_recomputes_and_matches():
    rt.manual_seed(0)
    w = rt.randn(4, 4, dtype=rt.float64, requires_grad=True)
    x = rt.randn(3, 4, dtype=rt.float64, requires_grad=True)

    def block(inp):
        return rt.dropout((inp @ w).tanh(), 0.3) @ w

    rt.manual_seed(1)
    rt.utils.checkpoint.checkpoint(block, x).sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad, w.grad = None, None
    rt.manual_seed(1)
    block(x).sum().backward()
    assert_close(gx, x.grad, rtol=1e-12)
    assert_close(gw, w.grad, rtol=1e-12)


def test_anomaly_mode_names_the_op():
    x = rt.tensor([-1.0], requires_grad=True)
    with rt.autograd.detect_anomaly():
        with pytest.raises(rt.Error, match="sqrt"):
            x.sqrt()


def test_autograd_errors():
    x = rt.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()
    with pytest.raises(RuntimeError):
        rt.ones(2, dtype=rt.int64).requires_grad_()
    z = x * 1
    w = z * z
    z.add_(1)
    with pytest.raises(RuntimeError, match="modified"):
        w.sum().backward()
