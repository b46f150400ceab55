"""The activations (logsigmoid, glu, hardswish, hardsigmoid, selu, celu, softsign, softmin, tanhshrink,
softshrink, hardshrink, threshold, prelu), 1-d pooling, pixel (un)shuffling, padding and Unflatten
layers and the ParameterList / ParameterDict containers of nn and nn.functional: results against
numpy float64 references and float64 gradchecks on every device; and, when PyTorch is importable,
forward results (float32 and float64, default and other arguments), gradients, values at the
pieces' joins and at infinities, reprs, and the containers' registration (parameters, names,
state_dict, load_state_dict, to(), an optimizer step) side by side with PyTorch; bad input raising
the library's typed errors naming the op."""
import copy
from collections import OrderedDict

import numpy as np
import pytest

import rustytorch as rt
from rustytorch import nn
from rustytorch.nn import functional as F
from conftest import assert_close, gradcheck, t64, to_numpy

rng = np.random.default_rng(11)


def randn(*shape):
    return rng.standard_normal(shape)



def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


SELU_SCALE, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717


# ---- against numpy ----------------------------------------------------------------------------------

ACTIVATIONS = [
    ("logsigmoid", (), lambda x: -np.logaddexp(0, -x)),
    ("hardswish", (), lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("hardsigmoid", (), lambda x: np.clip(x + 3, 0, 6) / 6),
    ("selu", (), lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))),
    ("celu", (0.6,), lambda x: np.where(x > 0, x, 0.6 * np.expm1(x / 0.6))),
    ("softsign", (), lambda x: x / (1 + np.abs(x))),
    ("tanhshrink", (), lambda x: x - np.tanh(x)),
    ("softshrink", (0.7,), lambda x: np.where(x > 0.7, x - 0.7, np.where(x < -0.7, x + 0.7, 0))),
    ("hardshrink", (0.7,), lambda x: np.where(np.abs(x) > 0.7, x, 0)),
    ("threshold", (0.2, -3.0), lambda x: np.where(x > 0.2, x, -3.0)),
    ("glu", (), lambda x: x[..., :3] * np_sigmoid(x[..., 3:])),
    ("softmin", (1,), lambda x: np_softmax(-x, 1)),
]


