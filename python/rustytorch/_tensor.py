"""Tensor methods written in Python on top of _C: indexing and assignment, iteration, tolist,
hooks, grad_fn, the new_* constructors, numpy interop niceties, repeat and tile, and the
comparisons isclose, allclose and equal (also rustytorch functions)."""
import builtins
import numbers
import operator
import weakref

import numpy as np

from . import _C
from ._creation import tensor as _tensor

Tensor = _C.Tensor


# ---- indexing ---------------------------------------------------------------------------------

def _is_int_like(item):
    if isinstance(item, builtins.bool):
        return False
    if isinstance(item, numbers.Integral):
        return True
    return isinstance(item, Tensor) and item.dim() == 0 and not item.is_floating_point() \
        and item.dtype != _C.bool


def _as_index_tensor(item, device):
    """An advanced index (list, numpy array or tensor) as an int64 or bool tensor on device."""
    t = item if isinstance(item, Tensor) else _tensor(item)
    if t.dtype == _C.bool:
        return t.to(device)
    if t.is_floating_point():
        raise builtins.IndexError(
            "tensors used as indices must be long, int or bool tensors, got " + str(t.dtype))
    return t.to(device=device, dtype=_C.int64)


def _mask_to_indices(mask):
    """The int64 index tensors (one per mask dim) of a bool mask's True elements, in row-major order."""
    return list(mask.nonzero().unbind(1))


def _index_width(item):
    """How many dims of the indexed tensor an (expanded) index item consumes."""
    if item is None or item is Ellipsis:
        return 0
    return item.dim() if isinstance(item, Tensor) and item.dtype == _C.bool else 1


def _check_mask(self, mask, dim):
    """IndexError, as PyTorch's, unless mask's shape is that of self's dims from dim on."""
    for k, size in enumerate(mask.shape):
        if size != self.shape[dim + k]:
            raise _C.IndexError(f"[index] the shape of the mask {list(mask.shape)} at index {k} does not match the "
                                f"shape of the indexed tensor {list(self.shape)} at index {dim + k}")


def _expand_index(self, index):
    """index as a list of per-dim items: Ellipsis expanded, bool masks (checked against the dims they
    select from) split into one int64 index per masked dim."""
    if not isinstance(index, tuple):
        index = (index,)
    items = [_as_index_tensor(item, self.device)
             if isinstance(item, (list, np.ndarray)) or (isinstance(item, Tensor) and not _is_int_like(item))
             else item for item in index]
    consumed = builtins.sum(_index_width(i) for i in items)
    if builtins.sum(1 for i in items if i is Ellipsis) > 1:
        raise builtins.IndexError("an index can only have a single ellipsis ('...')")
    if consumed > self.dim():
        raise builtins.IndexError(
            f"too many indices for tensor of dimension {self.dim()} ({consumed} given)")
    at = next((k for k, i in enumerate(items) if i is Ellipsis), None)
    if at is not None:
        items[at:at + 1] = [builtins.slice(None)] * (self.dim() - consumed)
    expanded, dim = [], 0
    for item in items:
        if isinstance(item, Tensor) and item.dtype == _C.bool:
            _check_mask(self, item, dim)
            expanded.extend(_mask_to_indices(item))
        else:
            expanded.append(item)
        dim += _index_width(item)
    return expanded


def _basic_index(self, items):
    """Applies ints, slices and None as views; returns the view and, for every tensor index left,
    (dim of the view it applies to, index tensor)."""
    result, dim, advanced = self, 0, []
    for item in items:
        if item is None:
            result = result.unsqueeze(dim)
            dim += 1
        elif isinstance(item, builtins.slice):
            step = 1 if item.step is None else builtins.int(item.step)
            if step <= 0:
                raise builtins.ValueError("slice step must be positive")
            result = result._slice(dim, None if item.start is None else builtins.int(item.start),
                                   None if item.stop is None else builtins.int(item.stop), step)
            dim += 1
        elif _is_int_like(item):
            result = result.select(dim, builtins.int(item))
        elif isinstance(item, Tensor):
            advanced.append((dim, item))
            dim += 1
        else:
            raise builtins.IndexError(
                "only integers, slices, None, Ellipsis, lists, numpy arrays and int64 or bool tensors "
                f"are valid indices (got {type(item).__name__})")
    return result, advanced


