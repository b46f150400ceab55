"""autocast: a context manager and decorator that opens an autocast region of the C++ library
(rtx::AutocastGuard) for a device type. Inside it, ops follow their cast rules: matrix products,
convolutions and attention run in the low dtype, range-hungry ops (softmax, norms, losses, exp/log,
sum) in float32, everything else in its inputs' dtype. Regions nest and are per thread."""
import functools
import warnings

from .. import _C

_LOW_DTYPES = (_C.bfloat16, _C.float16)


class autocast:
    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise TypeError(f"autocast: device_type must be a string such as 'cuda' or 'cpu', got "
                            f"{type(device_type).__name__}")
        self.device = device_type
        self.fast_dtype = _C.get_autocast_dtype(device_type) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = _C.is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        if self._enabled and self.fast_dtype not in _LOW_DTYPES:
            warnings.warn(f"In {device_type} autocast, but the target dtype {self.fast_dtype} is not supported "
                          "(bfloat16 and float16 are); disabling autocast", stacklevel=2)
            self._enabled = False
        if self._enabled and device_type == "cuda" and not _C._cuda.is_available():
            warnings.warn("autocast: device_type 'cuda' was given but CUDA is not available; disabling autocast",
                          stacklevel=2)
            self._enabled = False
        self._regions = []

    def __enter__(self):
        dtype = self.fast_dtype if self.fast_dtype in _LOW_DTYPES else _C.get_autocast_dtype(self.device)
        self._regions.append(_C._AutocastRegion(self.device, dtype, self._enabled, self._cache_enabled))
        return self

    def __exit__(self, *exc):
        self._regions.pop().exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return run
