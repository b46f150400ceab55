"""rustytorch.cuda: devices, synchronization, streams, events, the caching allocator's
statistics, seeding and CUDA graphs. Importable everywhere; without a GPU is_available() is False, the memory figures read 0
(as PyTorch's) and the rest raise DeviceError saying why."""
from .._C import _cuda

Stream = _cuda.Stream
Event = _cuda.Event
is_available = _cuda.is_available
device_count = _cuda.device_count
current_device = _cuda.current_device
empty_cache = _cuda.empty_cache
get_device_properties = _cuda.get_device_properties
current_stream = _cuda.current_stream
set_stream = _cuda.set_stream
kernel_launches = _cuda.kernel_launches


def _index(device, optional=True):
    """The index of device (an int, "cuda:1", a device); -1 (the current device) for None, or, when
    optional, for a CUDA device without an index."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    from .._C import device as _device
    d = device if isinstance(device, _device) else _device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    if d.index is None:
        if not optional:
            raise ValueError(f"Expected a device with a specified index or an integer, but got:{d}")
        return -1
    return d.index


def set_device(device):
    """Makes device (an int, "cuda:1", a device) the calling thread's current CUDA device."""
    index = _index(device, optional=False)
    if index >= 0:
        _cuda.set_device(index)


def synchronize(device=None):
    """Waits for all work queued on the device (default: the current one)."""
    _cuda.synchronize(_index(device))


def memory_stats(device=None):
    """The caching allocator's counters, with PyTorch's key names; empty where there is no GPU (as
    PyTorch's, so that the memory figures below read 0 in a script run on the CPU)."""
    if not is_available():
        return {}
    return _cuda.memory_stats(_index(device))


def reset_peak_memory_stats(device=None):
    _cuda.reset_peak_memory_stats(_index(device))


def memory_summary(device=None):
    return _cuda.memory_summary(_index(device))


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def default_stream(device=None):
    return Stream.default_stream(_index(device))


class stream:
    """Makes a stream current for a with-block."""

    def __init__(self, s):
        self._stream = s

    def __enter__(self):
        if self._stream is not None:
            self._prev = current_stream(self._stream.device_index)
            set_stream(self._stream)
        return self._stream

    def __exit__(self, *exc):
        if self._stream is not None:
            set_stream(self._prev)
        return False


def is_bf16_supported(including_emulation=True):
    """Whether the current device computes in bfloat16 natively (compute capability 8.0 or later)."""
    return is_available() and get_device_properties(current_device())["major"] >= 8


from . import amp  # noqa: E402,F401  (rustytorch.cuda.amp: autocast and GradScaler for 'cuda')
from .random import (  # noqa: E402,F401  (re-exported)
    manual_seed, manual_seed_all, seed, seed_all, initial_seed, get_rng_state, set_rng_state, get_rng_state_all,
    set_rng_state_all)
from .graphs import (  # noqa: E402,F401  (re-exported)
    CUDAGraph, graph, graph_pool_handle, graphed_step, is_current_stream_capturing, make_graphed_callables)
