"""default_collate (a list of samples -> a batch) and default_convert (one sample's numpy data ->
tensors), with PyTorch's types: tensors and numpy arrays stack along a new first dimension, Python
floats become a float64 tensor, ints int64, bools bool, numpy scalars keep their dtype, strings and
bytes stay lists, and mappings, namedtuples and sequences are collated field by field (tuples and
lists become lists; other mutable containers keep their type)."""
import collections.abc
import copy

import numpy as np

from ... import _C
from ..._creation import as_tensor, tensor


def _is_string_array(a):
    return a.dtype.kind in "SaUO"


def default_convert(data):
    """numpy arrays and scalars inside data (nested in mappings and sequences) as tensors."""
    if isinstance(data, _C.Tensor):
        return data
    if type(data).__module__ == "numpy" and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and _is_string_array(data):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def map_nested(data, is_leaf, fn):
    """data with fn applied to every leaf (is_leaf(x) true) nested in mappings and sequences, each
    container rebuilt in its own type where it can be; strings and other objects stay as they are."""
    if is_leaf(data):
        return fn(data)
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: map_nested(v, is_leaf, fn) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(map_nested(v, is_leaf, fn) for v in data))
    if isinstance(data, tuple):
        return tuple(map_nested(v, is_leaf, fn) for v in data)
    if isinstance(data, collections.abc.Sequence):
        return _rebuild_sequence(data, [map_nested(v, is_leaf, fn) for v in data])
    return data


def is_tensor(x):
    return isinstance(x, _C.Tensor)


def tensors_in(data):
    """Every tensor nested in data's mappings and sequences, in map_nested's order."""
    found = []
    map_nested(data, is_tensor, found.append)
    return found


def _rebuild_mapping(like, items):
    """items (a dict) in like's mapping type where that type can be built or copied, else a dict."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _rebuild_sequence(like, items):
    """items (a list) in like's sequence type where that type can be built or copied, else a list."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _collate_tensors(batch):
    return _C.stack(list(batch), 0)


def _collate_arrays(batch):
    if _is_string_array(batch[0]):
        raise TypeError(f"default_collate: numpy arrays of dtype {batch[0].dtype} (strings or objects) cannot be "
                        "batched into a tensor")
    return _C.stack([as_tensor(b) for b in batch], 0)


def _collate_numpy_scalars(batch):
    return _C.from_numpy(np.array(batch))


def _collate_floats(batch):
    return tensor(batch, dtype=_C.float64)


def _collate_ints(batch):
    return tensor(batch)


def _keep(batch):
    return list(batch)


# Looked up in order with isinstance (bool is an int: a batch of bools becomes a bool tensor).
_COLLATE_BY_TYPE = (
    (_C.Tensor, _collate_tensors),
    (np.ndarray, _collate_arrays),
    ((np.bool_, np.number, np.object_), _collate_numpy_scalars),
    (float, _collate_floats),
    (int, _collate_ints),
    ((str, bytes), _keep),
)


def default_collate(batch):
    """A batch from a list of samples (see the module docstring for the types)."""
    batch = list(batch)
    if not batch:
        raise _C.ValueError("default_collate: the batch is empty")
    elem = batch[0]
    for types, collate in _COLLATE_BY_TYPE:
        if isinstance(elem, types):
            return collate(batch)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {k: default_collate([d[k] for d in batch]) for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        sizes = {len(d) for d in batch}
        if len(sizes) != 1:
            raise _C.ValueError(f"default_collate: each sequence in a batch must have the same length, got lengths "
                                f"{sorted(sizes)}")
        columns = [default_collate(list(samples)) for samples in zip(*batch)]
        return columns if isinstance(elem, tuple) else _rebuild_sequence(elem, columns)
    raise TypeError(f"default_collate: a batch must hold tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem).__name__}")
