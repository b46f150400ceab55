"""nn layers, functional ops and initializers: reprs and state_dict keys (PyTorch's), forward results
against numpy float64 references, float64 gradchecks on every device, in-place forms, dropout
variants, init statistics, typed errors, and (when PyTorch is importable) the same calls side by
side with PyTorch."""
import math
import warnings

import numpy as np
import re

import pytest

import rustytorch as rt
from rustytorch import nn
from rustytorch.nn import functional as F
from conftest import assert_close, gradcheck, t64, to_numpy

rng = np.random.default_rng(7)


def randn(*shape):
    return rng.standard_normal(shape)



# ---- reprs and state_dict keys ----------------------------------------------------------------

LAYERS = [
    ("Conv1d", (3, 8, 3), {}, "Conv1d(3, 8, kernel_size=(3,), stride=(1,))", ["weight", "bias"]),
    ("Conv1d", (3, 8, 3), dict(padding="same", bias=False, padding_mode="reflect", dilation=2),
     "Conv1d(3, 8, kernel_size=(3,), stride=(1,), padding=same, dilation=(2,), bias=False, padding_mode=reflect)",
     ["weight"]),
    ("Conv2d", (3, 8, 3), dict(padding=1), "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))",
     ["weight", "bias"]),
    ("Conv2d", (4, 8, (3, 2)), dict(stride=2, padding="valid", groups=2),
     "Conv2d(4, 8, kernel_size=(3, 2), stride=(2, 2), padding=valid, groups=2)", ["weight", "bias"]),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2, bias=False),
     "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2, "
     "bias=False)", ["weight"]),
    ("ConvTranspose1d", (4, 6, 3), dict(stride=2, dilation=2),
     "ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), dilation=(2,))", ["weight", "bias"]),
    ("GroupNorm", (2, 4), {}, "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)", ["weight", "bias"]),
    ("GroupNorm", (2, 4), dict(affine=False), "GroupNorm(2, 4, eps=1e-05, affine=False, bias=False)", []),
    ("RMSNorm", (8,), {}, "RMSNorm((8,), eps=None, elementwise_affine=True)", ["weight"]),
    ("RMSNorm", ([2, 3],), dict(eps=1e-6, elementwise_affine=False), "RMSNorm((2, 3), eps=1e-06, "
     "elementwise_affine=False)", []),
    ("LayerNorm", (8,), {}, "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)", ["weight", "bias"]),
    ("BatchNorm2d", (4,), {}, "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
     "track_running_stats=True)", ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]),
    ("BatchNorm1d", (3,), dict(affine=False, track_running_stats=False), "BatchNorm1d(3, eps=1e-05, momentum=0.1, "
     "affine=False, bias=False, track_running_stats=False)", []),
    ("LeakyReLU", (0.2, True), {}, "LeakyReLU(negative_slope=0.2, inplace=True)", []),
    ("LeakyReLU", (), {}, "LeakyReLU(negative_slope=0.01)", []),
    ("ELU", (), {}, "ELU(alpha=1.0)", []),
    ("Softplus", (), {}, "Softplus(beta=1.0, threshold=20.0)", []),
    ("ReLU", (), {}, "ReLU()", []),
    ("ReLU", (), dict(inplace=True), "ReLU(inplace=True)", []),
    ("SiLU", (True,), {}, "SiLU(inplace=True)", []),
    ("Hardtanh", (), {}, "Hardtanh(min_val=-1.0, max_val=1.0)", []),
    ("ReLU6", (), {}, "ReLU6()", []),
    ("GELU", (), {}, "GELU(approximate='none')", []),
    ("Softmax", (), dict(dim=1), "Softmax(dim=1)", []),
    ("Dropout", (0.1,), {}, "Dropout(p=0.1, inplace=False)", []),
    ("Dropout2d", (), {}, "Dropout2d(p=0.5, inplace=False)", []),
    ("Upsample", (), dict(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')", []),
    ("Upsample", (), dict(size=(4, 5), mode="bilinear", align_corners=True), "Upsample(size=(4, 5), mode='bilinear')",
     []),
    ("UpsamplingBilinear2d", (), dict(scale_factor=2), "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')", []),
    ("Embedding", (10, 3), dict(padding_idx=0), "Embedding(10, 3, padding_idx=0)", ["weight"]),
    ("MaxPool2d", (2,), {}, "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)", []),
    ("AvgPool2d", (3, 2, 1), {}, "AvgPool2d(kernel_size=3, stride=2, padding=1)", []),
    ("AdaptiveAvgPool2d", ((2, 3),), {}, "AdaptiveAvgPool2d(output_size=(2, 3))", []),
    ("Flatten", (), {}, "Flatten(start_dim=1, end_dim=-1)", []),
    ("NLLLoss", (), {}, "NLLLoss()", []),
    ("KLDivLoss", (), dict(reduction="batchmean"), "KLDivLoss()", []),
    ("SmoothL1Loss", (), dict(beta=0.5), "SmoothL1Loss()", []),
    ("BCEWithLogitsLoss", (), dict(pos_weight=rt.ones(3)), "BCEWithLogitsLoss()", ["pos_weight"]),
    ("CrossEntropyLoss", (), dict(weight=rt.ones(3)), "CrossEntropyLoss()", ["weight"]),
]


@pytest.mark.parametrize("name, args, kwargs, expected_repr, keys", LAYERS, ids=[f"{c[0]}-{i}" for i, c in
                                                                                  enumerate(LAYERS)])
def test_repr_and_state_dict_keys(name, args, kwargs, expected_repr, keys):
    layer = getattr(nn, name)(*args, **kwargs)
    assert repr(layer) == expected_repr
    assert list(layer.state_dict()) == keys


def test_reprs_and_parameter_shapes_match_torch():
    torch = pytest.importorskip("torch")
    for name, args, kwargs, _, _ in LAYERS:
        torch_kwargs = {k: torch.ones(3) if isinstance(v, rt.Tensor) else v for k, v in kwargs.items()}
        ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **torch_kwargs)
        mine, expected = repr(ours), repr(theirs)
        if "bias=" in mine and "bias=" not in expected:  # PyTorch before 2.15 prints no bias field
            mine = re.sub(r", bias=(True|False)", "", mine)
        assert mine == expected, name
        assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
               [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()], name


# ---- convolutions -------------------------------------------------------------------------------

