"""nn.init: PyTorch's in-place initializers (all run without recording gradients). Random values come
from the library's generator (or the generator passed), so manual_seed reproduces them."""
import math
import warnings

import numpy as np

from .. import _C
from ..autograd import no_grad

_LINEAR_LAYERS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise _C.ValueError(f"fan in and fan out can not be computed for a tensor with fewer than 2 dims (shape "
                            f"{list(tensor.shape)})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    """The recommended gain of a nonlinearity (param: leaky_relu's negative slope)."""
    if nonlinearity in _LINEAR_LAYERS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise _C.ValueError(f"calculate_gain: negative_slope {param} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise _C.ValueError(f"calculate_gain: unsupported nonlinearity '{nonlinearity}'")


def _draw(method, *args, generator=None):
    """An in-place random method called with the generator when one is given."""
    return method(*args) if generator is None else method(*args, generator=generator)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    with no_grad():
        return _draw(tensor.uniform_, a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return _draw(tensor.normal_, mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) values restricted to [a, b] (PyTorch's sampler): redrawn until inside when
    the interval holds more than 30% of the mass; otherwise uniform proposals on [a, b] accepted by
    the normal density relative to its peak there."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("trunc_normal_: mean is more than 2 std from [a, b]; the distribution of values may be "
                      "incorrect", stacklevel=2)
    with no_grad():
        if cdf((b - mean) / std) - cdf((a - mean) / std) > 0.3:
            _draw(tensor.normal_, mean, std, generator=generator)
            while True:
                outside = (tensor < a) | (tensor > b)
                if not outside.any().item():
                    return tensor
                fresh = _draw(_C.empty_like(tensor).normal_, mean, std, generator=generator)
                tensor.copy_(_C.where(outside, fresh, tensor))
        peak = max(a, min(mean, b))
        log_peak = -0.5 * ((peak - mean) / std) ** 2

        def rejected(candidates):
            log_density = -0.5 * ((candidates - mean) / std).square() - log_peak
            return _draw(_C.empty_like(tensor).uniform_, 0.0, 1.0, generator=generator).log() > log_density

        _draw(tensor.uniform_, a, b, generator=generator)
        pending = rejected(tensor)
        while pending.any().item():
            candidates = _draw(_C.empty_like(tensor).uniform_, a, b, generator=generator)
            tensor.copy_(_C.where(pending, candidates, tensor))
            pending = pending & rejected(candidates)
        return tensor


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    """The identity matrix in a 2-d tensor."""
    if tensor.dim() != 2:
        raise _C.ValueError(f"eye_: only 2-d tensors are supported, got shape {list(tensor.shape)}")
    with no_grad():
        return tensor.copy_(_C.eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor, groups=1):
    """The identity convolution in a 3-, 4- or 5-d weight (per group: output channel i of the group
    passes input channel i through the kernel's center)."""
    if tensor.dim() not in (3, 4, 5):
        raise _C.ValueError(f"dirac_: only 3-, 4- and 5-d tensors are supported, got shape {list(tensor.shape)}")
    if tensor.shape[0] % groups:
        raise _C.ValueError(f"dirac_: dim 0 of the tensor of shape {list(tensor.shape)} must divide by groups={groups}")
    per_group = tensor.shape[0] // groups
    center = tuple(k // 2 for k in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, tensor.shape[1])):
                tensor[(g * per_group + d, d) + center] = 1
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    if mode not in ("fan_in", "fan_out"):
        raise _C.ValueError(f"kaiming init: mode must be 'fan_in' or 'fan_out', got '{mode}'")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan_in if mode == "fan_in" else fan_out)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if tensor.numel() == 0:
        warnings.warn("kaiming_uniform_: initializing a zero-element tensor is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if tensor.numel() == 0:
        warnings.warn("kaiming_normal_: initializing a zero-element tensor is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix over the tensor flattened to [shape[0], -1], scaled by gain: the Q
    of a gaussian matrix's QR decomposition with R's diagonal made positive. The gaussian is drawn
    on the tensor's device; the QR (of initialization data) runs on the host in float64."""
    if tensor.dim() < 2:
        raise _C.ValueError(f"orthogonal_: only tensors with 2 or more dims are supported, got shape "
                            f"{list(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        gaussian = _draw(_C.empty((rows, cols), dtype=tensor.dtype, device=tensor.device).normal_, 0.0, 1.0,
                         generator=generator)
        a = gaussian.to(device="cpu", dtype=_C.float64).numpy()
        q, r = np.linalg.qr(a if rows >= cols else a.T)
        q = q * np.sign(np.diag(r))
        q = q if rows >= cols else q.T
        return tensor.copy_(_C.from_numpy(np.ascontiguousarray(q * gain)).reshape(tensor.shape))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Normal(0, std) values with a fraction sparsity of each column of a 2-d tensor set to zero."""
    if tensor.dim() != 2:
        raise _C.ValueError(f"sparse_: only 2-d tensors are supported, got shape {list(tensor.shape)}")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        normal_(tensor, 0.0, std, generator)
        if zeros == 0:
            return tensor
        # Each column's zeroed rows: the first `zeros` entries of a random permutation (argsort of
        # uniform keys draws every column's permutation at once).
        keys = _draw(_C.empty((rows, cols), device=tensor.device).uniform_, 0.0, 1.0, generator=generator)
        order = keys.argsort(0)[:zeros]
        return tensor.copy_(tensor.scatter(0, order, 0.0))
