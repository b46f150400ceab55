"""flip, roll, movedim, repeat_interleave, diff, unfold, meshgrid, take_along_dim, the matmul-based products (outer, dot, mv,
addmm, baddbmm), count_nonzero, clamp_min/max, tril_/triu_ and PyTorch's alias names, called as
scripts call them: against numpy float64 references, and against PyTorch itself where installed."""
import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, to_numpy

rng = np.random.default_rng(5)


def test_against_numpy(device):
    a = rng.standard_normal((3, 4))
    t = rt.tensor(a, device=device)
    assert_close(t.flip(0, 1), np.flip(a, (0, 1)))
    assert_close(rt.flip(t, [1]), np.flip(a, 1))
    assert_close(rt.fliplr(t), np.fliplr(a)) and assert_close(rt.flipud(t), np.flipud(a))
    assert_close(rt.roll(t, 1, 1), np.roll(a, 1, 1))
    assert_close(t.roll((2, -1), (0, 1)), np.roll(a, (2, -1), (0, 1)))
    assert_close(rt.roll(t, 5), np.roll(a, 5))
    assert_close(rt.movedim(t.reshape(3, 2, 2), 0, -1), np.moveaxis(a.reshape(3, 2, 2), 0, -1))
    assert_close(rt.moveaxis(t.reshape(3, 2, 2), (0, 1), (2, 0)), np.moveaxis(a.reshape(3, 2, 2), (0, 1), (2, 0)))
    assert_close(t.repeat_interleave(2, dim=0), np.repeat(a, 2, axis=0))
    assert_close(rt.repeat_interleave(t, rt.tensor([1, 0, 3, 1], device=device), dim=1),
                 np.repeat(a, [1, 0, 3, 1], axis=1))
    assert_close(t.repeat_interleave(3), np.repeat(a, 3))
    assert_close(rt.diff(t), np.diff(a)) and assert_close(t.diff(n=2, dim=0), np.diff(a, 2, axis=0))
    assert_close(rt.diff(t, prepend=t[:, :1], append=t[:, -1:]), np.diff(a, prepend=a[:, :1], append=a[:, -1:]))
    assert_close(t.unfold(1, 2, 1), np.lib.stride_tricks.sliding_window_view(a, 2, axis=1))
    v, w = rng.standard_normal(4), rng.standard_normal(3)
    tv, tw = rt.tensor(v, device=device), rt.tensor(w, device=device)
    assert_close(rt.outer(tw, tv), np.outer(w, v)) and assert_close(tw.ger(tv), np.outer(w, v))
    assert_close(rt.dot(tv, tv), np.dot(v, v)) and assert_close(t.mv(tv), a @ v)
    c = rng.standard_normal((3, 3))
    assert_close(rt.addmm(rt.tensor(c, device=device), t, t.t(), beta=0.5, alpha=-2), 0.5 * c - 2 * a @ a.T)
    assert_close(rt.baddbmm(rt.tensor(c, device=device), t[None], t.t()[None]), (c + a @ a.T)[None])
    assert_close(rt.count_nonzero(rt.tensor([[0, 1, 2], [0, 0, 3]], device=device), dim=1), [2, 1])
    assert_close(t.clamp_min(0.1), np.maximum(a, 0.1)) and assert_close(rt.clamp_max(t, 0.1), np.minimum(a, 0.1))
    u = t.clone()
    assert u.tril_(-1) is u and u.triu_() is u
    assert_close(u, np.zeros_like(a))


def test_meshgrid_and_take_along_dim_against_numpy(device):
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    gx, gy = rt.meshgrid(rt.tensor(x, device=device), rt.tensor(y, device=device), indexing="xy")
    ex, ey = np.meshgrid(x, y, indexing="xy")
    assert_close(gx, ex) and assert_close(gy, ey)
    a = rng.standard_normal((3, 4))
    order = np.argsort(a, axis=1)
    assert_close(rt.take_along_dim(rt.tensor(a, device=device), rt.tensor(order, device=device), 1),
                 np.take_along_axis(a, order, 1))
    with pytest.raises(rt.ValueError, match="indexing must be 'ij' or 'xy'"):
        rt.meshgrid(rt.tensor(x), indexing="ji")
    with pytest.raises(rt.ShapeError, match=r"\[take_along_dim\] input of shape \[3, 4\]"):
        rt.take_along_dim(rt.tensor(a), rt.tensor([1]), 1)


def test_gradients():
    for f, shape in [(lambda x: x.flip(0), (3, 2)), (lambda x: x.roll(1, 0), (3, 2)),
                     (lambda x: x.repeat_interleave(2, dim=1), (2, 2)), (lambda x: x.diff(dim=0), (3, 2)),
                     (lambda x: x.unfold(0, 2, 1), (4,)), (lambda x: rt.outer(x, x), (3,)),
                     (lambda x: rt.addmm(x, x, x, beta=2, alpha=0.5), (2, 2)), (rt.tan, (2, 2)),
                     (lambda x: rt.hypot(x, x * 2 + 1), (2, 2)),
                     (lambda x: x.take_along_dim(rt.tensor([[1, 0, 1]]), 0), (2, 3)),
                     (lambda x: rt.meshgrid(x, x)[0] * rt.meshgrid(x, x)[1], (3,))]:
        x = rt.tensor(rng.uniform(-0.8, 0.8, shape), requires_grad=True)
        assert rt.autograd.gradcheck(f, (x,))