def np_conv1d(x, w, b, stride=1, padding=(0, 0), dilation=1, groups=1):
    """Cross-correlation of x [N, C, L] with w [O, C / groups, K]; padding (left, right)."""
    x = np.pad(x, ((0, 0), (0, 0), padding))
    n, c, length = x.shape
    o, cg, k = w.shape
    out_len = (length - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, out_len))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(out_len):
            window = x[:, g * cg:(g + 1) * cg, i * stride:i * stride + dilation * (k - 1) + 1:dilation]
            out[:, oc, i] = (window * w[oc]).sum((1, 2))
    return out + (0 if b is None else b[None, :, None])


def np_conv_transpose2d(x, w, b, stride, padding, output_padding, dilation, groups):
    """Each input pixel scatters its kernel (w [C_in, C_out / groups, kh, kw]) into the output."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    oh, ow = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1, (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    full = np.zeros((n, cog * groups, max(ph + oh, (h - 1) * sh + dh * (kh - 1) + 1),
                     max(pw + ow, (wd - 1) * sw + dw * (kw - 1) + 1)))
    cg = cin // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,co->nohw", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg, :, i, j])
                full[:, g * cog:(g + 1) * cog, i * dh:i * dh + (h - 1) * sh + 1:sh,
                     j * dw:j * dw + (wd - 1) * sw + 1:sw] += contrib
    out = full[:, :, ph:ph + oh, pw:pw + ow]
    return out + (0 if b is None else b[None, :, None, None])


@pytest.mark.parametrize("stride, padding, output_padding, dilation, groups", [
    ((1, 1), (0, 0), (0, 0), (1, 1), 1), ((2, 2), (1, 1), (1, 1), (1, 1), 1), ((2, 3), (0, 1), (1, 2), (2, 1), 1),
    ((2, 2), (0, 0), (0, 0), (1, 1), 2)])
def test_conv_transpose2d(device, stride, padding, output_padding, dilation, groups):
    x, w, b = randn(2, 4, 3, 4), randn(4, 3, 3, 2), randn(3 * groups)
    out = F.conv_transpose2d(t64(x, device), t64(w, device), t64(b, device), stride, padding, output_padding, groups,
                             dilation)
    assert_close(out, np_conv_transpose2d(x, w, b, stride, padding, output_padding, dilation, groups), rtol=1e-10,
                 atol=1e-12)
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation),
                     (randn(1, 4, 2, 3), w, b), device)


def test_conv_transpose_layers(device):
    layer = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2).double().to(device)
    x = t64(randn(2, 4, 5, 4), device)
    w, b = to_numpy(layer.weight), to_numpy(layer.bias)
    expected = np_conv_transpose2d(to_numpy(x), w, b, (2, 2), (1, 1), (0, 0), (1, 1), 2)
    assert_close(layer(x), expected, rtol=1e-10, atol=1e-12)
    # output_size picks the output padding: 10 x 8 needs (1, 1).
    out = layer(x, output_size=(10, 8))
    assert out.shape == (2, 6, 10, 8)
    assert_close(out, np_conv_transpose2d(to_numpy(x), w, b, (2, 2), (1, 1), (1, 1), (1, 1), 2), rtol=1e-10,
                 atol=1e-12)
    with pytest.raises(rt.ValueError, match=r"requested an output size of \(11, 8\)"):
        layer(x, output_size=(11, 8))
    bound = 1 / math.sqrt(3 * 9)  # fan_in = weight.size(1) * kh * kw
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    one_d = nn.ConvTranspose1d(2, 3, 3, stride=2, output_padding=1).double().to(device)
    x1 = t64(randn(2, 2, 4), device)
    ref = np_conv_transpose2d(to_numpy(x1)[:, :, None], to_numpy(one_d.weight)[:, :, None], to_numpy(one_d.bias),
                              (1, 2), (0, 0), (0, 1), (1, 1), 1)[:, :, 0]
    assert_close(one_d(x1), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("padding, mode", [(1, "zeros"), ("same", "zeros"), ("valid", "zeros"), (2, "reflect"),
                                           ("same", "replicate"), (1, "circular")])
def test_conv1d_layer(device, padding, mode):
    layer = nn.Conv1d(4, 6, 4, padding=padding, padding_mode=mode, dilation=1 if padding == 2 else 2,
                      groups=2).double().to(device)
    x = randn(2, 4, 9)
    w, b = to_numpy(layer.weight), to_numpy(layer.bias)
    d = layer.dilation[0]
    pad = (3 * d // 2, 3 * d - 3 * d // 2) if padding == "same" else (0, 0) if padding == "valid" else \
        (padding, padding)
    np_mode = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    ref = np_conv1d(np.pad(x, ((0, 0), (0, 0), pad), mode=np_mode), w, b, dilation=d, groups=2)
    out = layer(t64(x, device))
    assert_close(out, ref, rtol=1e-10, atol=1e-12)
    if padding == "same":
        assert out.shape[-1] == 9
    assert gradcheck(lambda x, w: F.conv1d(x, w, None, 2, 1, 2, 2), (randn(1, 4, 9), w), device)


def test_conv2d_string_padding_and_modes(device):
    x, w = randn(1, 2, 5, 6), randn(3, 2, 4, 3)
    out = F.conv2d(t64(x, device), t64(w, device), padding="same", dilation=(1, 2))
    # dims: total padding 3 (height: 1 before, 2 after) and 4 (width: 2 and 2)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 2)))
    ref = np.zeros((1, 3, 5, 6))
    for i in range(4):
        for j in range(3):
            ref += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 5, 2 * j:2 * j + 6], w[:, :, i, j])
    assert_close(out, ref, rtol=1e-10, atol=1e-12)
    conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", bias=False).double().to(device)
    expected = F.conv2d(t64(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect"), device), conv.weight)
    assert_close(conv(t64(x, device)), expected, rtol=1e-12)
    assert gradcheck(lambda x, w: F.conv2d(x, w, padding="same"), (randn(1, 2, 3, 3), randn(2, 2, 2, 2)), device)


# ---- padding and interpolation --------------------------------------------------------------------

@pytest.mark.parametrize("mode, np_mode", [("constant", "constant"), ("reflect", "reflect"), ("replicate", "edge"),
                                           ("circular", "wrap")])
def test_pad_against_numpy(device, mode, np_mode):
    x = randn(2, 3, 4, 5)
    out = F.pad(t64(x, device), (2, 1, 0, 3), mode=mode)
    assert_close(out, np.pad(x, ((0, 0), (0, 0), (0, 3), (2, 1)), mode=np_mode), rtol=0, atol=0)
    assert gradcheck(lambda t: F.pad(t, (1, 2, 2, 0), mode=mode), (randn(1, 2, 3, 3),), device)
    # One padded dim of a 3-d input, and the three last dims.
    assert_close(F.pad(t64(x[0], device), [1, 3], mode=mode), np.pad(x[0], ((0, 0), (0, 0), (1, 3)), mode=np_mode))
    assert_close(F.pad(t64(x, device), (1, 1, 2, 0, 1, 2), mode=mode),
                 np.pad(x, ((0, 0), (1, 2), (2, 0), (1, 1)), mode=np_mode))


def test_pad_negative_and_values(device):
    x = t64(np.arange(12.0).reshape(1, 3, 4), device)
    assert_close(F.pad(x, (-1, 2, 1, -2), value=-1.0),
                 [[[-1, -1, -1, -1, -1], [1, 2, 3, -1, -1]]])
    row = t64([[[0.0, 1.0, 2.0]]], device)
    # PyTorch's rules: reflect and replicate read the original positions; circular wraps within what
    # the negative padding keeps.
    assert to_numpy(F.pad(row, (-1, 2), mode="reflect")).tolist() == [[[1, 2, 1, 0]]]
    assert to_numpy(F.pad(row, (-3, 1), mode="replicate")).tolist() == [[[2]]]
    assert to_numpy(F.pad(row, (-1, 2), mode="circular")).tolist() == [[[1, 2, 1, 2]]]
    ints = rt.arange(6, device=device).reshape(2, 3)
    assert to_numpy(F.pad(ints, (1, 0), value=7)).tolist() == [[7, 0, 1, 2], [7, 3, 4, 5]]
    same = F.pad(x, (0, 0))
    assert same.shape == x.shape and same.data_ptr() != x.data_ptr()
    assert gradcheck(lambda t: F.pad(t, (-1, 1, 1, -1), value=3.0), (randn(2, 3, 3),), device)


def np_nearest(x, out_sizes, exact=False):
    for axis, dst in enumerate(out_sizes, start=2):
        src = x.shape[axis]
        index = ((2 * np.arange(dst) + 1) * src) // (2 * dst) if exact else (np.arange(dst) * src) // dst
        x = np.take(x, np.minimum(index, src - 1), axis=axis)
    return x


def np_linear(x, out_sizes, align_corners):
    """Per-dim linear interpolation with PyTorch's source positions (in float64)."""
    for axis, dst in enumerate(out_sizes, start=2):
        src = x.shape[axis]
        o = np.arange(dst)
        if align_corners:
            real = o * ((src - 1) / (dst - 1) if dst > 1 else 0.0)
        else:
            real = np.maximum((o + 0.5) * src / dst - 0.5, 0)
        i0 = np.minimum(np.floor(real).astype(int), src - 1)
        i1 = np.minimum(i0 + 1, src - 1)
        lam = (real - i0).reshape([dst] + [1] * (x.ndim - axis - 1))
        x = np.take(x, i0, axis=axis) * (1 - lam) + np.take(x, i1, axis=axis) * lam
    return x


