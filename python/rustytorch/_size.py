"""rustytorch.Size: the shape of a tensor (what x.shape and x.size() return), a tuple of ints that
prints as rustytorch.Size([2, 3]). The compiled module fills instances directly (to_size in
python/src/convert.cpp), so x.shape costs what a tuple does."""
import operator


class Size(tuple):
    """A tuple of ints; slicing, concatenating and repeating give a Size again."""

    __slots__ = ()
    __module__ = "rustytorch"

    def __new__(cls, sizes=()):
        items = tuple(sizes)
        for k, item in enumerate(items):
            if not hasattr(type(item), "__index__"):
                raise TypeError(f"rustytorch.Size() takes an iterable of 'int' (item {k} is "
                                f"'{type(item).__name__}')")
        return super().__new__(cls, (operator.index(item) for item in items))

    def __repr__(self):
        return f"rustytorch.Size({list(self)})"

    def __getitem__(self, index, _get=tuple.__getitem__):
        if type(index) is slice:
            return Size(_get(self, index))
        return _get(self, index)

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, times):
        repeated = tuple.__mul__(self, times)
        return repeated if repeated is NotImplemented else Size(repeated)

    __rmul__ = __mul__

    def numel(self):
        """The number of elements of a tensor of this shape."""
        n = 1
        for s in self:
            n *= s
        return n