@pytest.mark.parametrize("name, args, ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations_against_numpy(device, name, args, ref):
    x = randn(4, 6) * 3
    fn = getattr(F, name)
    assert_close(fn(t64(x, device), *args), ref(x), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda t: fn(t, *args), (randn(2, 6) * 3,), device)


def test_hardshrink_negative_lambd_shrinks_nothing(device):
    x = randn(3, 4)
    assert_close(F.hardshrink(t64(x, device), -1.0), x, rtol=0, atol=0)  # allowed, as in PyTorch


def test_prelu_against_numpy(device):
    x, w = randn(2, 3, 4), np.array([0.1, -0.5, 2.0])
    assert_close(F.prelu(t64(x, device), t64(w, device)), np.where(x > 0, x, w[:, None] * x), rtol=1e-12)
    assert_close(F.prelu(t64(x, device), t64([0.3], device)), np.where(x > 0, x, 0.3 * x), rtol=1e-12)
    assert gradcheck(F.prelu, (randn(2, 3, 2), w), device)
    assert gradcheck(F.prelu, (randn(5), [0.2]), device)
    layer = nn.PReLU(3, init=0.4, device=device, dtype=rt.float64)
    assert_close(layer.weight, [0.4] * 3, rtol=0, atol=0)
    assert_close(layer(t64(x, device)), np.where(x > 0, x, 0.4 * x), rtol=1e-12)


def np_pixel_shuffle(x, r):
    """out[..., c, h r + i, w r + j] = x[..., c r^2 + i r + j, h, w]."""
    *batch, c, h, w = x.shape
    out = np.empty((*batch, c // (r * r), h * r, w * r))
    for i in range(r):
        for j in range(r):
            out[..., i::r, j::r] = x[..., i * r + j::r * r, :, :]
    return out


def test_pixel_shuffle_against_numpy(device):
    for shape, r in [((2, 8, 3, 2), 2), ((9, 2, 3), 3), ((2, 1, 4, 3, 2), 2)]:
        x = randn(*shape)
        out = F.pixel_shuffle(t64(x, device), r)
        assert_close(out, np_pixel_shuffle(x, r), rtol=0, atol=0)
        assert_close(F.pixel_unshuffle(out, r), x, rtol=0, atol=0)
        assert_close(nn.PixelUnshuffle(r)(nn.PixelShuffle(r)(t64(x, device))), x, rtol=0, atol=0)
    assert gradcheck(lambda t: F.pixel_shuffle(t, 2), (randn(1, 4, 2, 3),), device)
    assert gradcheck(lambda t: F.pixel_unshuffle(t, 2), (randn(1, 2, 4, 2),), device)


def np_pool1d(x, k, s, p, reduce, pad_value):
    xp = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(p, p)], constant_values=pad_value)
    n = (x.shape[-1] + 2 * p - k) // s + 1
    return np.stack([reduce(xp[..., i * s:i * s + k], -1) for i in range(n)], -1)


def np_adaptive_avg_pool1d(x, size):
    length = x.shape[-1]
    return np.stack([x[..., (i * length) // size:-((-(i + 1) * length) // size)].mean(-1) for i in range(size)], -1)


def test_pool1d_against_numpy(device):
    x = randn(2, 3, 9)
    tx = t64(x, device)
    assert_close(F.avg_pool1d(tx, 3), np_pool1d(x, 3, 3, 0, np.mean, 0), rtol=1e-12)
    assert_close(F.avg_pool1d(tx, 4, 2, 2), np_pool1d(x, 4, 2, 2, np.mean, 0), rtol=1e-12)
    assert_close(F.max_pool1d(tx, 3, 2, 1), np_pool1d(x, 3, 2, 1, np.max, -np.inf), rtol=0, atol=0)
    assert_close(F.max_pool1d(tx[0], (2,)), np_pool1d(x[0], 2, 2, 0, np.max, -np.inf), rtol=0, atol=0)
    for size in (4, 9, 12):
        assert_close(F.adaptive_avg_pool1d(tx, size), np_adaptive_avg_pool1d(x, size), rtol=1e-12)
    out, index = F.max_pool1d(tx, 3, return_indices=True)
    assert index.dtype == rt.int64
    assert np.array_equal(to_numpy(index), np.argmax(x.reshape(2, 3, 3, 3), -1) + np.arange(0, 9, 3))
    assert_close(out, np.take_along_axis(x, to_numpy(index), -1), rtol=0, atol=0)
    assert_close(nn.AvgPool1d(4, 2, 2)(tx), np_pool1d(x, 4, 2, 2, np.mean, 0), rtol=1e-12)
    assert_close(nn.MaxPool1d(3, 2, 1)(tx), np_pool1d(x, 3, 2, 1, np.max, -np.inf), rtol=0, atol=0)
    assert_close(nn.AdaptiveAvgPool1d(4)(tx), np_adaptive_avg_pool1d(x, 4), rtol=1e-12)
    for fn in (lambda t: F.avg_pool1d(t, 3, 2, 1, count_include_pad=False), lambda t: F.max_pool1d(t, 2, 1),
               lambda t: F.adaptive_avg_pool1d(t, 3)):
        assert gradcheck(fn, (randn(1, 2, 7),), device)


def test_padding_and_shape_layers_against_numpy(device):
    x = randn(2, 3, 4, 5)
    tx = t64(x, device)
    cases = [
        (nn.ZeroPad1d(2), np.pad(x, [(0, 0)] * 3 + [(2, 2)])),
        (nn.ZeroPad2d((1, 2, 0, 3)), np.pad(x, [(0, 0), (0, 0), (0, 3), (1, 2)])),
        (nn.ConstantPad1d((2, 1), 3.5), np.pad(x, [(0, 0)] * 3 + [(2, 1)], constant_values=3.5)),
        (nn.ConstantPad2d(1, -1.0), np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], constant_values=-1.0)),
        (nn.ReflectionPad1d((3, 1)), np.pad(x, [(0, 0)] * 3 + [(3, 1)], mode="reflect")),
        (nn.ReflectionPad2d(2), np.pad(x, [(0, 0), (0, 0), (2, 2), (2, 2)], mode="reflect")),
        (nn.ReplicationPad1d(3), np.pad(x, [(0, 0)] * 3 + [(3, 3)], mode="edge")),
        (nn.ReplicationPad2d((1, 0, 2, 1)), np.pad(x, [(0, 0), (0, 0), (2, 1), (1, 0)], mode="edge")),
        (nn.Unflatten(1, (3, 1)), x.reshape(2, 3, 1, 4, 5)),
        (nn.Unflatten(-1, rt.Size([5, 1])), x.reshape(2, 3, 4, 5, 1)),
        (nn.Softmax2d(), np_softmax(x, 1)),
    ]
    for layer, expected in cases:
        assert_close(layer(tx), expected, rtol=1e-12, atol=0)
    assert_close(nn.Softmax2d()(tx[0]), np_softmax(x[0], 0), rtol=1e-12)


def test_inplace_forms(device):
    x = randn(3, 4) * 4
    for fn in (lambda t, inplace: F.hardswish(t, inplace), lambda t, inplace: F.hardsigmoid(t, inplace),
               lambda t, inplace: F.selu(t, inplace), lambda t, inplace: F.celu(t, 0.5, inplace),
               lambda t, inplace: F.threshold(t, 0.3, -2.0, inplace)):
        leaf = t64(x, device, requires_grad=True)
        y = leaf * 1
        out = fn(y, True)
        assert out is y
        assert_close(y.detach(), fn(t64(x, device), False), rtol=0, atol=0)
        (out * out).sum().backward()
        plain = t64(x, device, requires_grad=True)
        (fn(plain, False) ** 2).sum().backward()
        assert_close(leaf.grad, plain.grad, rtol=1e-12)
    for fn, args in ((F.selu_, ()), (F.celu_, (0.5,)), (F.threshold_, (0.3, -2.0))):
        y = t64(x, device)
        assert fn(y, *args) is y
        assert_close(y, getattr(F, fn.__name__[:-1])(t64(x, device), *args), rtol=0, atol=0)
    layer_input = t64(x, device)
    assert nn.SELU(inplace=True)(layer_input) is layer_input


# ---- reprs ------------------------------------------------------------------------------------------

REPRS = [
    ("GLU", (), {}, "GLU(dim=-1)"),
    ("LogSigmoid", (), {}, "LogSigmoid()"),
    ("Hardswish", (True,), {}, "Hardswish()"),
    ("Hardsigmoid", (), {}, "Hardsigmoid()"),
    ("SELU", (), {}, "SELU()"),
    ("SELU", (True,), {}, "SELU(inplace=True)"),
    ("CELU", (), {}, "CELU(alpha=1.0)"),
    ("CELU", (0.5, True), {}, "CELU(alpha=0.5, inplace=True)"),
    ("Softsign", (), {}, "Softsign()"),
    ("Softmin", (), {}, "Softmin(dim=None)"),
    ("Softmin", (1,), {}, "Softmin(dim=1)"),
    ("Tanhshrink", (), {}, "Tanhshrink()"),
    ("Softshrink", (), {}, "Softshrink(0.5)"),
    ("Hardshrink", (), dict(lambd=0.3), "Hardshrink(0.3)"),
    ("Threshold", (0.1, 20), {}, "Threshold(threshold=0.1, value=20)"),
    ("Threshold", (0.1, 2.0, True), {}, "Threshold(threshold=0.1, value=2.0, inplace=True)"),
    ("PReLU", (), {}, "PReLU(num_parameters=1)"),
    ("PReLU", (3, 0.1), {}, "PReLU(num_parameters=3)"),
    ("Softmax2d", (), {}, "Softmax2d()"),
    ("PixelShuffle", (2,), {}, "PixelShuffle(upscale_factor=2)"),
    ("PixelUnshuffle", (3,), {}, "PixelUnshuffle(downscale_factor=3)"),
    ("AvgPool1d", (3,), {}, "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"),
    ("AvgPool1d", (3, 2, 1, True, False), {}, "AvgPool1d(kernel_size=(3,), stride=(2,), padding=(1,))"),
    ("MaxPool1d", (3,), {}, "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)"),
    ("MaxPool1d", (3, 2, 1, 2, True, True), {},
     "MaxPool1d(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)"),
    ("AdaptiveAvgPool1d", (5,), {}, "AdaptiveAvgPool1d(output_size=5)"),
    ("Unflatten", (1, (2, 3)), {}, "Unflatten(dim=1, unflattened_size=(2, 3))"),
    ("Unflatten", (-1, [2, 3]), {}, "Unflatten(dim=-1, unflattened_size=[2, 3])"),
    ("ZeroPad1d", (2,), {}, "ZeroPad1d((2, 2))"),
    ("ZeroPad2d", ((1, 2, 3, 4),), {}, "ZeroPad2d((1, 2, 3, 4))"),
    ("ConstantPad1d", (2, 3.5), {}, "ConstantPad1d(padding=(2, 2), value=3.5)"),
    ("ConstantPad2d", (1, 0), {}, "ConstantPad2d(padding=(1, 1, 1, 1), value=0)"),
    ("ReflectionPad1d", ((1, 2),), {}, "ReflectionPad1d((1, 2))"),
    ("ReflectionPad2d", (2,), {}, "ReflectionPad2d((2, 2, 2, 2))"),
    ("ReplicationPad1d", (1,), {}, "ReplicationPad1d((1, 1))"),
    ("ReplicationPad2d", ((1, 0, 2, 1),), {}, "ReplicationPad2d((1, 0, 2, 1))"),
]


@pytest.mark.parametrize("name, args, kwargs, expected", REPRS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REPRS)])
def test_reprs(name, args, kwargs, expected):
    assert repr(getattr(nn, name)(*args, **kwargs)) == expected