def np_area(x, out_size):
    h, w = x.shape[2:]
    oh, ow = out_size
    out = np.zeros(x.shape[:2] + (oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, he = (i * h) // oh, -((-(i + 1) * h) // oh)
            ws, we = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, hs:he, ws:we].mean((2, 3))
    return out


@pytest.mark.parametrize("kwargs, out_size", [(dict(scale_factor=2), (8, 10)), (dict(size=(7, 3)), (7, 3)),
                                              (dict(size=5), (5, 5)), (dict(scale_factor=(0.5, 1.5)), (2, 7))])
def test_interpolate_2d(device, kwargs, out_size):
    x = randn(2, 3, 4, 5)
    tx = t64(x, device)
    assert_close(F.interpolate(tx, **kwargs), np_nearest(x, out_size), rtol=0, atol=0)
    if "size" in kwargs:  # scale factors give PyTorch's 1 / scale positions, checked against PyTorch
        assert_close(F.interpolate(tx, mode="nearest-exact", **kwargs), np_nearest(x, out_size, True), rtol=0, atol=0)
        for align_corners in (False, True):
            assert_close(F.interpolate(tx, mode="bilinear", align_corners=align_corners, **kwargs),
                         np_linear(x, out_size, align_corners), rtol=1e-12, atol=1e-12)
        assert_close(F.interpolate(tx, mode="area", **kwargs), np_area(x, out_size), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda t: F.interpolate(t, size=(3, 5), mode="bilinear", align_corners=False),
                     (randn(1, 2, 2, 3),), device)
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=1.5), (randn(1, 1, 2, 3),), device)


def test_interpolate_1d_3d_and_layers(device):
    x = randn(2, 3, 5)
    tx = t64(x, device)
    assert_close(F.interpolate(tx, size=8), np_nearest(x, (8,)), rtol=0, atol=0)
    assert_close(F.interpolate(tx, size=8, mode="linear", align_corners=True), np_linear(x, (8,), True),
                 rtol=1e-12, atol=1e-12)
    x3 = randn(1, 2, 3, 2, 4)
    assert_close(F.interpolate(t64(x3, device), size=(4, 3, 2), mode="trilinear"), np_linear(x3, (4, 3, 2), False),
                 rtol=1e-12, atol=1e-12)
    img = randn(1, 2, 3, 4)
    assert_close(nn.Upsample(scale_factor=2)(t64(img, device)), np_nearest(img, (6, 8)), rtol=0, atol=0)
    assert_close(nn.UpsamplingBilinear2d(size=(5, 7))(t64(img, device)), np_linear(img, (5, 7), True),
                 rtol=1e-12, atol=1e-12)
    assert_close(nn.Upsample(size=(5, 7), mode="bilinear")(t64(img, device)), np_linear(img, (5, 7), False),
                 rtol=1e-12, atol=1e-12)
    ints = rt.arange(4, device=device).reshape(1, 1, 4)
    assert to_numpy(F.interpolate(ints, scale_factor=2)).tolist() == [[[0, 0, 1, 1, 2, 2, 3, 3]]]


# ---- normalization and distances ------------------------------------------------------------------

