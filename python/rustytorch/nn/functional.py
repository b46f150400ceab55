"""nn.functional: the library's nn ops with PyTorch's signatures, and what is composed of public ops
(so it runs on every device and is differentiable): in-place activations and the activations beyond
the library's own, 1-d and string-padded convolutions, 1-d pooling, padding, interpolation, pixel
shuffling, group and RMS normalization, the dropout variants, distances and the losses."""
import math
import numbers
import warnings

import numpy as np

from .. import _C
from .._autocast_rule import runs_in_float32
from .._creation import tensor as _tensor
from ..autograd import Function, no_grad

sigmoid = _C.sigmoid
tanh = _C.tanh
gelu = _C.gelu
softplus = _C.softplus
linear = _C.linear
conv_transpose2d = _C.conv_transpose2d
max_pool2d = _C.max_pool2d
avg_pool2d = _C.avg_pool2d
adaptive_avg_pool2d = _C.adaptive_avg_pool2d
layer_norm = _C.layer_norm
one_hot = _C.one_hot
scaled_dot_product_attention = _C.scaled_dot_product_attention


def _shape(t):
    return list(t.shape)


def _tuple(value, n, op, name):
    """value as n per-dim values (one value stands for all of them)."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            return tuple(value) * n
        if len(value) != n:
            raise _C.ValueError(f"{op}: {name} must have {'1 value' if n == 1 else f'1 or {n} values'}, got "
                                f"{tuple(value)}")
        return tuple(value)
    return (value,) * n


# ---- activations ----------------------------------------------------------------------------------

def _in_place(op, input, *args):
    """op(input, *args) written into input. The op runs on a copy, so that what it saves for backward
    is not the tensor being overwritten."""
    return input.copy_(op(input.clone(), *args))


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def relu_(input):
    return input.relu_()


def silu(input, inplace=False):
    return input.silu_() if inplace else _C.silu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _in_place(_C.leaky_relu, input, negative_slope) if inplace else _C.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, True)


def elu(input, alpha=1.0, inplace=False):
    return _in_place(_C.elu, input, alpha) if inplace else _C.elu(input, alpha)


def elu_(input, alpha=1.0):
    return elu(input, alpha, True)


def _hardtanh(input, min_val, max_val):
    # clamp's gradient includes the bounds; hardtanh's (PyTorch's) is zero there.
    inside = (input > min_val) & (input < max_val)
    return _C.where(inside, input, input.detach().clamp(min_val, max_val))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise _C.ValueError(f"hardtanh: min_val ({min_val}) must not be greater than max_val ({max_val})")
    return _in_place(_hardtanh, input, min_val, max_val) if inplace else _hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, True)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def _mish(input):
    return input * _C.tanh(_C.softplus(input))


def mish(input, inplace=False):
    return _in_place(_mish, input) if inplace else _mish(input)


def _hardswish(input):
    """PyTorch's pieces, with its gradients at the joins (0 at -3, 1 at 3); the middle piece sees
    the input clamped to [-3, 3], so that infinite inputs get finite gradients."""
    middle = input.clamp(-3, 3)
    return _C.where(input <= -3, 0.0, _C.where(input < 3, middle * (middle + 3) / 6, input))


def hardswish(input, inplace=False):
    return _in_place(_hardswish, input) if inplace else _hardswish(input)


def _hardsigmoid(input):
    return _hardtanh(input + 3, 0.0, 6.0) / 6


def hardsigmoid(input, inplace=False):
    return _in_place(_hardsigmoid, input) if inplace else _hardsigmoid(input)


_SELU_SCALE = 1.0507009873554805
_SELU_ALPHA = 1.7580993408473766  # SELU's scale * alpha: alpha dropout keeps SELU's mean and variance


def _scaled_elu(input, scale, negative_scale, input_scale):
    """scale x for x > 0, negative_scale (exp(input_scale x) - 1) elsewhere (PyTorch's elu kernel);
    exp sees only x <= 0, so that its gradient stays finite where it is not taken."""
    return _C.where(input > 0, input * scale, negative_scale * _C.expm1(input.clamp(max=0) * input_scale))


def selu(input, inplace=False):
    return _in_place(_scaled_elu, input, _SELU_SCALE, _SELU_ALPHA, 1.0) if inplace else \
        _scaled_elu(input, _SELU_SCALE, _SELU_ALPHA, 1.0)


def selu_(input):
    return selu(input, True)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise _C.ValueError("celu: alpha cannot be 0")
    return _in_place(_scaled_elu, input, 1.0, alpha, 1 / alpha) if inplace else \
        _scaled_elu(input, 1.0, alpha, 1 / alpha)


def celu_(input, alpha=1.0):
    return celu(input, alpha, True)


def _threshold(input, threshold, value):
    return _C.where(input <= threshold, value, input)


def threshold(input, threshold, value, inplace=False):
    """value where input <= threshold, input elsewhere (NaN passes, as in PyTorch)."""
    return _in_place(_threshold, input, threshold, value) if inplace else _threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return _in_place(_threshold, input, threshold, value)


class _LogSigmoid(Function):
    """min(x, 0) - log(1 + exp(-|x|)), with PyTorch's gradient sigmoid(-x) (1/2 at 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(max=0) - _C.log1p(_C.exp(-x.abs()))

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * _C.sigmoid(-x)


def logsigmoid(input):
    return _LogSigmoid.apply(input)


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - _C.tanh(input)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between (NaN passes)."""
    if lambd < 0:
        raise _C.ValueError(f"softshrink: lambd must be nonnegative, got {lambd}")
    return _C.where(input.abs() > lambd, input - input.sign() * lambd, input * 0)


def hardshrink(input, lambd=0.5):
    """0 on [-lambd, lambd], x elsewhere (NaN passes)."""
    return _C.where((input >= -lambd) & (input <= lambd), 0.0, input)


def glu(input, dim=-1):
    """a * sigmoid(b), a and b the halves of input along dim."""
    if input.dim() == 0:
        raise _C.ShapeError("glu: does not support scalars because halving size must be even")
    size = input.size(dim)
    if size % 2:
        raise _C.ShapeError(f"glu: halving dimension must be even, but dim {dim} of the input of shape "
                            f"{_shape(input)} is size {size}")
    a, b = input.chunk(2, dim)
    return a * _C.sigmoid(b)


def prelu(input, weight):
    """x where x > 0, weight * x elsewhere; weight holds one value or one per channel (dim 1)."""
    if weight.dim() > 1:
        raise _C.ShapeError(f"prelu: expected weight to be a scalar or 1-d tensor, got shape {_shape(weight)}")
    channels = input.shape[1] if input.dim() >= 2 else 1
    if weight.numel() not in (1, channels):
        raise _C.ShapeError(f"prelu: weight of shape {_shape(weight)} has {weight.numel()} values, but the input "
                            f"of shape {_shape(input)} has {channels} channels")
    w = weight.reshape([]) if weight.numel() == 1 else _channel_view(weight, input.dim())
    return _C.where(input > 0, input, w * input)


def _softmax_dim(op, ndim, stacklevel):
    """PyTorch's implicit dim (with its deprecation warning) when none is given."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _C.softmax(input, _softmax_dim("softmax", input.dim(), _stacklevel) if dim is None else dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _C.log_softmax(input, _softmax_dim("log_softmax", input.dim(), _stacklevel) if dim is None else dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return _C.softmax(-input, _softmax_dim("softmin", input.dim(), _stacklevel) if dim is None else dim, dtype)


# ---- convolution ----------------------------------------------------------------------------------

def _string_padding(op, input, weight, padding, stride, dilation, n):
    """The input and symmetric padding for padding='valid' or 'same'. 'same' follows PyTorch: an odd
    total padding d * (k - 1) of a dim puts its extra element at the end (padded onto the input)."""
    if padding == "valid":
        return input, (0,) * n
    if padding != "same":
        raise _C.ValueError(f"{op}: padding must be 'valid', 'same' or numbers, got '{padding}'")
    if any(s != 1 for s in _tuple(stride, n, op, "stride")):
        raise _C.ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={stride})")
    totals = [d * (k - 1) for d, k in zip(_tuple(dilation, n, op, "dilation"), weight.shape[2:])]
    extra = []
    for total in reversed(totals):
        extra += [0, total % 2]
    if any(extra):
        input = pad(input, extra)
    return input, tuple(total // 2 for total in totals)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    if isinstance(padding, str):
        input, padding = _string_padding("conv2d", input, weight, padding, stride, dilation, 2)
    return _C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def _check_1d(op, input, weight, layout, weight_channels):
    if input.dim() not in (2, 3):
        raise _C.ShapeError(f"[{op}] expected a 2-d (C, L) or 3-d (N, C, L) input, got shape {_shape(input)}")
    if weight.dim() != 3:
        raise _C.ShapeError(f"[{op}] expected a 3-d weight ({layout}, kL), got shape {_shape(weight)}")
    if weight_channels != input.shape[-2]:
        raise _C.ShapeError(f"[{op}] weight of shape {_shape(weight)} expects {weight_channels} input channels, "
                            f"but the input of shape {_shape(input)} has {input.shape[-2]}")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """conv2d over [N, C, 1, L]."""
    _check_1d("conv1d", input, weight, "out_channels, in_channels / groups", weight.shape[1] * groups)
    if isinstance(padding, str):
        input, padding = _string_padding("conv1d", input, weight, padding, stride, dilation, 1)
    (s,), (p,), (d,) = (_tuple(v, 1, "conv1d", name) for v, name in
                        ((stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    return _C.conv2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, s), (0, p), (1, d), groups).squeeze(-2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d over [N, C, 1, L]."""
    _check_1d("conv_transpose1d", input, weight, "in_channels, out_channels / groups", weight.shape[0])
    (s,), (p,), (op,), (d,) = (_tuple(v, 1, "conv_transpose1d", name) for v, name in
                               ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
                                (dilation, "dilation")))
    return _C.conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(2), bias, (1, s), (0, p), (0, op), groups,
                               (1, d)).squeeze(-2)


# ---- pooling --------------------------------------------------------------------------------------

def _pool1d_input(op, input):
    """[N, C, L] or [C, L] as [N, C, 1, L] or [C, 1, L], for the 2-d pooling ops."""
    if input.dim() not in (2, 3):
        raise _C.ShapeError(f"{op}: expected a 2-d (C, L) or 3-d (N, C, L) input, got shape {_shape(input)}")
    return input.unsqueeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    (k,), (s,), (p,) = (_tuple(v, 1, "avg_pool1d", name) for v, name in
                        ((kernel_size, "kernel_size"), (kernel_size if stride is None else stride, "stride"),
                         (padding, "padding")))
    return _C.avg_pool2d(_pool1d_input("avg_pool1d", input), (1, k), (1, s), (0, p), ceil_mode,
                         count_include_pad).squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    (k,), (s,), (p,), (d,) = (_tuple(v, 1, "max_pool1d", name) for v, name in
                              ((kernel_size, "kernel_size"), (kernel_size if stride is None else stride, "stride"),
                               (padding, "padding"), (dilation, "dilation")))
    out = _C.max_pool2d(_pool1d_input("max_pool1d", input), (1, k), (1, s), (0, p), (1, d), ceil_mode,
                        return_indices)
    return tuple(t.squeeze(-2) for t in out) if return_indices else out.squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    (size,) = _tuple(output_size, 1, "adaptive_avg_pool1d", "output_size")
    return _C.adaptive_avg_pool2d(_pool1d_input("adaptive_avg_pool1d", input), (1, size)).squeeze(-2)


# ---- padding and resampling -----------------------------------------------------------------------

def _pad_constant(x, dim, before, after, value):
    n = x.shape[dim]
    x = x.narrow(dim, max(0, -before), n - max(0, -before) - max(0, -after))

    def filler(width):
        shape = list(x.shape)
        shape[dim] = width
        return _C.full(shape, value, dtype=x.dtype, device=x.device)

    parts = ([filler(before)] if before > 0 else []) + [x] + ([filler(after)] if after > 0 else [])
    return _C.cat(parts, dim) if len(parts) > 1 else x


def _pad_index(mode, n, before, after, what):
    """The input positions that output positions -before .. n + after - 1 read."""
    positions = range(-before, n + after)
    if mode == "reflect":
        if before >= n or after >= n:
            raise _C.ValueError(f"pad: reflect padding ({before}, {after}) must be smaller than the size {n} of {what}")
        return [-i if i < 0 else 2 * (n - 1) - i if i >= n else i for i in positions]
    if mode == "replicate":
        if n == 0:
            raise _C.ValueError(f"pad: replicate padding needs a nonempty {what}")
        return [min(max(i, 0), n - 1) for i in positions]
    # circular: wraps within the part that negative padding keeps
    lo, hi = max(0, -before), n - max(0, -after)
    if max(before, after) > hi - lo:
        raise _C.ValueError(f"pad: circular padding ({before}, {after}) wraps around the {hi - lo} kept elements "
                            f"of {what} more than once")
    return [lo + (i - lo) % (hi - lo) for i in positions]


def pad(input, pad, mode="constant", value=None):
    """Pads (or, with negative values, crops) the last len(pad) // 2 dims: pad = (last_before,
    last_after, second_last_before, ...). mode: 'constant' (value, 0 by default), 'reflect',
    'replicate' or 'circular'."""
    pad = tuple(pad)
    if len(pad) % 2:
        raise _C.ValueError(f"pad: the padding must have two values per padded dim, got {pad}")
    if len(pad) // 2 > input.dim():
        raise _C.ValueError(f"pad: padding {pad} pads {len(pad) // 2} dims, but the input of shape {_shape(input)} "
                            f"has {input.dim()}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise _C.ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '{mode}'")
    if mode != "constant" and value is not None:
        raise _C.ValueError(f"pad: mode '{mode}' takes no value (got {value})")
    out, copied = input, False
    for i in range(len(pad) // 2):
        dim, before, after = input.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]
        what = f"dim {dim} of the input of shape {_shape(input)}"
        if input.shape[dim] + before + after < 0:
            raise _C.ValueError(f"pad: padding ({before}, {after}) leaves a negative size of {what}")
        if before == 0 and after == 0:
            continue
        if mode == "constant":
            out = _pad_constant(out, dim, before, after, 0 if value is None else value)
            copied = copied or before > 0 or after > 0
        else:
            index = _pad_index(mode, input.shape[dim], before, after, what)
            out = out.index_select(dim, _tensor(index, dtype=_C.int64, device=input.device))
            copied = True
    return out if copied else out.clone()


def _nearest_index(src, dst, scale, exact):
    """PyTorch's nearest source positions (float32 arithmetic); None for the identity."""
    if not exact and dst == src:
        return None
    if not exact and dst == 2 * src:
        return np.arange(dst) >> 1
    ratio = np.float32(1.0 / scale) if scale else np.float32(src) / np.float32(dst)
    if exact:
        real = np.float32((np.arange(dst) + 0.5) * np.float64(ratio))
    else:
        real = np.arange(dst).astype(np.float32) * ratio
    return np.minimum(np.floor(real).astype(np.int64), src - 1)


def _linear_along(x, dim, src, dst, scale, align_corners):
    """Linear interpolation of x along dim from src to dst positions, with PyTorch's source positions
    and weights (computed in float32, float64 for float64 inputs)."""
    acc = np.float64 if x.dtype == _C.float64 else np.float32
    steps = np.arange(dst).astype(acc)
    if align_corners:
        real = (acc(src - 1) / acc(dst - 1) if dst > 1 else acc(0)) * steps
    else:
        ratio = acc(1.0 / scale) if scale else acc(src) / acc(dst)
        real = np.maximum(ratio * (steps + acc(0.5)) - acc(0.5), acc(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), src - 1)
    w1 = np.clip(real - i0.astype(acc), 0, 1)
    i1 = i0 + (i0 < src - 1)
    shape = [dst] + [1] * (x.dim() - dim - 1)

    def weight(w):
        return _tensor(w.astype(np.float64), dtype=x.dtype, device=x.device).view(shape)

    def rows(i):
        return x.index_select(dim, _tensor(i, dtype=_C.int64, device=x.device))

    return rows(i0) * weight(1 - w1) + rows(i1) * weight(w1)


_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """Resamples the spatial dims of [N, C, d1, ...] (mode 'nearest', 'nearest-exact', 'area',
    'linear' (3-d), 'bilinear' (4-d) or 'trilinear' (5-d)) to size or by scale_factor, with
    PyTorch's source positions."""
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise _C.ValueError("interpolate: align_corners can only be set with the interpolating modes "
                                "linear, bilinear and trilinear")
    elif mode in _LINEAR_MODES:
        if input.dim() != _LINEAR_MODES[mode]:
            raise _C.ShapeError(f"interpolate: mode '{mode}' needs a {_LINEAR_MODES[mode]}-d input, got shape "
                                f"{_shape(input)}")
        if not input.is_floating_point():
            raise _C.DTypeError(f"interpolate: mode '{mode}' needs a floating point input, got {input.dtype}")
        align_corners = bool(align_corners)
    else:
        raise _C.ValueError(f"interpolate: mode must be 'nearest', 'nearest-exact', 'area', 'linear', 'bilinear' "
                            f"or 'trilinear', got '{mode}'")
    if antialias:
        raise _C.ValueError("interpolate: antialias=True is not supported")
    n = input.dim() - 2
    if n < 1:
        raise _C.ShapeError(f"interpolate: expected an input of shape (N, C, d1, ...), got {_shape(input)}")
    in_sizes = input.shape[2:]
    if (size is None) == (scale_factor is None):
        raise _C.ValueError("interpolate: exactly one of size and scale_factor must be given")
    if size is not None:
        if recompute_scale_factor:
            raise _C.ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit size")
        out_sizes = _tuple(size, n, "interpolate", "size")
        scales = (None,) * n
    else:
        factors = tuple(float(f) for f in _tuple(scale_factor, n, "interpolate", "scale_factor"))
        out_sizes = tuple(int(math.floor(s * f)) for s, f in zip(in_sizes, factors))
        scales = (None,) * n if recompute_scale_factor or mode == "area" else factors
    if any(s <= 0 for s in out_sizes):
        raise _C.ShapeError(f"interpolate: the output size {tuple(out_sizes)} of the input of shape {_shape(input)} "
                            "must be positive")
    if mode == "area":
        if n == 1:
            return _C.adaptive_avg_pool2d(input.unsqueeze(2), (1, out_sizes[0])).squeeze(2)
        if n == 2:
            return _C.adaptive_avg_pool2d(input, out_sizes)
        raise _C.ValueError(f"interpolate: mode 'area' needs a 3-d or 4-d input, got shape {_shape(input)}")
    out = input
    for dim, (src, dst, scale) in enumerate(zip(in_sizes, out_sizes, scales), start=2):
        if mode in _LINEAR_MODES:
            out = _linear_along(out, dim, src, dst, scale, align_corners)
            continue
        index = _nearest_index(src, dst, scale, mode == "nearest-exact")
        if index is not None:
            out = out.index_select(dim, _tensor(index, dtype=_C.int64, device=input.device))
    return out.clone() if out is input else out


def _pixel_input(op, input, name, factor):
    """input's batch dims and C, H, W, after checking factor and the input's rank."""
    if factor <= 0:
        raise _C.ValueError(f"{op}: expected a positive {name}, got {factor}")
    if input.dim() < 3:
        raise _C.ShapeError(f"{op}: expected an input of at least 3 dims (*, C, H, W), got shape {_shape(input)}")
    *batch, c, h, w = input.shape
    return batch, c, h, w


def pixel_shuffle(input, upscale_factor):
    """[*, C r^2, H, W] to [*, C, H r, W r]: each channel group of r^2 becomes an r x r block."""
    r = upscale_factor
    batch, c, h, w = _pixel_input("pixel_shuffle", input, "upscale_factor", r)
    if c % (r * r):
        raise _C.ShapeError(f"pixel_shuffle: the {c} channels of the input of shape {_shape(input)} are not "
                            f"divisible by upscale_factor^2 = {r * r}")
    n = len(batch)
    blocks = input.reshape(*batch, c // (r * r), r, r, h, w).permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return blocks.reshape(*batch, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """[*, C, H r, W r] to [*, C r^2, H, W], the inverse of pixel_shuffle."""
    r = downscale_factor
    batch, c, h, w = _pixel_input("pixel_unshuffle", input, "downscale_factor", r)
    if h % r or w % r:
        raise _C.ShapeError(f"pixel_unshuffle: the height and width of the input of shape {_shape(input)} are "
                            f"not divisible by downscale_factor = {r}")
    n = len(batch)
    blocks = input.reshape(*batch, c, h // r, r, w // r, r).permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return blocks.reshape(*batch, c * r * r, h // r, w // r)


# ---- normalization --------------------------------------------------------------------------------

def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    return _C.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _channel_view(t, ndim):
    """A per-channel [C] tensor shaped to broadcast over [N, C, ...] of ndim dims."""
    return t.view([t.shape[0]] + [1] * (ndim - 2))


@runs_in_float32
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each of num_groups channel groups of every sample (layer_norm over the group)."""
    if input.dim() < 2:
        raise _C.ShapeError(f"group_norm: expected an input of shape (N, C, ...), got {_shape(input)}")
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise _C.ShapeError(f"group_norm: the {c} channels of the input of shape {_shape(input)} do not divide into "
                            f"num_groups={num_groups}")
    group = (c // num_groups) * math.prod(input.shape[2:])
    out = _C.layer_norm(input.reshape(n, num_groups, group), [group], None, None, eps).reshape(input.shape)
    if weight is not None:
        out = out * _channel_view(weight, input.dim())
    if bias is not None:
        out = out + _channel_view(bias, input.dim())
    return out


def _normalized_dims(op, input, normalized_shape):
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(normalized_shape)
    if len(shape) > input.dim() or tuple(input.shape[input.dim() - len(shape):]) != shape:
        raise _C.ShapeError(f"{op}: normalized_shape {list(shape)} does not match the last dims of the input of "
                            f"shape {_shape(input)}")
    return list(range(-len(shape), 0))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last dims, computed in float32 for 16-bit inputs; eps
    defaults to the machine epsilon of that computation type."""
    dims = _normalized_dims("rms_norm", input, normalized_shape)
    if not input.is_floating_point():
        raise _C.DTypeError(f"rms_norm: expected a floating point input, got {input.dtype}")
    x = input if input.dtype == _C.float64 else input.to(_C.float32)
    if eps is None:
        eps = np.finfo(np.float64 if x.dtype == _C.float64 else np.float32).eps
    out = (x * (x.square().mean(dims, keepdim=True) + eps).rsqrt()).to(input.dtype)
    return out if weight is None else out * weight


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    result = input / input.norm(p, dim, keepdim=True).clamp(min=eps)
    return result if out is None else out.copy_(result)


@runs_in_float32
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    x1, x2 = _C.broadcast_tensors(x1, x2)
    return ((x1 / x1.norm(2, dim, keepdim=True).clamp(min=eps)) * (x2 / x2.norm(2, dim, keepdim=True).clamp(min=eps))
            ).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


# ---- dropout --------------------------------------------------------------------------------------

def _check_p(op, p):
    if not 0 <= p <= 1:
        raise _C.ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")


def _noise_dropout(input, p, feature, alpha):
    """Dropout with a drawn keep mask: per channel ([N, C, 1, ...]) when feature, and with alpha,
    dropped values set to SELU's negative saturation and the result rescaled to keep mean and
    variance (PyTorch's alpha dropout)."""
    if p == 1:
        return input * 0
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
    keep = _C.bernoulli(_C.empty(shape, dtype=input.dtype, device=input.device), 1 - p)
    if not alpha:
        return input * (keep / (1 - p))
    a = 1 / math.sqrt((_SELU_ALPHA * _SELU_ALPHA * p + 1) * (1 - p))
    return input * (keep * a) + ((keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p)


def _dropout_variant(op, input, p, training, inplace, feature, alpha, batched=True):
    """input unchanged outside training; batched=False: input lacks the batch dim."""
    _check_p(op, p)
    if not training or p == 0:
        return input
    x = input if batched else input.unsqueeze(0)
    out = _noise_dropout(x, p, feature, alpha)
    out = out if batched else out.squeeze(0)
    return input.copy_(out) if inplace else out


def dropout(input, p=0.5, training=True, inplace=False):
    _check_p("dropout", p)
    if not training or p == 0:
        return input
    out = _C.dropout(input, p, training)
    return input.copy_(out) if inplace else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    if input.dim() not in (2, 3):
        raise _C.ShapeError(f"dropout1d: expected a 2-d (C, L) or 3-d (N, C, L) input, got shape {_shape(input)}")
    return _dropout_variant("dropout1d", input, p, training, inplace, True, False, input.dim() == 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels (dim 1) of [N, C, H, W]; like PyTorch, a 3-d input is read as (N, C, L)."""
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: received a {input.dim()}-d input; dropout2d expects 3-d or 4-d inputs",
                      stacklevel=2)
    return _dropout_variant("dropout2d", input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    if input.dim() not in (4, 5):
        warnings.warn(f"dropout3d: received a {input.dim()}-d input; dropout3d expects 4-d or 5-d inputs",
                      stacklevel=2)
    return _dropout_variant("dropout3d", input, p, training, inplace, True, False, input.dim() == 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_variant("alpha_dropout", input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _dropout_variant("feature_alpha_dropout", input, p, training, inplace, True, True)


# ---- embedding ------------------------------------------------------------------------------------

def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of weight; with max_norm, the rows looked up are first rescaled in place to norm at most
    max_norm (PyTorch's renormalization)."""
    if scale_grad_by_freq or sparse:
        raise _C.ValueError("embedding: scale_grad_by_freq and sparse gradients are not supported")
    if max_norm is not None:
        with no_grad():
            index = input.reshape(-1)
            rows = weight.index_select(0, index)
            norms = rows.norm(norm_type, 1, keepdim=True)
            scale = _C.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            weight.copy_(_C.scatter(weight, 0, index.unsqueeze(1).expand(rows.shape), rows * scale))
    return _C.embedding(input, weight, padding_idx)


# ---- losses ---------------------------------------------------------------------------------------

def _reduction(size_average, reduce, reduction):
    """The reduction, from PyTorch's deprecated size_average and reduce flags when either is given."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _reduce(op, loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise _C.ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got '{reduction}'")


def _warn_broadcast(op, input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"{op}: using a target size ({tuple(target.shape)}) that is different to the input size "
                      f"({tuple(input.shape)}); this will likely lead to incorrect results due to broadcasting",
                      stacklevel=3)


def _weighted(op, loss, weight, reduction, input, weighted_mean=True):
    """loss * weight reduced; weighted_mean: 'mean' divides by the sum of the weights (l1, mse) rather
    than the count (huber), as PyTorch does."""
    if tuple(weight.shape) != tuple(input.shape):
        raise _C.ShapeError(f"{op}: weight of shape {_shape(weight)} must have the input's shape {_shape(input)}")
    loss = loss * weight
    if reduction == "mean" and weighted_mean:
        return loss.sum() / weight.sum()
    return _reduce(op, loss, reduction)


@runs_in_float32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_broadcast("l1_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    loss = (input - target).abs()
    return _reduce("l1_loss", loss, reduction) if weight is None else \
        _weighted("l1_loss", loss, weight, reduction, input)


@runs_in_float32
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _warn_broadcast("mse_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    if weight is None:
        return _C.mse_loss(input, target, reduction)
    return _weighted("mse_loss", (input - target).square(), weight, reduction, input)


@runs_in_float32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (the l1 loss for beta = 0)."""
    if beta < 0:
        raise _C.ValueError(f"smooth_l1_loss: beta must be nonnegative, got {beta}")
    _warn_broadcast("smooth_l1_loss", input, target)
    reduction = _reduction(size_average, reduce, reduction)
    d = (input - target).abs()
    loss = d if beta == 0 else _C.where(d < beta, 0.5 * d.square() / beta, d - 0.5 * beta)
    return _reduce("smooth_l1_loss", loss, reduction)


@runs_in_float32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere."""
    if delta <= 0:
        raise _C.ValueError(f"huber_loss: delta must be positive, got {delta}")
    _warn_broadcast("huber_loss", input, target)
    d = (input - target).abs()
    loss = _C.where(d < delta, 0.5 * d.square(), delta * (d - 0.5 * delta))
    return _reduce("huber_loss", loss, reduction) if weight is None else \
        _weighted("huber_loss", loss, weight, reduction, input, weighted_mean=False)


@runs_in_float32
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log target - input) elementwise (input holds log-probabilities; 0 where target is
    0); 'batchmean' divides the sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("kl_div: reduction 'mean' divides the total loss by both the batch size and the support "
                      "size; 'batchmean' divides only by the batch size, as the KL divergence is defined",
                      stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        zero = target == 0
        loss = _C.where(zero, 0.0, target * _C.where(zero, 1.0, target).log()) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.dim() > 0 else loss.sum()
    return _reduce("kl_div", loss, reduction)


class _BinaryCrossEntropy(Function):
    """-(t log x + (1 - t) log(1 - x)) elementwise, logs clamped at -100, with PyTorch's gradients:
    (x - t) / max(x (1 - x), 1e-12) for the input (finite where x saturates at 0 or 1) and
    log(1 - x) - log(x) for the target."""

    @staticmethod
    def forward(ctx, x, t):
        ctx.save_for_backward(x, t)
        return -(t * x.log().clamp(min=-100) + (1 - t) * (-x).log1p().clamp(min=-100))

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        grad_x = g * (x - t) / (x * (1 - x)).clamp(min=1e-12) if ctx.needs_input_grad[0] else None
        grad_t = g * ((-x).log1p() - x.log()) if ctx.needs_input_grad[1] else None
        return grad_x, grad_t


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if _C._autocast_active() and _C.is_autocast_enabled(input.device.type):
        raise _C.DTypeError("binary_cross_entropy: unsafe inside an autocast region (the log of a 16-bit "
                            "probability loses the small values it needs); apply it to the logits instead, "
                            "with binary_cross_entropy_with_logits (or nn.BCEWithLogitsLoss), which autocast "
                            "runs in float32")
    reduction = _reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise _C.ShapeError(f"binary_cross_entropy: target of shape {_shape(target)} must have the input's shape "
                            f"{_shape(input)}")
    if ((input < 0) | (input > 1)).any().item():
        raise _C.ValueError("binary_cross_entropy: all elements of input should be between 0 and 1")
    loss = _BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy", loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    return _C.binary_cross_entropy_with_logits(input, target, weight, _reduction(size_average, reduce, reduction),
                                               pos_weight)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    return _C.nll_loss(input, target, weight, ignore_index, _reduction(size_average, reduce, reduction))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """Class-index targets, or class probabilities (a floating target of the input's shape)."""
    reduction = _reduction(size_average, reduce, reduction)
    if not target.is_floating_point():
        return _C.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)
    if tuple(target.shape) != tuple(input.shape):
        raise _C.ShapeError(f"cross_entropy: probability targets of shape {_shape(target)} must have the input's "
                            f"shape {_shape(input)}")
    if ignore_index != -100:
        raise _C.ValueError("cross_entropy: ignore_index is not supported for probability targets")
    if not 0 <= label_smoothing <= 1:
        raise _C.ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    class_dim = 0 if input.dim() == 1 else 1
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / input.shape[class_dim]
    terms = _C.log_softmax(input, class_dim) * target
    if weight is not None:
        terms = terms * weight.view([weight.shape[0]] + [1] * (input.dim() - class_dim - 1))
    return _reduce("cross_entropy", -terms.sum(class_dim), reduction)