def test_reprs_and_state_dicts_match_torch():
    torch = pytest.importorskip("torch")
    for name, args, kwargs, _ in REPRS + [("Unflatten", (-1, rt.Size([2, 3])), {}, None)]:
        ours = getattr(nn, name)(*args, **kwargs)
        theirs = getattr(torch.nn, name)(*(torch.Size(a) if isinstance(a, rt.Size) else a for a in args), **kwargs)
        assert repr(ours) == repr(theirs).replace("torch.", "rustytorch."), name
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
               [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()], name


# ---- side by side with PyTorch ----------------------------------------------------------------------

# (id, call(F, lib, *tensors), input shapes). Inputs are standard normal times 3, so that every piece
# of the piecewise functions is reached.
FUNCTIONAL = [
    ("logsigmoid", lambda F, lib, x: F.logsigmoid(x), [(3, 5)]),
    ("glu", lambda F, lib, x: F.glu(x), [(3, 6)]),
    ("glu_dim", lambda F, lib, x: F.glu(x, dim=1), [(2, 4, 3)]),
    ("hardswish", lambda F, lib, x: F.hardswish(x), [(4, 6)]),
    ("hardsigmoid", lambda F, lib, x: F.hardsigmoid(x), [(4, 6)]),
    ("selu", lambda F, lib, x: F.selu(x), [(4, 6)]),
    ("celu", lambda F, lib, x: F.celu(x), [(4, 6)]),
    ("celu_alpha", lambda F, lib, x: F.celu(x, alpha=0.6), [(4, 6)]),
    ("softsign", lambda F, lib, x: F.softsign(x), [(4, 6)]),
    ("softmin", lambda F, lib, x: F.softmin(x, dim=1), [(3, 5)]),
    ("softmin_dtype", lambda F, lib, x: F.softmin(x, 0, dtype=lib.float64), [(3, 5)]),
    ("tanhshrink", lambda F, lib, x: F.tanhshrink(x), [(4, 6)]),
    ("softshrink", lambda F, lib, x: F.softshrink(x), [(4, 6)]),
    ("softshrink_lambd", lambda F, lib, x: F.softshrink(x, lambd=1.7), [(4, 6)]),
    ("hardshrink", lambda F, lib, x: F.hardshrink(x), [(4, 6)]),
    ("hardshrink_lambd", lambda F, lib, x: F.hardshrink(x, 2.0), [(4, 6)]),
    ("threshold", lambda F, lib, x: F.threshold(x, 0.5, -1.5), [(4, 6)]),
    ("prelu_channels", lambda F, lib, x, w: F.prelu(x, w), [(2, 3, 4), (3,)]),
    ("prelu_shared", lambda F, lib, x, w: F.prelu(x, w), [(5, 2, 2), (1,)]),
    ("prelu_1d", lambda F, lib, x, w: F.prelu(x, w), [(5,), (1,)]),
    ("pixel_shuffle", lambda F, lib, x: F.pixel_shuffle(x, 2), [(2, 8, 3, 2)]),
    ("pixel_shuffle_unbatched", lambda F, lib, x: F.pixel_shuffle(x, 3), [(9, 2, 1)]),
    ("pixel_unshuffle", lambda F, lib, x: F.pixel_unshuffle(x, 2), [(2, 3, 4, 6)]),
    ("pixel_unshuffle_5d", lambda F, lib, x: F.pixel_unshuffle(x, 3), [(2, 1, 2, 3, 6)]),
    ("avg_pool1d", lambda F, lib, x: F.avg_pool1d(x, 3), [(2, 3, 10)]),
    ("avg_pool1d_args", lambda F, lib, x: F.avg_pool1d(x, 4, stride=3, padding=2, ceil_mode=True,
                                                        count_include_pad=False), [(2, 3, 10)]),
    ("avg_pool1d_unbatched", lambda F, lib, x: F.avg_pool1d(x, (2,), 1), [(3, 7)]),
    ("max_pool1d", lambda F, lib, x: F.max_pool1d(x, 2), [(2, 3, 9)]),
    ("max_pool1d_args", lambda F, lib, x: F.max_pool1d(x, 3, stride=2, padding=1, dilation=2, ceil_mode=True),
     [(2, 3, 10)]),
    ("max_pool1d_indices", lambda F, lib, x: F.max_pool1d(x, 3, 2, 1, return_indices=True), [(3, 11)]),
    ("adaptive_avg_pool1d", lambda F, lib, x: F.adaptive_avg_pool1d(x, 4), [(2, 3, 10)]),
    ("adaptive_avg_pool1d_up", lambda F, lib, x: F.adaptive_avg_pool1d(x, (7,)), [(3, 5)]),
]
# PyTorch computes these gradients with float32 constants (1/6 for hardsigmoid, alpha and 1/alpha
# for celu), so its float64 results are off by about 1e-8.
LOOSE_GRADIENTS = {"hardsigmoid", "celu", "celu_alpha", "Hardsigmoid", "CELU"}