def test_group_norm(device):
    x, w, b = randn(2, 6, 3, 2), randn(6), randn(6)
    groups = x.reshape(2, 3, -1)
    z = ((groups - groups.mean(-1, keepdims=True)) / np.sqrt(groups.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    expected = z * w[:, None, None] + b[:, None, None]
    assert_close(F.group_norm(t64(x, device), 3, t64(w, device), t64(b, device)), expected, rtol=1e-9, atol=1e-12)
    layer = nn.GroupNorm(3, 6).double().to(device)
    assert_close(layer(t64(x, device)), z, rtol=1e-9, atol=1e-12)
    assert gradcheck(lambda x, w, b: F.group_norm(x, 2, w, b), (randn(2, 4, 3), randn(4), randn(4)), device)


def test_rms_norm(device):
    x, w = randn(2, 3, 4), randn(3, 4)
    expected = x / np.sqrt((x * x).mean((1, 2), keepdims=True) + np.finfo(np.float64).eps) * w
    assert_close(F.rms_norm(t64(x, device), (3, 4), t64(w, device)), expected, rtol=1e-12)
    layer = nn.RMSNorm(4, eps=1e-3).double().to(device)
    assert_close(layer(t64(x, device)), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-3), rtol=1e-12)
    half = F.rms_norm(t64(x, device).half(), [4])  # computed in float32, eps of float32
    assert half.dtype == rt.float16
    assert_close(half, x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float32).eps), rtol=2e-3, atol=2e-3)
    assert gradcheck(lambda x, w: F.rms_norm(x, [4], w, eps=0.1), (randn(2, 4), randn(4)), device)


