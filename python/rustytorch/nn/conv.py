"""Convolution layers: Conv1d, Conv2d, ConvTranspose1d and ConvTranspose2d, with PyTorch's
arguments (string padding, padding_mode, groups, dilation, output_padding), weight layouts,
initialization and reprs."""

from .. import _C
from . import functional as F
from .linear import reset_kaiming_uniform
from .module import Module
from .parameter import Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n):
    return tuple(value) * (n if len(value) == 1 else 1) if isinstance(value, (tuple, list)) else (value,) * n


class _ConvNd(Module):
    """What the convolutions share. Subclasses set _dims, _transposed and _function (the F op)."""

    _dims = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                 device, dtype, output_padding=0):
        super().__init__()
        name, n = type(self).__name__, self._dims
        if groups <= 0:
            raise _C.ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise _C.ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                                f"divisible by groups ({groups})")
        stride = _ntuple(stride, n)
        if isinstance(padding, str):
            if self._transposed or padding not in ("same", "valid"):
                raise _C.ValueError(f"{name}: padding must be {'' if self._transposed else 'valid, same or '}"
                                    f"numbers, got '{padding}'")
            if padding == "same" and any(s != 1 for s in stride):
                raise _C.ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise _C.ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got '{padding_mode}'")
        if self._transposed and padding_mode != "zeros":
            raise _C.ValueError(f"{name}: only 'zeros' padding mode is supported, got '{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _ntuple(kernel_size, n), stride
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation, self.output_padding = _ntuple(dilation, n), _ntuple(output_padding, n)
        self.transposed, self.groups, self.padding_mode = self._transposed, groups, padding_mode
        # F.pad's padding for the non-zero padding modes (last dim first; 'same' puts an odd extra at the end).
        if padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
        else:
            totals = [0] * n if padding == "valid" else [2 * p for p in self.padding]
        self._reversed_padding_repeated_twice = [half for t in reversed(totals) for half in (t // 2, t - t // 2)]
        channels = (in_channels, out_channels // groups) if self._transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(_C.empty(*channels, *self.kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        reset_kaiming_uniform(self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        n = self._dims
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._function(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return self._function(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over [N, C, L] (weight [out, in / groups, k])."""

    _dims = 1
    _function = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-d convolution over [N, C, H, W] (weight [out, in / groups, kh, kw])."""

    _function = staticmethod(F.conv2d)


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype, output_padding)

    def _output_padding(self, input, output_size):
        """output_padding, or what gives output_size (its last spatial dims) when one is asked for."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        output_size = tuple(output_size)[-n:]
        if len(output_size) != n:
            raise _C.ValueError(f"{type(self).__name__}: output_size must have {n} spatial sizes, got {output_size}")
        smallest = tuple((input.shape[input.dim() - n + d] - 1) * self.stride[d] - 2 * self.padding[d]
                         + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n))
        largest = tuple(s + stride - 1 for s, stride in zip(smallest, self.stride))
        if any(not lo <= size <= hi for lo, size, hi in zip(smallest, output_size, largest)):
            raise _C.ValueError(f"{type(self).__name__}: requested an output size of {output_size}, but valid sizes "
                                f"range from {smallest} to {largest} (for an input of shape {list(input.shape)})")
        return tuple(size - lo for size, lo in zip(output_size, smallest))

    def forward(self, input, output_size=None):
        return self._function(input, self.weight, self.bias, self.stride, self.padding,
                              self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """The adjoint of Conv1d (weight [in, out / groups, k])."""

    _dims = 1
    _function = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """The adjoint of Conv2d (weight [in, out / groups, kh, kw])."""

    _function = staticmethod(F.conv_transpose2d)