def _flatten_advanced(view, advanced):
    """For int64 index tensors at the given dims of view: view with those dims moved first (a
    view), the same with them merged into one dim (a copy when the layout needs it), and the
    merged-dim position of every element of the broadcast indices (negative indices wrap)."""
    dims = [d for d, _ in advanced]
    order = dims + [d for d in builtins.range(view.dim()) if d not in dims]
    moved = view.permute(order) if order != list(builtins.range(view.dim())) else view
    linear = None
    for idx, size in zip(_C.broadcast_tensors(*[i for _, i in advanced]), moved.shape):
        idx = _C.where(idx < 0, idx + size, idx)
        linear = idx if linear is None else linear * size + idx
    return moved, moved.flatten(0, len(dims) - 1), linear


def _advanced_index(view, advanced):
    """numpy's advanced indexing of view by int64 tensors at the given dims: the index tensors
    broadcast together; their result dims replace the indexed dims where those are adjacent, and
    go first otherwise. Built from differentiable ops (a flat index_select)."""
    dims = [d for d, _ in advanced]
    _, flat, linear = _flatten_advanced(view, advanced)
    out = flat.index_select(0, linear.reshape(-1)).reshape(*linear.shape, *flat.shape[1:])
    if dims == list(builtins.range(dims[0], dims[0] + len(dims))) and dims[0] > 0:
        nidx = linear.dim()
        perm = list(builtins.range(nidx, nidx + dims[0])) + list(builtins.range(nidx)) + \
            list(builtins.range(nidx + dims[0], out.dim()))
        out = out.permute(perm)
    return out


def _getitem(self, index):
    if type(index) is builtins.int:  # the common case, without the general machinery
        return self.select(0, index)
    items = _expand_index(self, index)
    view, advanced = _basic_index(self, items)
    return _advanced_index(view, advanced) if advanced else view


def _setitem(self, index, value):
    items = _expand_index(self, index)
    view, advanced = _basic_index(self, items)
    if not isinstance(value, Tensor):
        value = _tensor(value, dtype=self.dtype, device=self.device)
    if not advanced:
        view.copy_(value)
        return
    # Advanced assignment: scatter the values into the merged indexed dims, then write the result
    # back through the (always a view) moved layout.
    moved, flat, linear = _flatten_advanced(view, advanced)
    rest = tuple(flat.shape[1:])
    source = value.expand(*linear.shape, *rest).reshape(-1, *rest)
    index = linear.reshape(-1, *([1] * len(rest))).expand(*source.shape)
    moved.copy_(flat.scatter(0, index, source.to(flat.dtype)).reshape(*moved.shape))


# ---- other Python-level methods ---------------------------------------------------------------

def _tolist(self):
    if self.dtype == _C.bfloat16:
        return self.detach().cpu().float().numpy().tolist()
    return self.detach().cpu().numpy().tolist()


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(self.unbind(0))


class RemovableHandle:
    """What register_hook returns: remove() unregisters the hook."""

    def __init__(self, tensor, handle):
        self._tensor, self._handle = tensor, handle

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self._handle)
            self._tensor = None


