"""nn.Module: the base of every layer. Parameters, buffers and submodules assigned as attributes are
registered by name, so that parameters(), state_dict() (PyTorch's key names), to(), train()/eval()
and zero_grad() reach the whole tree; forward and backward hooks run around forward(). Converting
tensors (to/cuda/float/...) and loading a state dict are the C++ library's rtx::nn operations, so
the Python and C++ modules behave the same."""
import itertools
from collections import OrderedDict, namedtuple

from .. import _C
from .parameter import Parameter
from ._hooks import RemovableHandle, call_with_hooks

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _type_name(value):
    return type(value).__module__.split(".")[0] + "." + type(value).__name__


def _parse_to(args, kwargs):
    """(device, dtype, non_blocking) from PyTorch's Module.to signatures: to(device, dtype),
    to(dtype), to(tensor), with keywords device=, dtype=, non_blocking=."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"Module.to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, _C.Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, bool):
            non_blocking = a
        elif isinstance(a, int):
            device = _C.device("cuda", a)
        elif a is not None:
            device = a
    if isinstance(device, int):
        device = _C.device("cuda", device)
    if isinstance(device, str):
        device = _C.device(device)
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
    return device, dtype, non_blocking


class Module:
    """Base class of layers and models: subclasses set parameters and submodules in __init__ and
    define forward(); calling the module runs forward (and the hooks registered on it)."""

    training = True
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", OrderedDict())
        setattr_(self, "_buffers", OrderedDict())
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", OrderedDict())
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_backward_pre_hooks", OrderedDict())
        setattr_(self, "_backward_hooks", OrderedDict())

    # ---- registration ---------------------------------------------------------------------------

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if params is None:
            raise AttributeError("cannot assign attributes to a module before Module.__init__() is called")
        if isinstance(value, Parameter):
            self._remove_attribute(name, keep=params)
            self.register_parameter(name, value)
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                                "(rustytorch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            self._remove_attribute(name, keep=self._modules)
            self._modules[name] = value
        elif name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as child module '{name}' "
                                "(rustytorch.nn.Module or None expected)")
            self._modules[name] = value
        elif name in self._buffers:
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                "(rustytorch.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_attribute(self, name, keep):
        """Forgets name everywhere but in the table keep (where a re-assignment keeps its place)."""
        self.__dict__.pop(name, None)
        for table in (self._parameters, self._buffers, self._modules):
            if table is not keep:
                table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            entries = d.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def _check_new_name(self, name, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot register a {what} before Module.__init__() is called")
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f"{what} name can't be empty or contain '.', got {name!r}")

    def register_parameter(self, name, param):
        self._check_new_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                            "(rustytorch.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is part of the module's state (moved by to(), saved in state_dict when
        persistent) but not a parameter, such as running statistics."""
        self._check_new_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            "(rustytorch.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        self._check_new_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def _get(self, target, table, what):
        *path, name = target.split(".")
        module = self.get_submodule(".".join(path))
        entries = module.__dict__[table]
        if name not in entries:
            raise AttributeError(f"{type(module).__name__} has no {what} '{name}' (looking up '{target}')")
        return entries[name]

    def get_submodule(self, target):
        """The submodule at a dotted path ("transformer.h.0.attn"); "" is the module itself."""
        module = self
        for item in target.split(".") if target else []:
            child = module._modules.get(item)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule '{item}' (looking up '{target}')")
            module = child
        return module

    def get_parameter(self, target):
        return self._get(target, "_parameters", "parameter")

    def get_buffer(self, target):
        return self._get(target, "_buffers", "buffer")

    # ---- traversal ------------------------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module and every descendant, depth first; a module
        reachable twice is listed once unless remove_duplicate is False."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in module.__dict__[table].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter); a parameter shared by two modules (tied weights) is listed
        once, under its first name, unless remove_duplicate is False."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- state ----------------------------------------------------------------------------------

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (PyTorch's keys; a tied weight appears
        under each of its names), detached unless keep_vars."""
        state = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                state[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                state[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=state, prefix=prefix + name + ".", keep_vars=keep_vars)
        return state

    def load_state_dict(self, state_dict, strict=True):
        """Copies values into the parameters and buffers of the same names (converting dtype and
        device). Every key and shape is checked before anything is copied (rtx::nn::load_into):
        strict raises for keys on one side only, a shape mismatch always raises. Returns the named
        tuple (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"load_state_dict(): expected a mapping of names to tensors, got "
                            f"{type(state_dict).__name__}")
        missing, unexpected = _C._load_into(self.state_dict(), state_dict, strict, type(self).__name__)
        return _IncompatibleKeys(missing, unexpected)

    # ---- modes, devices and gradients -----------------------------------------------------------

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Sets every parameter's gradient to None, or to zero in place (set_to_none=False)."""
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.detach_().zero_()

    def _tensors(self):
        return [t for m in self.modules() for t in itertools.chain(m._parameters.values(), m._buffers.values())
                if t is not None]

    def to(self, *args, **kwargs):
        """Moves parameters and buffers to a device and/or converts the floating ones to a dtype, in
        place: the Parameter objects (and so tied weights and an optimizer's references) stay the
        same. Returns self."""
        device, dtype, non_blocking = _parse_to(args, dict(kwargs))
        _C._convert_in_place(self._tensors(), device, dtype, non_blocking)
        return self

    def cuda(self, device=None):
        return self.to(_C.device("cuda", device) if isinstance(device, int) else device or "cuda")

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def half(self):
        return self.to(_C.float16)

    def bfloat16(self):
        return self.to(_C.bfloat16)

    # ---- hooks ----------------------------------------------------------------------------------

    def _add_hook(self, table, hook, prepend, **flags):
        handle = RemovableHandle(table)
        table[handle.id] = (hook, flags)
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) (or (module, args, kwargs) with_kwargs) runs before forward and may
        return replacement args (or (args, kwargs))."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs=with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) (or (module, args, kwargs, output)) runs after forward and may
        return a replacement output; always_call runs it even when forward raised."""
        return self._add_hook(self._forward_hooks, hook, prepend, with_kwargs=with_kwargs, always_call=always_call)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) runs when the gradients of the module's outputs are known and
        may return replacement gradients."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) runs when the gradients of the module's inputs are
        known and may return replacement grad_input."""
        return self._add_hook(self._backward_hooks, hook, prepend)

    # ---- calling and printing -------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks or self._backward_pre_hooks:
            return call_with_hooks(self, args, kwargs)
        return self.forward(*args, **kwargs)

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            body = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        head = self._get_name() + "("
        if not lines:
            return head + ")"
        if len(lines) == 1 and not self._modules:
            return head + lines[0] + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())
