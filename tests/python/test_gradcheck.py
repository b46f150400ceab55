"""Float64 finite-difference gradient checks from Python for the differentiable ops: the pointwise
table, ops with parameters, reductions, linear algebra, convolution and pooling, nn functions,
losses, joining, indexing and views."""
import numpy as np
import pytest

import rustytorch as rt
from rustytorch.nn import functional as F

rng = np.random.default_rng(11)


def leaf(*shape, positive=False, low=None):
    x = rng.standard_normal(shape)
    if positive:
        x = np.abs(x) + 0.5
    return rt.tensor(x, dtype=rt.float64, requires_grad=True)


UNARY = ["neg", "abs", "square", "relu", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
         "sigmoid", "tanh", "silu", "erf", "erfc", "atan", "sinh", "cosh", "asinh", "exp2"]
POSITIVE = {"log", "log1p", "sqrt", "rsqrt", "reciprocal", "log2", "log10"}
UNARY += sorted(POSITIVE - set(UNARY))
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "hypot", "logaddexp"]


@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    assert rt.autograd.gradcheck(getattr(rt, name), (leaf(2, 3, positive=name in POSITIVE),))


@pytest.mark.parametrize("name", BINARY)
def test_binary_with_broadcast(name):
    a, b = leaf(2, 3, positive=name == "pow"), leaf(3, positive=name == "pow")
    assert rt.autograd.gradcheck(getattr(rt, name), (a, b))


CASES = {
    "gelu": (lambda x: F.gelu(x), [(2, 3)]),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [(2, 3)]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [(2, 3)]),
    "elu": (lambda x: F.elu(x), [(2, 3)]),
    "softplus": (lambda x: F.softplus(x, 2.0), [(2, 3)]),
    "clamp": (lambda x: x.clamp(-0.5, 0.5), [(2, 3)]),
    "lerp": (lambda a, b: rt.lerp(a, b, 0.3), [(2, 3), (2, 3)]),
    "addcmul": (lambda x, a, b: rt.addcmul(x, a, b, value=0.5), [(3,), (2, 3), (3,)]),
    "addcdiv": (lambda x, a, b: rt.addcdiv(x, a, b * b + 1, value=0.5), [(3,), (2, 3), (3,)]),
    "where": (lambda a, b: rt.where(a > 0, a, b), [(2, 3), (3,)]),
    "masked_fill": (lambda a: a.masked_fill(a > 0.5, 2.0), [(2, 3)]),
    "sum": (lambda x: x.sum(1), [(2, 3)]),
    "mean_keepdim": (lambda x: x.mean((0, 2), keepdim=True), [(2, 3, 2)]),
    "prod": (lambda x: x.prod(0), [(3, 2)]),
    "amax": (lambda x: x.amax(1), [(2, 4)]),
    "max_dim": (lambda x: x.max(0).values, [(3, 2)]),
    "var": (lambda x: x.var(1), [(2, 4)]),
    "std": (lambda x: x.std(), [(2, 4)]),
    "norm": (lambda x: x.norm(dim=0), [(3, 2)]),
    "logsumexp": (lambda x: x.logsumexp(1), [(2, 3)]),
    "cumsum": (lambda x: x.cumsum(1), [(2, 3)]),
    "matmul_batched": (lambda a, b: a @ b, [(2, 2, 3), (3, 2)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 3), (2, 3), (2,)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1), [(1, 2, 3, 3), (2, 2, 2, 2), (2,)]),
    "conv2d_groups": (lambda x, w: F.conv2d(x, w, None, stride=2, groups=2), [(1, 2, 4, 4), (2, 1, 2, 2)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [(1, 1, 4, 4)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, stride=1), [(1, 1, 3, 3)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 1)), [(1, 1, 3, 3)]),
    "softmax": (lambda x: F.softmax(x, 0), [(3, 2)]),
    "log_softmax": (lambda x: F.log_softmax(x, 1), [(2, 3)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3,), w, b), [(2, 3), (3,), (3,)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(4, 2), (2,), (2,)]),
    "embedding": (lambda w: F.embedding(rt.tensor([[0, 2], [2, 1]]), w), [(3, 2)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, rt.tensor([1, 0, 2]), label_smoothing=0.2), [(3, 3)]),
    "nll_loss": (lambda x: F.nll_loss(F.log_softmax(x, 1), rt.tensor([1, 0]), reduction="sum"), [(2, 3)]),
    "mse_loss": (lambda a, b: F.mse_loss(a, b), [(2, 3), (2, 3)]),
    "bce_with_logits": (lambda a: F.binary_cross_entropy_with_logits(a, rt.tensor([[0.0, 1.0, 0.5], [1.0, 0.2, 0.0]], dtype=rt.float64)),
                        [(2, 3)]),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    [(1, 3, 2), (1, 3, 2), (1, 3, 2)]),
    "cat_stack": (lambda a, b: rt.cat([a, rt.stack([b, b])], 0), [(1, 3), (3,)]),
    "split": (lambda a: a.split(1, 1)[1] * 2, [(2, 3)]),
    "index_select": (lambda a: a.index_select(1, rt.tensor([2, 0, 2])), [(2, 3)]),
    "gather": (lambda a: a.gather(1, rt.tensor([[0, 0], [2, 1]])), [(2, 3)]),
    "scatter_add": (lambda a, s: a.scatter_add(0, rt.tensor([[1, 0, 1]]), s), [(2, 3), (1, 3)]),
    "index_add": (lambda a, s: a.index_add(0, rt.tensor([1, 1]), s), [(2, 3), (2, 3)]),
    "advanced_index": (lambda a: a[[0, 1, 1], [2, 0, 2]], [(2, 3)]),
    "views": (lambda a: a.permute(2, 0, 1).diagonal(0, 1, 2).expand(2, 2, 2).flatten(), [(2, 2, 2)]),
    "tril": (lambda a: a.tril(), [(3, 3)]),
    "topk": (lambda a: a.topk(2).values, [(2, 4)]),
    "sort": (lambda a: a.sort(1, descending=True).values, [(2, 3)]),
    "to_dtype": (lambda a: (a.float().double() * 1.0), [(3,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op(name):
    fn, shapes = CASES[name]
    inputs = tuple(leaf(*s) for s in shapes)
    # A float32 round trip needs a wider finite-difference step and tolerance.
    tol = dict(eps=1e-3, atol=1e-3, rtol=1e-2) if name == "to_dtype" else {}
    assert rt.autograd.gradcheck(fn, inputs, **tol)


def test_gradcheck_catches_a_wrong_gradient():
    class WrongSquare(rt.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 * g * x

    with pytest.raises(RuntimeError, match="analytic"):
        rt.autograd.gradcheck(WrongSquare.apply, (leaf(3),))
    assert not rt.autograd.gradcheck(WrongSquare.apply, (leaf(3),), raise_exception=False)