def _register_hook(self, hook):
    """hook(grad) runs when this tensor's gradient is computed; a tensor it returns replaces the gradient."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    return RemovableHandle(self, self._register_hook(hook))


def _register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) runs after a backward pass has accumulated this leaf's .grad; its return value is
    ignored. The hook gets this very object (a Parameter stays itself, e.g. a key of a dict of
    per-parameter optimizers), held weakly so that the hook keeps no parameter alive."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    owner = weakref.ref(self)

    def call(leaf):
        obj = owner()
        result = hook(leaf if obj is None else obj)
        if result is not None:
            raise TypeError(f"a post accumulate grad hook must return None, got {type(result).__name__}")
    return RemovableHandle(self, self._register_post_accumulate_grad_hook(call))


class _GradFn:
    """The backward node of a tensor, by name (what PyTorch prints as grad_fn=<MulBackward0>)."""

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name}>"


def _grad_fn(self):
    name = self._grad_fn_name
    return None if name is None else _GradFn(name)


def _new(factory):
    def make(self, *size, dtype=None, device=None, requires_grad=False, **kwargs):
        return factory(*size, **kwargs, dtype=dtype or self.dtype, device=device or self.device,
                       requires_grad=requires_grad)
    return make


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return _tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


# ---- repeat, tile and comparisons -------------------------------------------------------------

def _int_sequence(args, what):
    """f(2, 3), f((2, 3)) and f([2, 3]) as a tuple of ints."""
    try:
        if len(args) == 1 and not isinstance(args[0], numbers.Integral):
            args = tuple(args[0])
        return tuple(operator.index(a) for a in args)
    except TypeError:
        raise TypeError(f"{what} must be ints or one sequence of ints, got {args!r}") from None


def _repeat(self, *sizes):
    """The tensor tiled sizes[d] times along dim d; extra leading sizes add dims. A copy."""
    sizes = _int_sequence(sizes, "repeat(): sizes")
    if len(sizes) < self.dim():
        raise _C.ShapeError(f"[repeat] {len(sizes)} repeats {list(sizes)} for a tensor of shape "
                            f"{list(self.shape)}: give one per dim at least")
    if builtins.any(r < 0 for r in sizes):
        raise _C.ValueError(f"[repeat] repeats must be nonnegative, got {list(sizes)}")
    shape = (1,) * (len(sizes) - self.dim()) + tuple(self.shape)
    if builtins.all(r == 1 for r in sizes):
        return self.reshape(shape).clone()
    # Each dim s becomes a pair (1, s), the 1 expanded to the repeat count, the pair merged.
    pairs = [n for s in shape for n in (1, s)]
    expanded = [n for r, s in zip(sizes, shape) for n in (r, s)]
    return self.reshape(pairs).expand(expanded).reshape([r * s for r, s in zip(sizes, shape)])


def tile(input, dims):
    """input repeated dims[d] times along dim d; a shorter dims counts as padded with leading 1s."""
    dims = _int_sequence((dims,), "tile(): dims")
    return _repeat(input, (1,) * (input.dim() - len(dims)) + dims)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise |input - other| <= atol + rtol * |other| (or equal, infinities included), as a
    bool tensor broadcast from both; NaNs count as close to each other when equal_nan."""
    if not isinstance(other, Tensor):
        raise TypeError(f"isclose(): other must be a Tensor, got {type(other).__name__}")
    if input.dtype != other.dtype:
        raise _C.DTypeError(f"[isclose] input has dtype {input.dtype} but other has {other.dtype}; they "
                            "must match")
    if rtol < 0 or atol < 0:
        raise _C.ValueError(f"[isclose] rtol and atol must be nonnegative, got rtol={rtol} and atol={atol}")
    close = input == other
    if equal_nan and input.is_floating_point():
        close = close | (input.isnan() & other.isnan())
    if rtol == 0 and atol == 0:
        return close
    if input.dtype == _C.bool:
        input, other = input.to(_C.get_default_dtype()), other.to(_C.get_default_dtype())
    error = (input - other).abs()
    return close | (error.isfinite() & (error <= (other * rtol).abs() + atol))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of isclose(input, other, ...) is True."""
    return builtins.bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other):
    """Whether both tensors have the same shape and elements (compared after promotion)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"equal(): other must be a Tensor, got {type(other).__name__}")
    return input.shape == other.shape and builtins.bool((input == other).all())


def _format(self, spec):
    if self.dim() == 0:
        return self.item().__format__(spec)
    return object.__format__(repr(self), spec)


Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem
Tensor.__iter__ = _iter
Tensor.__format__ = _format
Tensor.__array_priority__ = 1000
Tensor.tolist = _tolist
Tensor.register_hook = _register_hook
Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
Tensor.grad_fn = property(_grad_fn)
Tensor.new_zeros = _new(_C.zeros)
Tensor.new_ones = _new(_C.ones)
Tensor.new_empty = _new(_C.empty)
Tensor.new_full = _new(lambda size, fill_value, **kw: _C.full(size, fill_value, **kw))
Tensor.new_tensor = _new_tensor
Tensor.repeat = _repeat
Tensor.tile = lambda self, *dims: tile(self, _int_sequence(dims, "tile(): dims"))
Tensor.isclose = isclose
Tensor.allclose = allclose
Tensor.equal = equal
