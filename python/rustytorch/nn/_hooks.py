"""Module hooks: the removable handle registration returns, and calling a module with its forward
pre-hooks, forward hooks and full backward (pre-)hooks. Backward hooks see the module's outputs and
inputs through two identity autograd functions placed around forward, as PyTorch's do: the one on
the outputs learns grad_output, the one on the inputs grad_input."""
import itertools
import warnings

from .. import _C
from ..autograd import Function

_next_id = itertools.count()


class RemovableHandle:
    """Unregisters its hook on remove() (or on leaving a with block)."""

    def __init__(self, table):
        self._table = table
        self.id = next(_next_id)

    def remove(self):
        self._table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _tensors_of(value):
    if isinstance(value, _C.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, _C.Tensor)]
    return []


def _replace_tensors(value, new):
    """value with its tensors (as _tensors_of lists them) replaced by new, in order."""
    if isinstance(value, _C.Tensor):
        return new[0]
    items, it = [], iter(new)
    for v in value:
        items.append(next(it) if isinstance(v, _C.Tensor) else v)
    return type(value)(items)


class _Identity(Function):
    """Passes tensors through; its backward hands the incoming gradients to on_backward, which may
    return replacements."""

    @staticmethod
    def forward(ctx, on_backward, *tensors):
        ctx.on_backward = on_backward
        out = tuple(t.view_as(t) for t in tensors)
        return out[0] if len(out) == 1 else out

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_backward(grads))


def _check_count(what, module, given, expected):
    if len(given) != expected:
        raise RuntimeError(f"{type(module).__name__}: a backward hook returned {len(given)} {what} "
                           f"where {expected} were expected")


class _BackwardHookState:
    """The gradients one call of a module collects on their way back, and the hooks it runs."""

    def __init__(self, module):
        self.module = module
        self.grad_output = None
        self.n_inputs = 0

    def on_output_grads(self, grads):
        grads = tuple(grads)
        for hook, _ in list(self.module._backward_pre_hooks.values()):
            result = hook(self.module, grads)
            if result is not None:
                result = (result,) if isinstance(result, _C.Tensor) else tuple(result)
                _check_count("gradients", self.module, result, len(grads))
                grads = result
        self.grad_output = grads
        if self.n_inputs == 0:
            self.run_backward_hooks(())
        return grads

    def on_input_grads(self, grads):
        return self.run_backward_hooks(tuple(grads))

    def run_backward_hooks(self, grad_input):
        for hook, _ in list(self.module._backward_hooks.values()):
            result = hook(self.module, grad_input if grad_input else (None,), self.grad_output)
            if result is not None and grad_input:
                result = (result,) if isinstance(result, _C.Tensor) else tuple(result)
                _check_count("input gradients", self.module, result, len(grad_input))
                grad_input = result
        return grad_input


def call_with_hooks(module, args, kwargs):
    """module(*args, **kwargs) with its hooks."""
    for hook, flags in list(module._forward_pre_hooks.values()):
        if flags["with_kwargs"]:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("a forward pre-hook registered with_kwargs must return None or (args, kwargs)")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)

    state = None
    if (module._backward_hooks or module._backward_pre_hooks) and _C.is_grad_enabled():
        state = _BackwardHookState(module)
        inputs = [a for a in args if isinstance(a, _C.Tensor) and a.requires_grad]
        state.n_inputs = len(inputs)
        if inputs:
            wrapped = _Identity.apply(state.on_input_grads, *inputs)
            wrapped = [wrapped] if isinstance(wrapped, _C.Tensor) else list(wrapped)
            it = iter(wrapped)
            args = tuple(next(it) if isinstance(a, _C.Tensor) and a.requires_grad else a for a in args)

    try:
        output = module.forward(*args, **kwargs)
    except BaseException:
        for hook, flags in list(module._forward_hooks.values()):
            if flags["always_call"]:
                try:
                    hook(module, args, kwargs, None) if flags["with_kwargs"] else hook(module, args, None)
                except Exception as e:  # the forward's own error is the one to raise
                    warnings.warn(f"a forward hook of {type(module).__name__} raised {e!r} after forward raised")
        raise

    for hook, flags in list(module._forward_hooks.values()):
        result = hook(module, args, kwargs, output) if flags["with_kwargs"] else hook(module, args, output)
        if result is not None:
            output = result

    if state is not None:
        outputs = [t for t in _tensors_of(output) if t.requires_grad]
        if outputs:
            wrapped = _Identity.apply(state.on_output_grads, *outputs)
            wrapped = [wrapped] if isinstance(wrapped, _C.Tensor) else list(wrapped)
            it = iter(wrapped)
            output = _replace_tensors(output, [next(it) if t.requires_grad else t for t in _tensors_of(output)])
    return output