def test_aliases_are_the_ops():
    x = rt.tensor([[0.25, -0.5], [0.75, 1.0]])
    for alias, name in [("absolute", "abs"), ("negative", "neg"), ("arcsin", "asin"), ("arctan", "atan"),
                        ("fix", "trunc")]:
        assert rt.equal(getattr(rt, alias)(x), getattr(rt, name)(x))
        assert rt.equal(getattr(x, alias)(), getattr(x, name)())
    assert rt.equal(rt.multiply(x, 2), x * 2) and rt.equal(x.subtract(x), rt.zeros(2, 2))
    assert rt.equal(rt.divide(x, 2), x / 2) and rt.equal(rt.true_divide(x, 2), x / 2)
    assert rt.greater(x, 0).tolist() == (x > 0).tolist() and rt.not_equal(x, 1.0).tolist() == (x != 1).tolist()
    assert rt.concatenate([x, x]).shape == (4, 2) and rt.swapaxes(x, 0, 1).tolist() == x.t().tolist()
    y = x.clone()
    y.absolute_()
    assert rt.equal(y, x.abs())


def test_like_pytorch():
    torch = pytest.importorskip("torch")
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    cases = [
        lambda m, x: m.flip(x, (0, 2)), lambda m, x: x.flip(-1), lambda m, x: m.roll(x, (1, -2), (0, 2)),
        lambda m, x: x.roll(3), lambda m, x: m.movedim(x, (0, 2), (2, 0)), lambda m, x: x.moveaxis(-1, 0),
        lambda m, x: x.repeat_interleave(2, dim=1), lambda m, x: m.repeat_interleave(x[0, 0], 3),
        lambda m, x: x.repeat_interleave(m.tensor([2, 0]), dim=0), lambda m, x: m.diff(x, dim=1),
        lambda m, x: x.unfold(2, 2, 2), lambda m, x: x.unfold(-1, 3, 1).sum(-1),
        lambda m, x: m.outer(x[0, 0], x[1, 1]), lambda m, x: m.dot(x[0, 0], x[1, 1]), lambda m, x: m.mv(x[0], x[1, 0]),
        lambda m, x: m.addmm(x[0, :, :3], x[0], x[1].t(), beta=0.5, alpha=2.0),
        lambda m, x: x[:, :, :3].baddbmm(x, x.transpose(1, 2)), lambda m, x: m.count_nonzero(x > 0, dim=(0, 2)),
        lambda m, x: m.tan(x), lambda m, x: m.arcsinh(x), lambda m, x: x.exp2(),
        lambda m, x: m.logaddexp(x, x.flip(0)), lambda m, x: m.hypot(x, x.roll(1)), lambda m, x: x.clamp_min(0.2),
        lambda m, x: x[0].clone().tril_(1), lambda m, x: m.erfc(x),
    ]
    for i, case in enumerate(cases):
        ours = case(rt, rt.tensor(a))
        theirs = case(torch, torch.tensor(a))
        assert tuple(ours.shape) == tuple(theirs.shape), i
        np.testing.assert_allclose(to_numpy(ours).astype(np.float64), theirs.double().numpy(), rtol=2e-6, atol=2e-6,
                                   err_msg=str(i))
    x, y = rt.arange(3.0), rt.arange(4.0)
    for indexing in ("ij", "xy"):
        ours = rt.meshgrid(x, y, indexing=indexing)
        theirs = torch.meshgrid(torch.arange(3.0), torch.arange(4.0), indexing=indexing)
        assert all(np.array_equal(o.numpy(), t.numpy()) for o, t in zip(ours, theirs))
    assert [tuple(g.shape) for g in rt.meshgrid([x, y, rt.tensor(1.0)], indexing="xy")] == [(4, 3, 1)] * 3
    idx = rng.integers(0, 4, (2, 1, 3))
    np.testing.assert_array_equal(rt.take_along_dim(rt.tensor(a), rt.tensor(idx), dim=2).numpy(),
                                  torch.take_along_dim(torch.tensor(a), torch.tensor(idx), dim=2).numpy())
    flat = rng.integers(0, 24, (5,))
    np.testing.assert_array_equal(rt.tensor(a).take_along_dim(rt.tensor(flat)).numpy(),
                                  torch.tensor(a).take_along_dim(torch.tensor(flat)).numpy())
    # The grouped-query attention idiom of Llama-style scripts.
    k = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    np.testing.assert_array_equal(rt.tensor(k).repeat_interleave(3, dim=1).numpy(),
                                  torch.tensor(k).repeat_interleave(3, dim=1).numpy())