def _run(lib, call, arrays, dtype, requires_grad=False):
    inputs = [lib.tensor(a, dtype=getattr(lib, dtype), requires_grad=requires_grad) for a in arrays]
    out = call(lib.nn.functional, lib, *inputs)
    return inputs, out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("case", FUNCTIONAL, ids=[c[0] for c in FUNCTIONAL])
def test_functional_matches_torch(case):
    torch = pytest.importorskip("torch")
    name, call, shapes = case
    arrays = [randn(*s) * 3 for s in shapes]
    for dtype, tol in (("float32", 1e-6), ("float64", 1e-12)):
        (_, ours), (_, theirs) = _run(rt, call, arrays, dtype), _run(torch, call, arrays, dtype)
        for mine, ref in zip(ours, theirs):
            assert mine.dtype == getattr(rt, str(ref.dtype).split(".")[-1]), name
            assert_close(mine, ref.numpy(), rtol=tol, atol=tol)
    (mine_in, ours), (ref_in, theirs) = (_run(lib, call, arrays, "float64", True) for lib in (rt, torch))
    g = randn(*theirs[0].shape)
    ours[0].backward(t64(g))
    theirs[0].backward(torch.tensor(g))
    tol = 1e-7 if name in LOOSE_GRADIENTS else 1e-12
    for mine, ref in zip(mine_in, ref_in):
        assert_close(mine.grad, ref.grad.numpy(), rtol=tol, atol=tol)


