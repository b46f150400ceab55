"""Padding layers: F.pad with a fixed padding (one value for every side, or PyTorch's (left,
right[, top, bottom])) and mode: ZeroPad, ConstantPad, ReflectionPad and ReplicationPad, 1d and 2d."""
from . import functional as F
from .module import Module


class _PadNd(Module):
    """Subclasses set _mode and _dims."""

    def __init__(self, padding):
        super().__init__()
        self.padding = tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * self._dims)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    _mode = "constant"

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    _dims = 2


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    extra_repr = _PadNd.extra_repr


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    extra_repr = _PadNd.extra_repr


class ReflectionPad1d(_PadNd):
    _mode, _dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    _mode, _dims = "reflect", 2


class ReplicationPad1d(_PadNd):
    _mode, _dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    _mode, _dims = "replicate", 2
