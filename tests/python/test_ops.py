"""Ops against numpy float64: the pointwise table (with broadcasting, Python scalars, non-contiguous,
0-d and empty inputs), reductions, linear algebra and nn functions; gradients by gradcheck."""
import math

import numpy as np
import pytest

import rustytorch as rt
from conftest import assert_close, to_numpy

rng = np.random.default_rng(0)

UNARY = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "square": np.square, "relu": lambda x: np.maximum(x, 0), "exp": np.exp,
    "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x, "sin": np.sin, "cos": np.cos, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "silu": lambda x: x / (1 + np.exp(-x)),
    "erf": np.vectorize(math.erf), "erfc": np.vectorize(math.erfc), "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": lambda x: np.arccosh(x + 1), "atanh": np.arctanh, "log2": np.log2, "log10": np.log10, "exp2": np.exp2,
}
POSITIVE = {"log", "log1p", "sqrt", "rsqrt", "reciprocal", "log2", "log10"}
UNIT = {"asin", "acos", "atanh"}  # sampled in (-1, 1); acosh's reference shifts its input by 1

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "fmod": np.fmod, "remainder": np.remainder, "atan2": np.arctan2,
    "pow": np.power, "hypot": np.hypot, "logaddexp": np.logaddexp,
}


def sample(shape, positive=False):
    x = rng.standard_normal(shape)
    return np.abs(x) + 0.5 if positive else x


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(name, device):
    x = sample((5, 7), name in POSITIVE or name == "acosh")
    if name in UNIT:
        x = np.tanh(x)
    t = rt.tensor(x, device=device) + (1 if name == "acosh" else 0)
    assert_close(getattr(rt, name)(t), UNARY[name](x), rtol=1e-10, atol=1e-12)
    assert_close(getattr(t, name)(), UNARY[name](x), rtol=1e-10, atol=1e-12)
    # Non-contiguous, 0-d and empty inputs.
    assert_close(getattr(rt, name)(t.t()), UNARY[name](x.T), rtol=1e-10, atol=1e-12)
    assert_close(getattr(rt, name)(t[1, 2]), UNARY[name](x[1, 2]), rtol=1e-10, atol=1e-12)
    assert getattr(rt, name)(rt.zeros(0, 3, dtype=rt.float64, device=device)).shape == (0, 3)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcasts_like_numpy(name, device):
    a = sample((4, 1, 3), name == "pow")
    b = sample((5, 1)) if name != "pow" else sample((5, 1))
    ta, tb = rt.tensor(a, device=device), rt.tensor(b, device=device)
    assert_close(getattr(rt, name)(ta, tb), BINARY[name](a, b), rtol=1e-10, atol=1e-12)
    assert_close(getattr(ta, name)(2.5), BINARY[name](a, 2.5), rtol=1e-10, atol=1e-12)


def test_operators_and_python_scalars(device):
    a = rt.tensor([[1.0, -2.0], [3.0, 4.0]], device=device)
    x = to_numpy(a)
    assert_close(a + 1, x + 1)
    assert_close(2 - a, 2 - x)
    assert_close(a * a, x * x)
    assert_close(1 / a, 1 / x)
    assert_close(a ** 2, x ** 2)
    assert_close(2 ** a, 2 ** x)
    assert_close(a % 3, np.remainder(x, 3))
    assert_close(-a, -x)
    assert_close(abs(a), np.abs(x))
    assert_close(a @ a, x @ x)
    assert_close((a > 0) & (a < 4), (x > 0) & (x < 4))
    assert_close(~(a > 0), ~(x > 0))
    b = a.clone()
    c = b
    b += 1
    b *= 2
    assert_close(b, (x + 1) * 2)
    assert b is c  # in-place operators and methods return the tensor itself, as PyTorch's do
    assert b.sub_(1) is c and b.mul_(a) is c
    assert_close(rt.mul(2, a), 2 * x)
    assert_close(a.mul(np.float32(0.5)), x * 0.5)
    assert_close(a + np.int64(3), x + 3)
    # Operands that are neither tensors nor numbers: TypeError, as for any Python type.
    with pytest.raises(TypeError, match="unsupported operand"):
        a + "1"
    with pytest.raises(TypeError, match="unsupported operand"):
        [1] - a
    with pytest.raises(TypeError, match=r"mul\(\): other must be a Tensor or a number, got str"):
        a.mul("1")
    assert (a == None) is False and (a != "x") is True  # noqa: E711
    # A Python scalar never upcasts a tensor; an int tensor with a float scalar becomes float32.
    assert (rt.ones(2, dtype=rt.float16) * 2.5).dtype == rt.float16
    assert (rt.ones(2, dtype=rt.int32) + 1).dtype == rt.int32
    assert (rt.ones(2, dtype=rt.int64) * 1.5).dtype == rt.float32
    assert (rt.ones(2, dtype=rt.int64) / 2).dtype == rt.float32


def test_comparisons(device):
    a = rt.tensor([1.0, 2.0, 3.0], device=device)
    assert (a == 2).tolist() == [False, True, False]
    assert (a != a).tolist() == [False, False, False]
    assert (a >= rt.tensor([3.0, 2.0, 1.0], device=device)).tolist() == [False, True, True]
    assert rt.isnan(rt.tensor([float("nan"), 1.0])).tolist() == [True, False]