def test_joins_and_infinities_match_torch():
    """Values and gradients where the pieces meet (0, +-3, +-lambd, the threshold) and at
    infinities; NaN inputs are left out (PyTorch's own NaN gradients differ between its
    vectorized and scalar loops)."""
    torch = pytest.importorskip("torch")
    inf = float("inf")
    points = [0.0, -0.0, 3.0, -3.0, 0.5, -0.5, 1.5, -1.5, 0.25, 30.0, -30.0, 800.0, -800.0, inf, -inf]
    cases = [
        ("logsigmoid", lambda F, x: F.logsigmoid(x)),
        ("hardswish", lambda F, x: F.hardswish(x)),
        ("hardsigmoid", lambda F, x: F.hardsigmoid(x)),
        ("selu", lambda F, x: F.selu(x)),
        ("celu", lambda F, x: F.celu(x, 0.5)),
        ("softsign", lambda F, x: F.softsign(x)),
        ("softshrink", lambda F, x: F.softshrink(x, 1.5)),
        ("hardshrink", lambda F, x: F.hardshrink(x)),
        ("threshold", lambda F, x: F.threshold(x, 0.25, 7.0)),
        ("prelu", lambda F, x: F.prelu(x, x.new_full((1,), 0.2))),
    ]
    for name, call in cases:
        for dtype in ("float32", "float64"):
            values = points[:-1] if name == "hardswish" else points  # PyTorch: hardswish(-inf) = nan, ours 0
            mine, ref = t64(values, requires_grad=True), torch.tensor(values, dtype=torch.float64, requires_grad=True)
            mine_in, ref_in = mine.to(getattr(rt, dtype)), ref.to(getattr(torch, dtype))
            out, expected = call(F, mine_in), call(torch.nn.functional, ref_in)
            assert_close(out, expected.detach().numpy(), rtol=1e-6, atol=0)
            out.sum().backward()
            expected.sum().backward()
            # selu and celu far below 0: the library's expm1 gradient is worked out from its result
            # (exp(x) = expm1(x) + 1), so it is exp(x) only to within the result's rounding
            assert_close(mine.grad, ref.grad.numpy(), rtol=1e-6, atol=1e-15 if dtype == "float64" else 1e-7)


