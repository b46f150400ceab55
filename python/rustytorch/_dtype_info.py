"""rustytorch.finfo and iinfo: the numeric limits of the float and integer dtypes, with PyTorch's
attribute names and values."""
import math

import numpy as np

from . import _C

# numpy's types for the limits; bfloat16 (which numpy lacks) is float32's exponent with 8 bits of
# significand, so its limits are written out.
_NUMPY = {_C.float16: np.float16, _C.float32: np.float32, _C.float64: np.float64,
          _C.uint8: np.uint8, _C.int8: np.int8, _C.int16: np.int16, _C.int32: np.int32, _C.int64: np.int64}
_BFLOAT16 = {"bits": 16, "eps": 2.0 ** -7, "max": float.fromhex("0x1.fep127"), "tiny": 2.0 ** -126}


def _name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


class finfo:
    """Limits of a floating dtype (default: the default dtype): bits, eps (the gap above 1), max,
    min (= -max), tiny and smallest_normal (the smallest positive normal number), resolution
    (10 ** -digits, the decimal precision) and dtype (its name)."""

    def __init__(self, type=None):
        dtype = _C.get_default_dtype() if type is None else type
        if not isinstance(dtype, _C.dtype) or not dtype.is_floating_point:
            raise TypeError(f"rustytorch.finfo() requires a floating point input type, got {dtype!r}; use "
                            "rustytorch.iinfo for integer types")
        if dtype == _C.bfloat16:
            limits = _BFLOAT16
        else:
            info = np.finfo(_NUMPY[dtype])
            limits = {"bits": info.bits, "eps": float(info.eps), "max": float(info.max),
                      "tiny": float(info.smallest_normal)}
        self.bits = limits["bits"]
        self.eps = limits["eps"]
        self.max = limits["max"]
        self.min = -limits["max"]
        self.tiny = self.smallest_normal = limits["tiny"]
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))
        self.dtype = _name(dtype)

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("finfo", self.dtype))

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: bits, max, min and dtype (its name)."""

    def __init__(self, type):
        if type == _C.bool:
            raise TypeError("rustytorch.bool is not supported by rustytorch.iinfo")
        if not isinstance(type, _C.dtype) or type.is_floating_point:
            raise TypeError(f"rustytorch.iinfo() requires an integer input type, got {type!r}; use "
                            "rustytorch.finfo for floating point types")
        info = np.iinfo(_NUMPY[type])
        self.bits = info.bits
        self.max = int(info.max)
        self.min = int(info.min)
        self.dtype = _name(type)

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    def __hash__(self):
        return hash(("iinfo", self.dtype))

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
