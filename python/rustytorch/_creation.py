"""rustytorch.tensor and as_tensor: tensors from Python data (nested lists, scalars, numpy arrays)."""
import builtins

import numpy as np

from . import _C

# The numpy types of the default dtypes numpy has (it has no bfloat16).
_NUMPY_FLOATS = {_C.float16: np.float16, _C.float32: np.float32, _C.float64: np.float64}


def _from_data(data, infer_dtype=True):
    """A CPU tensor holding a copy of data, with PyTorch's dtype inference: Python floats give
    the default dtype (get_default_dtype()), ints int64, bools bool; numpy arrays and scalars keep
    their dtype. Without infer_dtype (a dtype is given), values keep numpy's widest reading until
    converted."""
    if isinstance(data, _C.Tensor):
        return data.detach().clone()
    keep_numpy_dtype = isinstance(data, (np.ndarray, np.generic))
    array = np.array(data)
    if array.dtype == object:
        raise TypeError("tensor(): could not infer a dtype from the data (mixed or non-numeric elements)")
    if array.dtype.kind == "c":
        raise TypeError("tensor(): complex numbers are not supported")
    if infer_dtype and not keep_numpy_dtype:
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
    t = _from_data(data, infer_dtype=dtype is None)
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