MODULES = [
    ("GLU", (1,), {}, (2, 4, 3)),
    ("LogSigmoid", (), {}, (3, 4)),
    ("Hardswish", (), {}, (3, 4)),
    ("Hardsigmoid", (), {}, (3, 4)),
    ("SELU", (), {}, (3, 4)),
    ("CELU", (0.4,), {}, (3, 4)),
    ("Softsign", (), {}, (3, 4)),
    ("Softmin", (), dict(dim=0), (3, 4)),
    ("Tanhshrink", (), {}, (3, 4)),
    ("Softshrink", (0.8,), {}, (3, 4)),
    ("Hardshrink", (), dict(lambd=0.2), (3, 4)),
    ("Threshold", (0.1, 2.0), {}, (3, 4)),
    ("PReLU", (), {}, (2, 3, 4)),
    ("PReLU", (3,), dict(init=-0.1), (2, 3, 4)),
    ("Softmax2d", (), {}, (2, 3, 2, 2)),
    ("Softmax2d", (), {}, (3, 2, 4)),
    ("PixelShuffle", (2,), {}, (1, 8, 2, 3)),
    ("PixelUnshuffle", (2,), {}, (1, 2, 4, 6)),
    ("AvgPool1d", (3, 2, 1), {}, (2, 3, 8)),
    ("MaxPool1d", (2,), {}, (2, 3, 8)),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 8)),
    ("Unflatten", (1, (2, 3)), {}, (2, 6, 2)),
    ("ZeroPad1d", (2,), {}, (2, 3, 4)),
    ("ZeroPad2d", ((1, 2, 0, 3),), {}, (1, 2, 3, 4)),
    ("ConstantPad1d", ((2, 1), 3.5), {}, (2, 3, 4)),
    ("ConstantPad2d", (1, -1.0), {}, (1, 2, 3, 4)),
    ("ReflectionPad1d", ((2, 1),), {}, (2, 3, 4)),
    ("ReflectionPad2d", (1,), {}, (1, 2, 3, 4)),
    ("ReplicationPad1d", (3,), {}, (2, 3, 4)),
    ("ReplicationPad2d", ((1, 0, 2, 1),), {}, (1, 2, 3, 4)),
]


@pytest.mark.parametrize("name, args, kwargs, shape", MODULES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_modules_match_torch(name, args, kwargs, shape):
    torch = pytest.importorskip("torch")
    ours, theirs = getattr(nn, name)(*args, **kwargs).double(), getattr(torch.nn, name)(*args, **kwargs).double()
    x = randn(*shape) * 3
    mine, ref = t64(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, expected = ours(mine), theirs(ref)
    assert_close(out, expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = randn(*expected.shape)
    out.backward(t64(g))
    expected.backward(torch.tensor(g))
    tol = 1e-7 if name in LOOSE_GRADIENTS else 1e-12
    assert_close(mine.grad, ref.grad.numpy(), rtol=tol, atol=tol)
    for (k, p), (k2, q) in zip(ours.named_parameters(), theirs.named_parameters(), strict=True):
        assert k == k2
        assert_close(p, q.detach().numpy(), rtol=0, atol=0)
        assert_close(p.grad, q.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_softmin_implicit_dim_warns_like_softmax():
    x = t64(randn(2, 3))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        assert_close(nn.Softmin()(x), F.softmin(x, 1), rtol=0, atol=0)


# ---- ParameterList and ParameterDict ----------------------------------------------------------------

def _containers_model(lib):
    """A Linear next to a ParameterList and a ParameterDict, built the same way from either library."""
    model = lib.nn.Module()
    model.linear = lib.nn.Linear(3, 2)
    model.plist = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2, 3)), lib.zeros(3)])
    model.plist.append(lib.full((2,), 0.5))
    model.plist.extend([lib.nn.Parameter(lib.ones(1))])
    model.pdict = lib.nn.ParameterDict({"scale": lib.ones(2), "bias": lib.nn.Parameter(lib.zeros(2))})
    model.pdict["extra"] = lib.full((3,), 2.0)
    model.pdict.update(OrderedDict([("z", lib.ones(1)), ("a", lib.ones(1))]))
    return model


def _loss(model, x):
    hidden = model.linear(x * model.plist[1]) * model.pdict["scale"] + model.pdict["bias"]
    hidden = hidden + (model.plist[0].sum() + model.plist[-1].sum()) * model.plist[2]
    return (hidden * hidden).sum() + model.pdict["extra"].sum() * model.pdict["z"].sum() + model.pdict["a"].sum()