def test_normalize_and_distances(device):
    a, b = randn(3, 4), randn(3, 4)
    ta, tb = t64(a, device), t64(b, device)
    assert_close(F.normalize(ta), a / np.linalg.norm(a, axis=1, keepdims=True), rtol=1e-12)
    assert_close(F.normalize(ta, p=1, dim=0), a / np.abs(a).sum(0, keepdims=True), rtol=1e-12)
    assert_close(F.cosine_similarity(ta, tb), (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
                 rtol=1e-12)
    assert_close(F.cosine_similarity(ta, tb[:1], dim=-1), (a * b[:1]).sum(1) / np.linalg.norm(a, axis=1)
                 / np.linalg.norm(b[0]), rtol=1e-12)
    assert_close(F.pairwise_distance(ta, tb), np.linalg.norm(a - b + 1e-6, axis=1), rtol=1e-12)
    assert_close(F.pairwise_distance(ta, tb, p=1, keepdim=True), np.abs(a - b + 1e-6).sum(1, keepdims=True),
                 rtol=1e-12)
    assert F.normalize(t64(np.zeros((2, 3)), device)).abs().sum().item() == 0  # eps keeps zero rows finite
    out = rt.empty(3, 4, dtype=rt.float64, device=device)
    assert F.normalize(ta, out=out) is out and np.allclose(to_numpy(out), to_numpy(F.normalize(ta)))
    for fn in (lambda x, y: F.normalize(x, dim=-1), lambda x, y: F.cosine_similarity(x, y),
               lambda x, y: F.pairwise_distance(x, y, p=3)):
        assert gradcheck(fn, (randn(2, 3), randn(2, 3)), device)


# ---- activations and in-place forms ---------------------------------------------------------------

ACTIVATIONS = [
    ("leaky_relu", (0.2,), lambda x: np.where(x > 0, x, 0.2 * x)),
    ("elu", (0.7,), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    ("hardtanh", (-0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8)),
    ("relu6", (), lambda x: np.clip(x, 0, 6)),
    ("mish", (), lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    ("silu", (), lambda x: x / (1 + np.exp(-x))),
    ("relu", (), lambda x: np.maximum(x, 0)),
]


@pytest.mark.parametrize("name, args, ref", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activations_and_inplace(device, name, args, ref):
    x = randn(3, 4) * 4
    fn = getattr(F, name)
    assert_close(fn(t64(x, device), *args), ref(x), rtol=1e-12, atol=1e-12)
    # inplace=True writes into the input and returns it; gradients flow to what came before.
    leaf = t64(x, device, requires_grad=True)
    y = leaf * 1
    out = fn(y, *args, inplace=True)
    assert out is y
    assert_close(y.detach(), ref(x), rtol=1e-12, atol=1e-12)
    (out * out).sum().backward()
    plain = t64(x, device, requires_grad=True)
    (fn(plain, *args) ** 2).sum().backward()
    assert_close(leaf.grad, plain.grad, rtol=1e-12)
    assert gradcheck(lambda t: fn(t, *args), (x[:2, :3] + 0.05,), device)


def test_relu_gradient_at_zero_nan_and_infinity(device):
    # The gradient passes where the output is positive or NaN; at 0 and below it is 0, even for a NaN
    # or infinite incoming gradient (PyTorch's threshold_backward), for the module and in place.
    inf, nan = float("inf"), float("nan")
    for dtype in (rt.float32, rt.float64, rt.bfloat16):
        x = rt.tensor([nan, 0.0, -0.0, -1.0, 2.0, inf, -inf], dtype=dtype, device=device, requires_grad=True)
        g = rt.tensor([3.0, nan, inf, -inf, nan, 1.0, 5.0], dtype=dtype, device=device)
        nn.ReLU()(x).backward(g)
        assert x.grad.dtype == dtype
        assert_close(x.grad, [3, 0, 0, 0, nan, 1, 0], rtol=0, atol=0)
        y = x.detach().clone().requires_grad_()
        F.relu(y * 1, inplace=True).backward(g)
        assert_close(y.grad, x.grad, rtol=0, atol=0)


def test_relu_gradient_like_torch():
    torch = pytest.importorskip("torch")
    values = [float("nan"), 0.0, -0.0, -1.5, 2.0, float("inf"), -float("inf")]
    grads = [3.0, float("nan"), float("inf"), -float("inf"), float("nan"), 1.0, 5.0]
    out = []
    for lib in (rt, torch):
        x = lib.tensor(values, requires_grad=True)
        lib.relu(x).backward(lib.tensor(grads))
        out.append(x.grad.numpy().copy())
    np.testing.assert_array_equal(out[0], out[1])


def test_activation_layers(device):
    x = t64(randn(2, 5) * 3, device)
    for layer, fn in [(nn.LeakyReLU(0.3), lambda t: F.leaky_relu(t, 0.3)), (nn.ELU(0.5), lambda t: F.elu(t, 0.5)),
                      (nn.Softplus(2.0, 5.0), lambda t: F.softplus(t, 2.0, 5.0)), (nn.ReLU6(), F.relu6),
                      (nn.Hardtanh(-2.0, 1.0), lambda t: F.hardtanh(t, -2.0, 1.0)), (nn.Mish(), F.mish),
                      (nn.LogSoftmax(1), lambda t: F.log_softmax(t, 1))]:
        assert_close(layer(x), fn(x), rtol=0, atol=0)
    y = x.clone()
    assert nn.ReLU(inplace=True)(y) is y and y.min().item() >= 0
    # hardtanh passes no gradient at its bounds (clamp would).
    z = t64([-1.0, 0.0, 0.5, 6.0, 7.0], device, requires_grad=True)
    F.relu6(z).sum().backward()
    assert to_numpy(z.grad).tolist() == [0, 0, 1, 0, 0]
    with pytest.warns(UserWarning, match="Implicit dimension"):
        assert_close(nn.Softmax()(x), F.softmax(x, 1))


# ---- dropout variants -----------------------------------------------------------------------------

def test_dropout_variants(device):
    rt.manual_seed(5)
    x = rt.ones(64, 16, 4, 4, device=device)
    out = to_numpy(F.dropout2d(x, 0.25))
    per_channel = out.reshape(64, 16, -1)
    assert np.all((per_channel.min(-1) == per_channel.max(-1)))  # whole channels kept or zeroed
    assert np.allclose(np.unique(out), [0.0, 1 / 0.75]) and abs((out == 0).mean() - 0.25) < 0.05
    one_d = to_numpy(F.dropout1d(rt.ones(16, 40, device=device), 0.5))  # unbatched (C, L)
    assert np.all(one_d.min(1) == one_d.max(1)) and set(np.unique(one_d)) <= {0.0, 2.0}
    three_d = to_numpy(nn.Dropout3d(0.5)(rt.ones(2, 8, 2, 2, 2, device=device))).reshape(2, 8, -1)
    assert np.all(three_d.min(-1) == three_d.max(-1))
    # Alpha dropout keeps a standard normal's mean and variance.
    z = rt.randn(200000, device=device)
    a = to_numpy(F.alpha_dropout(z, 0.2, training=True))
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1) < 0.02
    feature = to_numpy(F.feature_alpha_dropout(rt.zeros(8, 32, 5, device=device), 0.5, training=True))
    assert np.all(feature.min(-1) == feature.max(-1)) and len(np.unique(feature)) == 2
    # Identity in eval mode and for alpha dropout by default; in place writes into the input.
    layer = nn.Dropout2d(0.5).eval()
    assert layer(x) is x and F.alpha_dropout(x) is x
    y = rt.ones(4, 8, 3, device=device)
    assert F.dropout1d(y, 0.5, inplace=True) is y and set(np.unique(to_numpy(y))) <= {0.0, 2.0}
    assert to_numpy(F.dropout2d(x, 1.0)).sum() == 0
    with pytest.raises(rt.ValueError, match="between 0 and 1"):
        nn.Dropout1d(1.5)
    with pytest.raises(rt.ShapeError, match="dropout1d"):
        F.dropout1d(rt.ones(2, 2, 2, 2))
    g = t64(randn(3, 4, 2), device, requires_grad=True)
    rt.manual_seed(1)
    out = F.dropout2d(g, 0.5)
    out.sum().backward()
    assert_close(g.grad, to_numpy(out.detach()) / to_numpy(g.detach()), rtol=1e-12)


# ---- embedding ------------------------------------------------------------------------------------

def test_embedding_from_pretrained(device):
    table = t64(randn(5, 3), device)
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad and emb.weight.data_ptr() == table.data_ptr()
    idx = rt.tensor([[0, 4], [2, 2]], device=device)
    assert_close(emb(idx), to_numpy(table)[[[0, 4], [2, 2]]], rtol=0, atol=0)
    trainable = nn.Embedding.from_pretrained(table.clone(), freeze=False, padding_idx=2)
    assert trainable.weight.requires_grad and trainable.padding_idx == 2
    trainable(idx).sum().backward()
    assert to_numpy(trainable.weight.grad).tolist() == [[1] * 3, [0] * 3, [0] * 3, [0] * 3, [1] * 3]
    # max_norm rescales the rows looked up, in place, to that norm.
    renorm = nn.Embedding.from_pretrained(t64(np.array([[3.0, 4.0], [0.3, 0.4]]), device), max_norm=1.0)
    out = renorm(rt.tensor([0, 1], device=device))
    assert_close(out, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    assert_close(renorm.weight, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)
    rt.manual_seed(0)
    fresh = nn.Embedding(6, 2, padding_idx=-1)
    assert fresh.padding_idx == 5 and to_numpy(fresh.weight)[5].tolist() == [0, 0]
    with pytest.raises(rt.ShapeError, match="2-d"):
        nn.Embedding.from_pretrained(rt.zeros(3))
    with pytest.raises(rt.ValueError, match="padding_idx 6"):
        nn.Embedding(6, 2, padding_idx=6)


# ---- losses ---------------------------------------------------------------------------------------

def np_reduce(loss, reduction):
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(device, reduction):
    x, y, w = randn(3, 4) * 2, randn(3, 4), rng.uniform(0.5, 2.0, (3, 4))
    tx, ty, tw = t64(x, device), t64(y, device), t64(w, device)
    d = np.abs(x - y)
    assert_close(F.l1_loss(tx, ty, reduction=reduction), np_reduce(d, reduction), rtol=1e-12)
    assert_close(nn.L1Loss(reduction=reduction)(tx, ty), np_reduce(d, reduction), rtol=1e-12)
    smooth = np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25)
    assert_close(nn.SmoothL1Loss(reduction=reduction, beta=0.5)(tx, ty), np_reduce(smooth, reduction), rtol=1e-12)
    huber = np.where(d < 0.5, 0.5 * d * d, 0.5 * (d - 0.25))
    assert_close(nn.HuberLoss(reduction=reduction, delta=0.5)(tx, ty), np_reduce(huber, reduction), rtol=1e-12)
    weighted = {"mean": (d * w).sum() / w.sum(), "sum": (d * w).sum(), "none": d * w}[reduction]
    assert_close(F.l1_loss(tx, ty, reduction=reduction, weight=tw), weighted, rtol=1e-12)
    assert_close(F.mse_loss(tx, ty, reduction=reduction, weight=tw),
                 {"mean": (d * d * w).sum() / w.sum(), "sum": (d * d * w).sum(), "none": d * d * w}[reduction],
                 rtol=1e-12)
    assert_close(F.huber_loss(tx, ty, reduction=reduction, weight=tw), np_reduce(np.where(d < 1, 0.5 * d * d, d - 0.5)
                                                                                  * w, reduction), rtol=1e-12)
    assert_close(F.smooth_l1_loss(tx, ty, reduction=reduction, beta=0.0), np_reduce(d, reduction), rtol=1e-12)
    for fn in (F.l1_loss, lambda a, b: F.smooth_l1_loss(a, b, beta=0.7), lambda a, b: F.huber_loss(a, b, delta=0.3)):
        assert gradcheck(lambda a, b: fn(a, b), (x[:2] + 0.01, y[:2]), device)
    # PyTorch's deprecated flags
    assert_close(F.l1_loss(tx, ty, size_average=False), d.sum(), rtol=1e-12)
    assert_close(nn.MSELoss(reduce=False)(tx, ty), d * d, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(device, reduction, log_target):
    logp = np.log(rng.dirichlet(np.ones(5), 3))
    q = rng.dirichlet(np.ones(5), 3)
    q[0, 1] = 0.0  # a zero target contributes nothing
    target = np.log(q + 1e-3) if log_target else q
    pointwise = np.exp(target) * (target - logp) if log_target else \
        np.where(q > 0, q * np.log(np.where(q > 0, q, 1)), 0) - q * logp
    expected = pointwise.sum() / 3 if reduction == "batchmean" else np_reduce(pointwise, reduction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = nn.KLDivLoss(reduction=reduction, log_target=log_target)(t64(logp, device), t64(target, device))
    assert_close(out, expected, rtol=1e-12, atol=1e-14)
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction="batchmean", log_target=log_target),
                     (logp[:2], target[:2] + (0 if log_target else 0.01)), device)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(device, reduction):
    p, y, w = rng.uniform(0.05, 0.95, (3, 4)), rng.uniform(0, 1, (3, 4)), rng.uniform(0.5, 2, 4)
    loss = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert_close(F.binary_cross_entropy(t64(p, device), t64(y, device), reduction=reduction),
                 np_reduce(loss, reduction), rtol=1e-12)
    assert_close(nn.BCELoss(weight=t64(w, device), reduction=reduction)(t64(p, device), t64(y, device)),
                 np_reduce(loss * w, reduction), rtol=1e-12)
    assert gradcheck(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), (p[:2], y[:2]), device)


def test_binary_cross_entropy_saturated_inputs(device):
    # Logs clamp at -100 and the input gradient's denominator at 1e-12 (PyTorch's): saturated
    # probabilities give finite losses and gradients.
    x = t64([0.0, 1.0, 0.5], device, requires_grad=True)
    loss = F.binary_cross_entropy(x, t64([1.0, 0.0, 0.25], device), reduction="sum")
    assert loss.item() == pytest.approx(200 - 0.25 * math.log(0.5) - 0.75 * math.log(0.5))
    loss.backward()
    assert_close(x.grad, [-1e12, 1e12, 1.0], rtol=1e-12)
    with pytest.raises(rt.ValueError, match="between 0 and 1"):
        F.binary_cross_entropy(t64([1.5], device), t64([1.0], device))
    with pytest.raises(rt.ShapeError, match=r"target of shape \[2\] must have the input's shape \[2, 2\]"):
        F.binary_cross_entropy(t64(np.full((2, 2), 0.5), device), t64([1.0, 0.0], device))


def test_bce_with_logits_nll_and_cross_entropy_modules(device):
    logits, y = randn(4, 3), rng.uniform(0, 1, (4, 3))
    pos_weight = np.array([1.0, 2.0, 0.5])
    sig = 1 / (1 + np.exp(-logits))
    expected = -(pos_weight * y * np.log(sig) + (1 - y) * np.log(1 - sig)).mean()
    loss = nn.BCEWithLogitsLoss(pos_weight=t64(pos_weight, device))
    assert_close(loss(t64(logits, device), t64(y, device)), expected, rtol=1e-10)
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    target, w = np.array([0, 2, 1, 2]), np.array([0.5, 1.0, 2.0])
    picked = -logp[np.arange(4), target] * w[target]
    nll = nn.NLLLoss(weight=t64(w, device), ignore_index=1)
    keep = target != 1
    assert_close(nll(t64(logp, device), rt.tensor(target, device=device)), picked[keep].sum() / w[target][keep].sum(),
                 rtol=1e-12)
    assert_close(F.nll_loss(t64(logp, device), rt.tensor(target, device=device), None, None, -100, None, "sum"),
                 -logp[np.arange(4), target].sum(), rtol=1e-12)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_cross_entropy_probability_targets(device, label_smoothing):
    logits, probs, w = randn(4, 3, 2), rng.dirichlet(np.ones(3), (4, 2)).transpose(0, 2, 1), np.array([1.0, 2.0, 0.5])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    smoothed = probs * (1 - label_smoothing) + label_smoothing / 3
    per_sample = -(logp * smoothed * w[None, :, None]).sum(1)
    ce = nn.CrossEntropyLoss(weight=t64(w, device), label_smoothing=label_smoothing)
    assert_close(ce(t64(logits, device), t64(probs, device)), per_sample.mean(), rtol=1e-12)
    assert_close(F.cross_entropy(t64(logits, device), t64(probs, device), reduction="none",
                                 label_smoothing=label_smoothing), -(logp * smoothed).sum(1), rtol=1e-12)
    assert_close(F.cross_entropy(t64(logits[0, :, 0], device), t64(probs[0, :, 0], device)),
                 -(logp[0, :, 0] * probs[0, :, 0]).sum(), rtol=1e-12)
    assert gradcheck(lambda a, b: F.cross_entropy(a, b, label_smoothing=label_smoothing),
                     (logits[:2, :, 0], probs[:2, :, 0]), device)
    with pytest.raises(rt.ValueError, match="ignore_index"):
        F.cross_entropy(t64(logits, device), t64(probs, device), ignore_index=0)
    with pytest.raises(rt.ShapeError, match=r"probability targets of shape \[4, 3\]"):
        F.cross_entropy(t64(logits, device), t64(probs[:, :, 0], device))


# ---- init -----------------------------------------------------------------------------------------

def test_orthogonal_init(device):
    for shape in [(5, 3), (3, 5), (4, 2, 3, 3)]:
        w = rt.empty(*shape, device=device, dtype=rt.float64)
        nn.init.orthogonal_(w, gain=2.0)
        m = to_numpy(w).reshape(shape[0], -1)
        gram = m @ m.T if shape[0] <= m.shape[1] else m.T @ m
        assert_close(rt.tensor(gram), 4 * np.eye(gram.shape[0]), rtol=0, atol=1e-12)
    rt.manual_seed(11)
    a = to_numpy(nn.init.orthogonal_(rt.empty(4, 4, device=device)))
    rt.manual_seed(11)
    b = to_numpy(nn.init.orthogonal_(rt.empty(4, 4, device=device)))
    assert np.array_equal(a, b) and not np.allclose(a, np.eye(4))
    with pytest.raises(rt.ValueError, match="2 or more dims"):
        nn.init.orthogonal_(rt.empty(3))


def test_other_initializers(device):
    rt.manual_seed(2)
    w = rt.empty(3, 5, device=device)
    assert to_numpy(nn.init.eye_(w)).tolist() == np.eye(3, 5).tolist()
    conv = rt.empty(4, 2, 3, 3, device=device, dtype=rt.float64)
    nn.init.dirac_(conv, groups=2)
    x = t64(randn(1, 4, 5, 5), device)
    assert_close(F.conv2d(x, conv, padding=1, groups=2), x, rtol=0, atol=0)  # the identity convolution
    sparse = to_numpy(nn.init.sparse_(rt.empty(10, 6, device=device), 0.25, std=0.5))
    assert ((sparse == 0).sum(0) == 3).all() and sparse.std() > 0.1
    big = rt.empty(200, 300, device=device)
    for a, b in [(-1.0, 1.0), (1.0, 3.0)]:  # the rejection and the uniform-proposal samplers
        v = to_numpy(nn.init.trunc_normal_(big, std=1.0, a=a, b=b))
        assert v.min() >= a and v.max() <= b

    def pdf(z):
        return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    mass = (math.erf(3 / math.sqrt(2)) - math.erf(1 / math.sqrt(2))) / 2
    assert abs(v.mean() - (pdf(1.0) - pdf(3.0)) / mass) < 0.01  # the truncated normal's mean
    nn.init.kaiming_uniform_(big, a=math.sqrt(5), mode="fan_out", generator=None)
    assert np.abs(to_numpy(big)).max() <= 1 / math.sqrt(200) + 1e-7
    nn.init.xavier_normal_(big, gain=2.0)
    assert abs(to_numpy(big).std() - 2 * math.sqrt(2 / 500)) < 0.005
    assert nn.init.calculate_gain("conv_transpose2d") == 1 and nn.init.calculate_gain("leaky_relu", 0.2) == \
        pytest.approx(math.sqrt(2 / 1.04))
    assert nn.init._calculate_fan_in_and_fan_out(conv) == (18, 36)
    with pytest.raises(rt.ValueError, match="unsupported nonlinearity 'swish'"):
        nn.init.calculate_gain("swish")
    with pytest.raises(rt.ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        nn.init.kaiming_normal_(big, mode="fan")
    with pytest.raises(rt.ValueError, match="fewer than 2 dims"):
        nn.init.xavier_uniform_(rt.empty(4))


# ---- layers' own rules and bad input --------------------------------------------------------------

def test_batchnorm_cumulative_average_and_bias_flag():
    bn = nn.BatchNorm1d(2, momentum=None)
    batches = [randn(8, 2) + i for i in range(3)]
    for b in batches:
        bn(t64(b).float())
    assert_close(bn.running_mean, np.mean([b.mean(0) for b in batches], 0), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 3
    assert list(nn.BatchNorm2d(3, bias=False).state_dict()) == ["weight", "running_mean", "running_var",
                                                                 "num_batches_tracked"]
    with pytest.raises(rt.ShapeError, match=r"BatchNorm2d: expected a 4-d input, got shape \[2, 3\]"):
        nn.BatchNorm2d(3)(rt.zeros(2, 3))


def test_bad_arguments():
    x = rt.zeros(1, 2, 4, 4)
    cases = [
        (rt.ValueError, "padding='same' is not supported for strided", lambda: nn.Conv2d(2, 2, 3, stride=2,
                                                                                         padding="same")),
        (rt.ValueError, "padding must be 'valid', 'same' or numbers, got 'full'",
         lambda: F.conv2d(x, rt.zeros(2, 2, 3, 3), padding="full")),
        (rt.ValueError, "padding_mode must be one of", lambda: nn.Conv1d(2, 2, 3, padding_mode="mirror")),
        (rt.ValueError, "only 'zeros' padding mode", lambda: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")),
        (rt.ValueError, r"in_channels \(3\) and out_channels \(4\) must be divisible by groups \(2\)",
         lambda: nn.Conv2d(3, 4, 3, groups=2)),
        (rt.ShapeError, r"\[conv1d\] expected a 2-d \(C, L\) or 3-d \(N, C, L\) input, got shape \[1, 2, 4, 4\]",
         lambda: F.conv1d(x, rt.zeros(2, 2, 3))),
        (rt.ShapeError, r"\[conv1d\] weight of shape \[2, 3, 3\] expects 3 input channels, but the input of shape "
                        r"\[2, 4\] has 2", lambda: F.conv1d(rt.zeros(2, 4), rt.zeros(2, 3, 3))),
        (rt.ValueError, r"\[conv_transpose2d\] output_padding \[2, 2\] must be nonnegative and smaller than stride",
         lambda: F.conv_transpose2d(x, rt.zeros(2, 2, 3, 3), stride=2, output_padding=2)),
        (rt.ValueError, r"pad: the padding must have two values per padded dim, got \(1, 2, 3\)",
         lambda: F.pad(x, (1, 2, 3))),
        (rt.ValueError, r"reflect padding \(4, 0\) must be smaller than the size 4 of dim 3 of the input of shape",
         lambda: F.pad(x, (4, 0), mode="reflect")),
        (rt.ValueError, "wraps around the 4 kept elements", lambda: F.pad(x, (0, 5), mode="circular")),
        (rt.ValueError, "leaves a negative size", lambda: F.pad(x, (-3, -2))),
        (rt.ValueError, "mode must be 'constant'", lambda: F.pad(x, (1, 1), mode="symmetric")),
        (rt.ValueError, "mode 'reflect' takes no value", lambda: F.pad(x, (1, 1), mode="reflect", value=1.0)),
        (rt.ValueError, "exactly one of size and scale_factor", lambda: F.interpolate(x)),
        (rt.ValueError, "align_corners can only be set", lambda: F.interpolate(x, size=3, align_corners=True)),
        (rt.ShapeError, r"mode 'bilinear' needs a 4-d input, got shape \[1, 2, 4\]",
         lambda: F.interpolate(rt.zeros(1, 2, 4), size=3, mode="bilinear")),
        (rt.ValueError, r"size must have 1 or 2 values, got \(1, 2, 3\)", lambda: F.interpolate(x, size=(1, 2, 3))),
        (rt.ValueError, "mode must be 'nearest'", lambda: F.interpolate(x, size=3, mode="bicubic")),
        (rt.ShapeError, "the output size", lambda: F.interpolate(x, scale_factor=0.1)),
        (rt.ShapeError, r"the 2 channels of the input of shape \[1, 2, 4, 4\] do not divide into num_groups=3",
         lambda: F.group_norm(x, 3)),
        (rt.ValueError, r"num_channels \(4\) must be divisible by num_groups \(3\)", lambda: nn.GroupNorm(3, 4)),
        (rt.ShapeError, r"normalized_shape \[3\] does not match the last dims of the input of shape \[1, 2, 4, 4\]",
         lambda: F.rms_norm(x, [3])),
        (rt.DTypeError, "rms_norm: expected a floating point input, got rustytorch.int64",
         lambda: F.rms_norm(rt.zeros(2, 3, dtype=rt.int64), [3])),
        (rt.ValueError, "reduction must be 'mean', 'sum' or 'none', got 'avg'",
         lambda: F.l1_loss(x, x, reduction="avg")),
        (rt.ValueError, "beta must be nonnegative", lambda: F.smooth_l1_loss(x, x, beta=-1.0)),
        (rt.ValueError, "delta must be positive", lambda: F.huber_loss(x, x, delta=0.0)),
        (rt.ShapeError, r"weight of shape \[2\] must have the input's shape \[1, 2, 4, 4\]",
         lambda: F.mse_loss(x, x, weight=rt.ones(2))),
        (rt.ValueError, "hardtanh: min_val", lambda: F.hardtanh(x, 1.0, -1.0)),
        (rt.ValueError, "scale_grad_by_freq and sparse", lambda: nn.Embedding(3, 2, sparse=True)),
        (rt.DTypeError, "mode 'linear' needs a floating point input",
         lambda: F.interpolate(rt.zeros(1, 2, 4, dtype=rt.int64), size=3, mode="linear")),
        (rt.ValueError, "antialias=True is not supported", lambda: F.interpolate(x, size=2, mode="bilinear",
                                                                                antialias=True)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


# ---- side by side with PyTorch --------------------------------------------------------------------

def test_layers_match_torch_with_copied_weights():
    torch = pytest.importorskip("torch")
    specs = [
        ("Conv1d", (4, 6, 3), dict(padding="same", dilation=2, groups=2, padding_mode="circular"), (2, 4, 9)),
        ("Conv2d", (3, 4, (3, 2)), dict(padding=(2, 1), padding_mode="replicate", stride=(2, 1)), (2, 3, 7, 6)),
        ("Conv2d", (2, 4, 4), dict(padding="same", bias=False), (1, 2, 6, 5)),
        ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1, groups=2, dilation=2), (2, 4, 3, 5)),
        ("ConvTranspose1d", (3, 2, 4), dict(stride=3, padding=1), (2, 3, 5)),
        ("GroupNorm", (2, 6), dict(eps=1e-3), (3, 6, 2, 2)),
        ("RMSNorm", ((2, 3),), {}, (4, 2, 3)),
        ("LayerNorm", (5,), dict(bias=False), (3, 5)),
        ("Upsample", (), dict(scale_factor=1.7, mode="bilinear"), (1, 2, 5, 4)),
        ("Upsample", (), dict(scale_factor=(2.5, 0.6), mode="nearest"), (1, 2, 5, 4)),
        ("Upsample", (), dict(scale_factor=1.5, mode="nearest-exact"), (1, 2, 5, 4)),
        ("Upsample", (), dict(size=7, mode="linear", align_corners=True), (2, 3, 4)),
    ]
    for name, args, kwargs, shape in specs:
        ours, theirs = getattr(nn, name)(*args, **kwargs).double(), getattr(torch.nn, name)(*args, **kwargs).double()
        ours.load_state_dict({k: rt.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
        x = randn(*shape)
        mine, ref = t64(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out_ours, out_theirs = ours(mine), theirs(ref)
        assert_close(out_ours, out_theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
        g = randn(*out_theirs.shape)
        out_ours.backward(t64(g))
        out_theirs.backward(torch.tensor(g))
        assert_close(mine.grad, ref.grad.numpy(), rtol=1e-10, atol=1e-12)
        for (k, p), q in zip(ours.named_parameters(), theirs.parameters()):
            assert_close(p.grad, q.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_functional_match_torch():
    torch = pytest.importorskip("torch")
    TF = torch.nn.functional
    x, y = randn(2, 3, 5, 6), rng.uniform(0.05, 0.95, (4, 5))
    p = rng.uniform(0.05, 0.95, (4, 5))
    logits, probs, w1 = randn(4, 5), rng.dirichlet(np.ones(5), 4), randn(2, 5, 4)
    cases = [
        ("pad", lambda f, t: f.pad(t(x), (2, -1, 1, 3), mode="constant", value=0.5)),
        ("pad_reflect", lambda f, t: f.pad(t(x), (-1, 3, 2, 0), mode="reflect")),
        ("pad_circular", lambda f, t: f.pad(t(x), (-2, 3, 1, 2), mode="circular")),
        ("pad_replicate", lambda f, t: f.pad(t(x[0]), (4, -2), mode="replicate")),
        ("interp_area", lambda f, t: f.interpolate(t(x), scale_factor=0.7, mode="area")),
        ("interp_bilinear_f32", lambda f, t: f.interpolate(t(x).float(), scale_factor=(1.3, 2.7), mode="bilinear",
                                                            align_corners=True)),
        ("interp_recompute", lambda f, t: f.interpolate(t(x), scale_factor=1.3, mode="bilinear",
                                                         recompute_scale_factor=True)),
        ("interp_nearest_f32", lambda f, t: f.interpolate(t(x).float(), scale_factor=2.3)),
        ("conv1d_same_even", lambda f, t: f.conv1d(t(x[0]), t(w1), padding="same")),
        ("kl_log_target", lambda f, t: f.kl_div(t(np.log(p)), t(np.log(y)), reduction="batchmean", log_target=True)),
        ("bce", lambda f, t: f.binary_cross_entropy(t(p), t(y), weight=t(np.arange(1.0, 6.0)))),
        ("ce_probs", lambda f, t: f.cross_entropy(t(logits), t(probs), weight=t(np.arange(1.0, 6.0)),
                                                  label_smoothing=0.1)),
        ("huber_weight", lambda f, t: f.huber_loss(t(logits), t(p), weight=t(y), delta=0.4)),
        ("mse_weight", lambda f, t: f.mse_loss(t(logits), t(p), weight=t(y))),
        ("cosine", lambda f, t: f.cosine_similarity(t(logits), t(p), dim=0)),
        ("mish", lambda f, t: f.mish(t(logits))),
        ("hardtanh", lambda f, t: f.hardtanh(t(logits), -0.3, 0.5)),
    ]

    def ours(a):
        return rt.tensor(np.asarray(a))

    def theirs(a):
        return torch.tensor(np.asarray(a))

    for name, call in cases:
        mine, ref = call(F, ours), call(TF, theirs)
        tol = 1e-6 if ref.dtype == torch.float32 else 1e-12
        assert_close(mine, ref.double().numpy(), rtol=tol, atol=tol)
