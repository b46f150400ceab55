"""rustytorch.tensor and as_tensor: tensors from Python data (nested lists, scalars, numpy arrays)."""
import builtins

import numpy as np

from . import _C

# The numpy types of the default dtypes numpy has (it has no bfloat16).
_NUMPY_FLOATS = {_C.float16: np.float16, _C.float32: np.float32, _C.float64: np.float64}


def _check_fits(values, dtype):
    """Python numbers written into an integer dtype must fit it, as PyTorch checks (tensor([300],
    dtype=uint8) raises): the C++ core's rule for fill values (scalar_tensor's) decides."""
    for value in values:
        value = value.item() if isinstance(value, np.generic) else value
        try:
            _C.scalar_tensor(value, dtype=dtype)
        except _C.ValueError:
            name = str(dtype).rsplit(".", 1)[-1]
            raise _C.ValueError(f"[tensor] value {value} cannot be converted to {name} without overflow") from None


def _wide_int(data):
    """The first Python int of (nested sequences of) data outside int64, or None."""
    pending = [data]
    while pending:
        item = pending.pop()
        if isinstance(item, builtins.int) and not -2 ** 63 <= item < 2 ** 63:
            return item
        if isinstance(item, (list, tuple)):
            pending.extend(item)
    return None


def _from_data(data, dtype=None):
    """A CPU tensor holding a copy of data. Without a dtype, PyTorch's inference: Python floats give
    the default dtype (get_default_dtype()), ints int64, bools bool; numpy arrays and scalars keep
    their dtype. With one, values keep numpy's widest reading until converted. Python ints must fit
    int64, and Python numbers an integer dtype (given or inferred), as PyTorch's must."""
    if isinstance(data, _C.Tensor):
        return data.detach().clone()
    from_python = not isinstance(data, (np.ndarray, np.generic))
    array = np.array(data)
    integer_target = dtype is None or (not dtype.is_floating_point and dtype != _C.bool)
    # numpy reads ints beyond int64 as uint64, Python objects or (mixed with others) float64.
    if from_python and (array.dtype in (np.uint64, object) or (
            array.dtype.kind == "f" and array.size and (array.max() >= 2.0 ** 63 or array.min() < -2.0 ** 63))):
        wide = _wide_int(data)
        if wide is not None and integer_target:
            _check_fits([wide], _C.int64 if dtype is None else dtype)
        if wide is not None:
            array = np.array(data, dtype=np.float64)
    if array.dtype == object:
        raise TypeError("tensor(): could not infer a dtype from the data (mixed or non-numeric elements)")
    if array.dtype.kind == "c":
        raise TypeError("tensor(): complex numbers are not supported")
    if from_python and dtype is not None and integer_target and array.size and not (
            dtype == _C.int64 and array.dtype.kind in "ib"):
        _check_fits([array.min(), array.max()], dtype)
    if dtype is None and from_python:
        if array.dtype.kind == "f":
            default = _C.get_default_dtype()
            if default not in _NUMPY_FLOATS:
                return _C.from_numpy(np.array(array, order="C")).to(default)
            array = array.astype(_NUMPY_FLOATS[default])
        elif array.dtype.kind in "iu":
            array = array.astype(np.int64)
    return _C.from_numpy(np.array(array, order="C")).clone()


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of data (a number, nested sequence, numpy array or tensor)."""
    t = _from_data(data, dtype)
    if dtype is not None or device is not None:
        t = t.to(device=device, dtype=dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """data as a tensor, sharing memory when it already is one (or a numpy array) of the dtype and device."""
    if isinstance(data, _C.Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" and data.dtype.isnative and builtins.all(
            s >= 0 for s in data.strides):
        t = _C.from_numpy(data)
        return t.to(device=device, dtype=dtype)
    return tensor(data, dtype=dtype, device=device)
