"""rustytorch.inference_mode and is_inference_mode_enabled. Inference mode is grad mode off, as
torch.inference_mode is for every op this library has (it has no separate inference tensors);
inference_mode(False) turns recording back on inside it. The flag is per thread, as grad mode is."""
import functools
import threading

from . import _C

_state = threading.local()


def is_inference_mode_enabled():
    """Whether the calling thread is inside an inference_mode() block (or decorated function)."""
    return getattr(_state, "enabled", False)


class inference_mode:
    """A with-block or decorator (bare or called) in which ops record no graph; mode=False undoes
    an enclosing inference_mode. Restores both modes on exit."""

    def __new__(cls, mode=True):
        if callable(mode):  # @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self._mode = bool(mode)
        self._saved = []

    def __enter__(self):
        self._saved.append((is_inference_mode_enabled(), _C.is_grad_enabled()))
        _state.enabled = self._mode
        _C._set_grad_enabled(not self._mode)
        return self

    def __exit__(self, *exc):
        inference, grad = self._saved.pop()
        _state.enabled = inference
        _C._set_grad_enabled(grad)
        return False

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper
