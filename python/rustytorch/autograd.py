"""rustytorch.autograd: grad mode (no_grad, enable_grad, set_grad_enabled as context managers and
decorators), backward and grad, custom Functions, gradcheck and anomaly detection."""
import functools

import numpy as np

from . import _C

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "backward", "grad", "Function", "gradcheck",
           "detect_anomaly"]


class _GradMode:
    """Sets grad mode for a with-block or a decorated function, and restores it after."""

    def __init__(self, mode):
        self._mode = mode
        self._prev = []

    def __enter__(self):
        self._prev.append(_C.is_grad_enabled())
        _C._set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Ops inside record no graph (inference, optimizer updates)."""

    def __init__(self):
        super().__init__(False)


class enable_grad(_GradMode):
    """Ops inside record the graph again (inside a no_grad block, say)."""

    def __init__(self):
        super().__init__(True)


class set_grad_enabled(_GradMode):
    """Turns recording on or off: immediately when called, and for a with-block."""

    def __init__(self, mode):
        super().__init__(bool(mode))
        self._prev.append(_C.is_grad_enabled())
        _C._set_grad_enabled(bool(mode))

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._mode
        _C._set_grad_enabled(self._prev.pop())

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates the gradients of tensors (with grad_tensors as their incoming gradients) into
    the .grad of the leaves they depend on."""
    if retain_graph is None:
        retain_graph = create_graph
    _C._backward(tensors, grad_tensors, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """The gradients of outputs with respect to inputs, as a tuple (None for unused inputs when
    allow_unused), without touching any .grad."""
    return _C._grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)


class FunctionCtx:
    """What forward hands to backward: save_for_backward(*tensors), saved_tensors,
    needs_input_grad, and any attribute forward sets."""

    def save_for_backward(self, *tensors):
        self._ctx.save_for_backward(*tensors)

    @property
    def saved_tensors(self):
        return self._ctx.saved_tensors

    @property
    def needs_input_grad(self):
        return tuple(self._ctx.needs_input_grad(i) for i in range(self._num_inputs))


class Function:
    """A differentiable operation written by the user:

        class Exp(Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return g * y

        y = Exp.apply(x)

    backward returns one gradient per forward argument (None for non-tensors or no gradient)."""

    @classmethod
    def apply(cls, *args):
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        ctx = FunctionCtx()
        ctx._num_inputs = len(tensor_positions)
        single = []

        def forward(c_ctx, inputs):
            ctx._ctx = c_ctx
            full = list(args)
            for pos, t in zip(tensor_positions, inputs):
                full[pos] = t
            out = cls.forward(ctx, *full)
            single.append(isinstance(out, _C.Tensor))
            return [out] if single[0] else list(out)

        def backward(c_ctx, grads):
            ctx._ctx = c_ctx
            result = cls.backward(ctx, *grads)
            if not isinstance(result, tuple):
                result = (result,)
            if len(result) != len(args):
                raise RuntimeError(f"{cls.__name__}.backward returned {len(result)} gradients for "
                                   f"{len(args)} forward arguments")
            return [result[i] for i in tensor_positions]

        outputs = _C._apply_function(cls.__name__, [args[i] for i in tensor_positions], forward, backward)
        return outputs[0] if single[0] else tuple(outputs)

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must define backward(ctx, ...)")


def _numeric_jacobian_column(fn, inputs, k, index, eps):
    x = inputs[k].detach()
    flat = x.reshape(-1)
    original = flat[index].item()
    outs = []
    for delta in (eps, -eps):
        flat[index] = original + delta
        with no_grad():
            outs.append(fn(*inputs).detach().to(dtype=_C.float64).reshape(-1).cpu().numpy().copy())
    flat[index] = original
    return (outs[0] - outs[1]) / (2 * eps)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks the gradients autograd gives for fn at inputs (float64 tensors that require grad)
    against central finite differences, one output element at a time. Returns True, or raises (or
    returns False) naming the first input and element that disagree."""
    if isinstance(inputs, _C.Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    out = fn(*inputs)
    n_out = out.numel()
    for k, x in enumerate(inputs):
        if not isinstance(x, _C.Tensor) or not x.requires_grad:
            continue
        if x.dtype != _C.float64:
            raise ValueError(f"gradcheck: input {k} has dtype {x.dtype}; use float64 inputs")
        numeric = np.stack([_numeric_jacobian_column(fn, inputs, k, i, eps) for i in range(x.numel())], axis=1)
        analytic = np.zeros((n_out, x.numel()))
        for j in range(n_out):
            seed = _C.zeros(n_out, dtype=out.dtype, device=out.device)
            seed[j] = 1.0
            g = grad(fn(*inputs), [x], [seed.reshape(*out.shape)], allow_unused=True)[0]
            if g is not None:
                analytic[j] = g.detach().to(dtype=_C.float64).reshape(-1).cpu().numpy()
        if not np.allclose(analytic, numeric, atol=atol, rtol=rtol):
            bad = np.argwhere(~np.isclose(analytic, numeric, atol=atol, rtol=rtol))[0]
            msg = (f"gradcheck: input {k}, output element {bad[0]}, input element {bad[1]}: "
                   f"analytic {analytic[tuple(bad)]:.6g} vs numeric {numeric[tuple(bad)]:.6g}")
            if raise_exception:
                raise RuntimeError(msg)
            return False
    return True


class detect_anomaly:
    """While active, an op that produces NaN or Inf (forward or backward) raises an error naming it."""

    def __enter__(self):
        self._guard = _C._DetectAnomalyGuard()
        return self

    def __exit__(self, *exc):
        del self._guard
        return False
