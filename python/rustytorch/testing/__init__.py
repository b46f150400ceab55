"""rustytorch.testing: assert_close, as PyTorch's tests and scripts call it, built on isclose. Tensors,
numbers and (nested) sequences and mappings of them compare element by element with tolerances
chosen by dtype (PyTorch's defaults), after checking shape, dtype and device."""
import collections.abc
import math

from .. import _C
from .._tensor import isclose

# (rtol, atol) by dtype, as torch.testing.assert_close chooses them; integers and bool compare exactly.
_TOLERANCES = {
    _C.float16: (1e-3, 1e-5),
    _C.bfloat16: (1.6e-2, 1e-5),
    _C.float32: (1.3e-6, 1e-5),
    _C.float64: (1e-7, 1e-7),
}


def _fail(msg, default, path):
    where = f" at {path}" if path else ""
    raise AssertionError(msg if msg is not None else default + where)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, path):
    if actual.shape != expected.shape:
        _fail(msg, f"The values for attribute 'shape' do not match: {actual.shape} != {expected.shape}.", path)
    if check_device and actual.device != expected.device:
        _fail(msg, f"The values for attribute 'device' do not match: {actual.device} != {expected.device}.", path)
    if check_dtype and actual.dtype != expected.dtype:
        _fail(msg, f"The values for attribute 'dtype' do not match: {actual.dtype} != {expected.dtype}.", path)
    dtype = _C.promote_types(actual.dtype, expected.dtype)
    default_rtol, default_atol = _TOLERANCES.get(dtype, (0.0, 0.0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a, e = actual.detach().cpu().to(dtype), expected.detach().cpu().to(dtype)
    close = isclose(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if bool(close.all()):
        return
    mismatched = int((~close).sum())
    total = close.numel()
    diff = (a.to(_C.float64) - e.to(_C.float64)).abs().masked_fill(close, 0.0)
    flat = int(diff.reshape(-1).nan_to_num(nan=math.inf).argmax())
    index, rest = [], flat
    for size in reversed(tuple(a.shape)):
        rest, i = divmod(rest, size)
        index.insert(0, i)
    index = tuple(index)
    largest = float(diff.reshape(-1)[flat])
    relative = largest / abs(float(e.to(_C.float64).reshape(-1)[flat])) if float(e.reshape(-1)[flat]) != 0 else math.inf
    _fail(msg, f"Tensor-likes are not close!\n\nMismatched elements: {mismatched} / {total} "
               f"({100.0 * mismatched / total:.1f}%)\nGreatest absolute difference: {largest} at index {index} "
               f"(up to {atol} allowed)\nGreatest relative difference: {relative} at index {index} "
               f"(up to {rtol} allowed)", path)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raises AssertionError unless actual and expected are close: tensors elementwise within
    atol + rtol * |expected| (defaults by dtype), numbers likewise, sequences and mappings item by
    item. rtol and atol go together: give both or neither."""
    if (rtol is None) != (atol is None):
        raise ValueError("assert_close(): rtol and atol must both be given or both be omitted")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, "")


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, path):
    if isinstance(actual, _C.Tensor) or isinstance(expected, _C.Tensor):
        if not (isinstance(actual, _C.Tensor) and isinstance(expected, _C.Tensor)):
            _fail(msg, f"Expected both inputs to be tensors, got {type(actual).__name__} and "
                       f"{type(expected).__name__}.", path)
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, path)
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            _fail(msg, f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                       f"{sorted(map(str, expected))}.", path)
        for key in actual:
            _compare(actual[key], expected[key], rtol, atol, equal_nan, check_device, check_dtype, msg,
                     f"{path}[{key!r}]")
        return
    sequence = (collections.abc.Sequence,)
    if isinstance(actual, sequence) and isinstance(expected, sequence) and not isinstance(actual, str):
        if len(actual) != len(expected):
            _fail(msg, f"The length of the sequences do not match: {len(actual)} != {len(expected)}.", path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype, msg, f"{path}[{i}]")
        return
    if isinstance(actual, (bool, int, float)) and isinstance(expected, (bool, int, float)):
        if check_dtype and type(actual) is not type(expected):
            _fail(msg, f"The values for attribute 'dtype' do not match: {type(actual).__name__} != "
                       f"{type(expected).__name__}.", path)
        dtype = _C.float64 if isinstance(actual, float) or isinstance(expected, float) else _C.int64
        return _compare_tensors(_C.scalar_tensor(actual, dtype=dtype), _C.scalar_tensor(expected, dtype=dtype),
                                rtol, atol, equal_nan, False, False, msg, path)
    if actual != expected:
        _fail(msg, f"Objects are not equal: {actual!r} != {expected!r}.", path)