def test_parameter_containers_register_like_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _containers_model(rt), _containers_model(torch)
    names = [k for k, _ in theirs.named_parameters()]
    assert names == ["linear.weight", "linear.bias", "plist.0", "plist.1", "plist.2", "plist.3", "pdict.bias",
                     "pdict.scale", "pdict.extra", "pdict.z", "pdict.a"]  # a plain dict is added in sorted key order
    assert [k for k, _ in ours.named_parameters()] == names
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert len(list(ours.parameters())) == len(names)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ours.plist)
    assert repr(ours) == repr(theirs).replace("torch.", "rustytorch.")
    # list and dict behaviour
    assert len(ours.plist) == 4 and ours.plist[-1] is ours.plist[3] and ours.plist[1] is list(ours.plist)[1]
    assert [tuple(p.shape) for p in ours.plist[1:3]] == [(3,), (2,)] and isinstance(ours.plist[1:3], nn.ParameterList)
    assert list(ours.pdict) == list(ours.pdict.keys()) == list(theirs.pdict.keys())
    assert [k for k, _ in ours.pdict.items()] == list(theirs.pdict.keys()) and "scale" in ours.pdict
    assert ours.pdict.get("missing") is None and ours.pdict.get("a") is ours.pdict["a"]
    popped = ours.pdict.pop("a")
    theirs.pdict.pop("a")
    assert tuple(popped.shape) == (1,) and "a" not in ours.pdict and len(ours.pdict) == len(theirs.pdict) == 4
    assert list(ours.state_dict()) == list(theirs.state_dict())
    del ours.pdict["z"], theirs.pdict["z"]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.plist[1] = rt.full((3,), 2.0)
    theirs.plist[1] = torch.full((3,), 2.0)
    assert isinstance(ours.plist[1], nn.Parameter) and list(ours.state_dict()) == list(theirs.state_dict())
    # Objects other than tensors are kept, not registered.
    for model in (ours, theirs):
        model.plist.append("note")
    assert ours.plist[4] == "note" and list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours.plist) == repr(theirs.plist).replace("torch.", "rustytorch.")
    ours.pdict.clear()
    assert len(ours.pdict) == 0 and not [k for k in ours.state_dict() if k.startswith("pdict")]