@pytest.mark.parametrize("dim, keepdim", [(None, False), (0, False), (1, True), ((0, 2), False), (-1, True)])
def test_reductions_match_numpy(dim, keepdim, device):
    x = sample((3, 4, 5))
    t = rt.tensor(x, device=device)
    axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
    assert_close(t.sum(dim, keepdim), np.sum(x, axis=axis, keepdims=keepdim), rtol=1e-10)
    assert_close(t.mean(dim, keepdim), np.mean(x, axis=axis, keepdims=keepdim), rtol=1e-10)
    assert_close(t.amax(dim, keepdim), np.amax(x, axis=axis, keepdims=keepdim))
    assert_close(rt.prod(t, dim, keepdim), np.prod(x, axis=axis, keepdims=keepdim), rtol=1e-10)
    assert_close(t.var(dim, keepdim=keepdim), np.var(x, axis=axis, ddof=1, keepdims=keepdim), rtol=1e-10)
    assert_close(t.std(dim, unbiased=False, keepdim=keepdim), np.std(x, axis=axis, keepdims=keepdim), rtol=1e-10)
    assert_close(t.norm(dim=dim, keepdim=keepdim),
                 np.sqrt(np.sum(x * x, axis=axis, keepdims=keepdim)), rtol=1e-10)


def test_max_min_argmax(device):
    x = sample((4, 6))
    t = rt.tensor(x, device=device)
    assert t.max().item() == x.max()
    values, indices = t.max(1)
    assert_close(values, x.max(1))
    assert indices.tolist() == x.argmax(1).tolist()
    r = rt.min(t, dim=0, keepdim=True)
    assert_close(r.values, x.min(0, keepdims=True))
    assert t.argmax().item() == x.argmax()
    assert_close(rt.max(t, rt.zeros_like(t)), np.maximum(x, 0))
    assert_close(t.logsumexp(1), np.log(np.exp(x).sum(1)), rtol=1e-10)
    assert_close(t.cumsum(1), np.cumsum(x, 1), rtol=1e-10)


def test_linear_algebra_and_nn(device):
    a, b = sample((2, 3, 4)), sample((4, 5))
    ta, tb = rt.tensor(a, device=device), rt.tensor(b, device=device)
    assert_close(rt.matmul(ta, tb), a @ b, rtol=1e-10)
    assert_close(ta.matmul(tb), a @ b, rtol=1e-10)
    w, bias = sample((5, 4)), sample((5,))
    assert_close(rt.linear(ta, rt.tensor(w, device=device), rt.tensor(bias, device=device)), a @ w.T + bias, rtol=1e-10)
    s = rt.softmax(ta, -1)
    e = np.exp(a - a.max(-1, keepdims=True))
    assert_close(s, e / e.sum(-1, keepdims=True), rtol=1e-10)
    assert_close(rt.log_softmax(ta, dim=1), np.log(np.exp(a) / np.exp(a).sum(1, keepdims=True)), rtol=1e-9)
    logits, target = sample((6, 4)), np.array([0, 3, 1, 1, 2, 0])
    lse = np.log(np.exp(logits).sum(1))
    expected = np.mean(lse - logits[np.arange(6), target])
    loss = rt.cross_entropy(rt.tensor(logits, device=device), rt.tensor(target, device=device))
    assert_close(loss, expected, rtol=1e-10)
    assert_close(rt.mse_loss(ta, ta * 0, reduction="sum"), np.sum(a * a), rtol=1e-10)
    y = rt.layer_norm(ta, (4,))
    z = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    assert_close(y, z, rtol=1e-8, atol=1e-9)


def test_joining_and_indexing_ops(device):
    a, b = rt.arange(6, device=device).reshape(2, 3), rt.arange(6, 12, device=device).reshape(2, 3)
    assert rt.cat([a, b]).shape == (4, 3) and rt.cat([a, b], dim=1).shape == (2, 6)
    assert rt.stack([a, b]).shape == (2, 2, 3)
    assert [p.shape for p in a.split(2, dim=1)] == [(2, 2), (2, 1)]
    assert [p.shape for p in rt.chunk(a, 3, 1)] == [(2, 1)] * 3
    idx = rt.tensor([2, 0], device=device)
    assert a.index_select(1, idx).tolist() == [[2, 0], [5, 3]]
    assert a.gather(1, rt.tensor([[0, 0], [2, 1]], device=device)).tolist() == [[0, 0], [5, 4]]
    assert rt.tril(rt.ones(3, 3, device=device)).sum().item() == 6
    values, indices = rt.topk(rt.tensor([3.0, 1.0, 4.0, 1.5], device=device), 2)
    assert values.tolist() == [4.0, 3.0] and indices.tolist() == [2, 0]
    s = rt.tensor([3, 1, 2], device=device).sort(descending=True)
    assert s.values.tolist() == [3, 2, 1] and s.indices.tolist() == [0, 2, 1]
    assert rt.where(a > 2, a, -1).tolist() == [[-1, -1, -1], [3, 4, 5]]
    assert rt.one_hot(rt.tensor([0, 2], device=device), 3).tolist() == [[1, 0, 0], [0, 0, 1]]
    assert [t.tolist() for t in a.unbind(0)] == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("fn", [
    lambda x: (x.sin() * x.exp()).sum(),
    lambda x: rt.softmax(x, 1)[:, 0],
    lambda x: (x @ x.t()).tanh(),
    lambda x: x.norm(dim=1),
    lambda x: rt.layer_norm(x, (3,)),
    lambda x: x.max(1).values,
    lambda x: rt.cross_entropy(x, rt.tensor([0, 2])),
    lambda x: (x[:, 1:] ** 2).mean(0),
], ids=["sin_exp", "softmax", "matmul_tanh", "norm", "layer_norm", "max", "cross_entropy", "slice_pow"])
def test_gradcheck(fn):
    x = rt.tensor(sample((2, 3)), requires_grad=True)
    assert rt.autograd.gradcheck(fn, (x,))
