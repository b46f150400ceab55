"""nn.Module: the base of every layer. Parameters, buffers and submodules assigned as attributes are
registered by name, so that parameters(), state_dict() (PyTorch's key names), to(), train()/eval()
and zero_grad() reach the whole tree."""
from collections import OrderedDict

from .. import _C
from ..autograd import no_grad
from .parameter import Parameter


class Module:
    """Base class of layers and models: subclasses set parameters and submodules in __init__ and
    define forward(); calling the module runs forward."""

    training = True

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # ---- registration ---------------------------------------------------------------------------

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes to a module")
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: '{name}' must be a Parameter or None")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is part of the module's state (moved by to(), saved in state_dict when
        persistent) but not a parameter, such as running statistics."""
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"register_buffer: '{name}' must be a tensor or None")
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        self._modules[name] = module

    # ---- traversal ------------------------------------------------------------------------------

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(prefix + ("." if prefix else "") + name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, module in self._modules.items():
            if module is not None:
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, p in module._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield module_prefix + ("." if module_prefix else "") + name, p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, b in module._buffers.items():
                if b is not None:
                    yield module_prefix + ("." if module_prefix else "") + name, b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- state ----------------------------------------------------------------------------------

    def state_dict(self, prefix=""):
        """Parameters and persistent buffers by dotted name, detached (PyTorch's keys)."""
        state = OrderedDict()
        for module_prefix, module in self.named_modules(prefix.rstrip(".")):
            dot = module_prefix + ("." if module_prefix else "")
            for name, p in module._parameters.items():
                if p is not None:
                    state[dot + name] = p.detach()
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent:
                    state[dot + name] = b.detach()
        return state

    def load_state_dict(self, state_dict, strict=True):
        """Copies values into the parameters and buffers of the same names. strict: every key must
        match both ways. Returns (missing_keys, unexpected_keys)."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        with no_grad():
            for key, value in state_dict.items():
                if key not in own:
                    continue
                target = own[key]
                if tuple(target.shape) != tuple(value.shape):
                    raise RuntimeError(f"load_state_dict: '{key}' has shape {tuple(value.shape)} in the state "
                                       f"dict but {tuple(target.shape)} in the module")
                target.copy_(value)
        return missing, unexpected

    # ---- modes and devices ----------------------------------------------------------------------

    def train(self, mode=True):
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
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = p.grad.detach() * 0

    def _apply_to_tensors(self, fn):
        for module in self.modules():
            for name, p in module._parameters.items():
                if p is not None:
                    new = Parameter(fn(p.detach()), requires_grad=p.requires_grad)
                    module._parameters[name] = new
            for name, b in module._buffers.items():
                if b is not None:
                    module._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Moves parameters and buffers to a device and/or converts floating ones to a dtype."""
        def convert(t):
            dtype = kwargs.get("dtype")
            device = kwargs.get("device")
            for a in args:
                if isinstance(a, _C.dtype):
                    dtype = a
                else:
                    device = a
            if dtype is not None and not t.is_floating_point():
                dtype = None
            return t.to(device=device, dtype=dtype)
        return self._apply_to_tensors(convert)

    def cuda(self, device=None):
        return self.to("cuda" if device is None else _C.device("cuda", device) if isinstance(device, int) else device)

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(dtype=_C.float32)

    def double(self):
        return self.to(dtype=_C.float64)

    def half(self):
        return self.to(dtype=_C.float16)

    def bfloat16(self):
        return self.to(dtype=_C.bfloat16)

    # ---- calling and printing -------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, module in self._modules.items():
            body = repr(module).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        head = f"{type(self).__name__}(" + (extra + "\n  " if extra else "\n  ")
        return head + "\n  ".join(lines) + "\n)"
