"""Containers: Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict."""
import operator
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from .. import _C
from .module import Module
from .parameter import Parameter


class Sequential(Module):
    """Runs its modules in order; built from modules or an OrderedDict of named modules."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        items = list(self._modules.values())
        return Sequential(*items[i]) if isinstance(i, slice) else items[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = list(self._modules.values())
        return ModuleList(items[i]) if isinstance(i, slice) else items[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for name, m in (modules or {}).items():
            self.add_module(name, m)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


def _as_parameter(value):
    """Tensors stored in a ParameterList or ParameterDict become Parameters (sharing their memory)."""
    return Parameter(value) if isinstance(value, _C.Tensor) and not isinstance(value, Parameter) else value


def _entries_repr(items, type_name):
    """PyTorch's lines for the entries of a ParameterList or ParameterDict."""
    lines = []
    for key, value in items:
        if isinstance(value, _C.Tensor):
            size = "x".join(str(n) for n in value.shape)
            device = f" ({value.device})" if value.device.type == "cuda" else ""
            lines.append(f"  ({key}): Parameter containing: [{type_name(value)} of size {size}{device}]")
        else:
            lines.append(f"  ({key}): Object of type: {type(value).__name__}")
    return "\n".join(lines)


class ParameterList(Module):
    """A list whose tensors are registered as parameters named "0", "1", ... (other values are kept
    as plain attributes), so that parameters(), state_dict() and to() reach them."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _name(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"ParameterList: index {idx} is out of range for a list of {len(self)}")
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, self._name(idx))

    def __setitem__(self, idx, value):
        setattr(self, self._name(idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self._size += 1
        self[-1] = value
        return self

    def extend(self, values):
        if isinstance(values, _C.Tensor) or not isinstance(values, Iterable):
            raise TypeError(f"ParameterList.extend should be called with an iterable, but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return _entries_repr(enumerate(self), lambda p: p.dtype)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict whose tensors are registered as parameters under their (string) keys (other
    values are kept as plain attributes). Like PyTorch, a plain dict given to the constructor or
    update() is added in sorted key order; an OrderedDict, a ParameterDict or pairs keep theirs."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        setattr(self, key, _as_parameter(value))
        self._keys[key] = None

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def values(self):
        return (self[k] for k in self._keys)

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def update(self, parameters):
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = parameters.items()
        elif isinstance(parameters, Mapping):
            items = sorted(parameters.items())
        else:
            items = parameters
        for key, value in items:
            self[key] = value

    def extra_repr(self):
        return _entries_repr(self.items(), lambda p: p.type())

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterDict should not be called.")