def test_parameter_containers_load_state_dict_and_train_like_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = _containers_model(rt).double(), _containers_model(torch).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, dtype=torch.float64))
    result = ours.load_state_dict({k: rt.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (k, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        assert p.dtype == rt.float64, k
        assert_close(p, q.detach().numpy(), rtol=0, atol=0)
    # the round trip through our own state_dict, into a fresh model
    fresh = _containers_model(rt).double()
    fresh.load_state_dict(ours.state_dict())
    for p, q in zip(fresh.parameters(), ours.parameters(), strict=True):
        assert_close(p, q, rtol=0, atol=0)
    # two Adam steps over model.parameters()
    opt_ours = rt.optim.Adam(ours.parameters(), lr=0.05)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=0.05)
    x = randn(4, 3)
    for _ in range(2):
        for opt, model, lib in ((opt_ours, ours, rt), (opt_theirs, theirs, torch)):
            opt.zero_grad()
            _loss(model, lib.tensor(x)).backward()
            opt.step()
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert_close(p, q.detach().numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(rt.ShapeError, match="plist.0"):
        fresh.load_state_dict({**ours.state_dict(), "plist.0": rt.zeros(3, 3, dtype=rt.float64)})


def test_parameter_containers_to_device_and_dtype(device):
    model = _containers_model(rt)
    plist_params = list(model.plist)
    model.to(device).double()
    assert all(p is q for p, q in zip(model.plist, plist_params))  # converted in place
    for k, p in model.named_parameters():
        assert p.dtype == rt.float64 and p.device.type == device, k
    loss = _loss(model, t64(randn(4, 3), device))
    loss.backward()
    assert all(p.grad is not None and p.grad.device.type == device for p in model.parameters())
    copied = copy.deepcopy(model)
    assert [k for k, _ in copied.named_parameters()] == [k for k, _ in model.named_parameters()]
    assert copied.plist[0] is not model.plist[0] and list(copied.pdict.keys()) == list(model.pdict.keys())


def test_parameter_container_errors():
    plist, pdict = nn.ParameterList([rt.ones(2)]), nn.ParameterDict({"w": rt.ones(2)})
    with pytest.raises(IndexError, match="index 1 is out of range"):
        plist[1]
    with pytest.raises(IndexError, match="index -2 is out of range"):
        plist[-2] = rt.ones(1)
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable"):
        plist.extend(rt.ones(3))
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        plist(rt.ones(2))
    with pytest.raises(RuntimeError, match="ParameterDict should not be called"):
        pdict(rt.ones(2))
    with pytest.raises(TypeError, match="ParameterDict keys must be strings, got int"):
        pdict[0] = rt.ones(1)
    with pytest.raises(KeyError):
        pdict["missing"]
    with pytest.raises(KeyError):
        del pdict["missing"]
    with pytest.raises(KeyError, match="can't be empty or contain '.'"):
        pdict["a.b"] = rt.ones(1)
    assert list(pdict.keys()) == ["w"] and list(pdict.state_dict()) == ["w"]
    with pytest.raises(TypeError, match="cannot assign 'builtins.int' as parameter '0'"):
        plist[0] = 3


# ---- bad input --------------------------------------------------------------------------------------

def test_bad_input_raises_typed_errors_naming_the_op():
    x = rt.zeros(1, 4, 3, 3)
    cases = [
        (rt.ShapeError, r"^glu: halving dimension must be even, but dim 1 of the input of shape \[2, 3\] is size 3",
         lambda: F.glu(rt.zeros(2, 3), 1)),
        (rt.ShapeError, "^glu: does not support scalars", lambda: F.glu(rt.zeros(()))),
        (rt.IndexError, "out of range", lambda: F.glu(rt.zeros(2, 4), 2)),
        (rt.ShapeError, "^glu: halving dimension must be even", lambda: nn.GLU()(rt.zeros(2, 5))),
        (rt.ShapeError, r"^pixel_shuffle: the 4 channels of the input of shape \[1, 4, 3, 3\] are not divisible by "
                        r"upscale_factor\^2 = 9", lambda: F.pixel_shuffle(x, 3)),
        (rt.ShapeError, r"^pixel_shuffle: expected an input of at least 3 dims", lambda: F.pixel_shuffle(x[0, 0], 1)),
        (rt.ValueError, "^pixel_shuffle: expected a positive upscale_factor, got 0", lambda: F.pixel_shuffle(x, 0)),
        (rt.ShapeError, r"^pixel_unshuffle: the height and width of the input of shape \[1, 4, 3, 3\] are not "
                        "divisible by downscale_factor = 2", lambda: nn.PixelUnshuffle(2)(x)),
        (rt.ValueError, "^pixel_unshuffle: expected a positive downscale_factor", lambda: F.pixel_unshuffle(x, -1)),
        (rt.ShapeError, r"^prelu: weight of shape \[3\] has 3 values, but the input of shape \[1, 4, 3, 3\] has 4 "
                        "channels", lambda: F.prelu(x, rt.ones(3))),
        (rt.ShapeError, r"^prelu: expected weight to be a scalar or 1-d tensor, got shape \[4, 1\]",
         lambda: F.prelu(x, rt.ones(4, 1))),
        (rt.ShapeError, "^prelu: weight of shape", lambda: nn.PReLU(3)(rt.ones(5))),
        (rt.ValueError, "^softshrink: lambd must be nonnegative, got -0.5", lambda: F.softshrink(x, -0.5)),
        (rt.ValueError, "^celu: alpha cannot be 0", lambda: nn.CELU(0.0)(x)),
        (rt.ShapeError, r"^avg_pool1d: expected a 2-d \(C, L\) or 3-d \(N, C, L\) input, got shape \[1, 4, 3, 3\]",
         lambda: F.avg_pool1d(x, 2)),
        (rt.ShapeError, r"^max_pool1d: expected a 2-d .* got shape \[3\]", lambda: nn.MaxPool1d(2)(rt.zeros(3))),
        (rt.ShapeError, "^adaptive_avg_pool1d: expected a 2-d", lambda: nn.AdaptiveAvgPool1d(2)(x)),
        (rt.ValueError, r"^max_pool1d: kernel_size must have 1 value, got \(2, 2\)",
         lambda: F.max_pool1d(x[0], (2, 2))),
        (rt.ShapeError, r"^Softmax2d: expected a 3-d or 4-d input, got shape \[2, 3\]",
         lambda: nn.Softmax2d()(rt.zeros(2, 3))),
        (rt.ValueError, r"^pad: reflect padding \(3, 3\) must be smaller than the size 3",
         lambda: nn.ReflectionPad2d(3)(x)),
        (TypeError, "^Unflatten: unflattened_size must be a tuple of ints, got 6", lambda: nn.Unflatten(1, 6)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
