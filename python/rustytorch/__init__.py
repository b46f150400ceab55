"""rustytorch: tensors, autograd and neural-network building blocks with a PyTorch-shaped API,
backed by the rtx C++/CUDA library."""
from . import _C
from ._C import (  # noqa: F401  (re-exported)
    Tensor, dtype, device, Error, ShapeError, DTypeError, DeviceError, IndexError, ValueError,
    OutOfMemoryError, CheckpointError, GraphCaptureError, bool, uint8, int8, int16, int32, int64, float16, bfloat16,
    float32, float64, float, double, half, long, int, short, promote_types, from_numpy, from_dlpack, manual_seed, initial_seed,
    get_rng_state, set_rng_state, use_deterministic_algorithms, are_deterministic_algorithms_enabled,
    set_float32_matmul_precision, get_float32_matmul_precision, set_num_threads, get_num_threads, set_flush_denormal,
    is_grad_enabled,
    _amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_, _foreach_norm, _foreach_mul_,
)
from ._creation import tensor, as_tensor  # noqa: F401
from ._size import Size  # noqa: F401
from ._tensor import tile, isclose, allclose, equal  # noqa: F401
from ._einsum import einsum  # noqa: F401
from ._dtype_info import finfo, iinfo  # noqa: F401
from ._inference_mode import inference_mode, is_inference_mode_enabled  # noqa: F401
from ._compile import compile  # noqa: F401
from . import backends  # noqa: F401
from . import _tensor  # noqa: F401  (adds the Python-level Tensor methods)
from . import _deepcopy  # noqa: F401  (adds Tensor.__deepcopy__)
from .autograd import no_grad, enable_grad, set_grad_enabled  # noqa: F401
from . import autograd, cuda, io, nn, optim, text, utils  # noqa: F401
from .io import load, save  # noqa: F401
from . import amp, distributed  # noqa: F401
from . import compiler, jit, testing, version, _dynamo, _inductor  # noqa: F401
from .amp import autocast  # noqa: F401

__version__ = _C.__version__


def _export_ops():
    """Every op of _C (creation, math, reductions, nn functions, ...) as a rustytorch function."""
    namespace = globals()
    for name in dir(_C):
        if not name.startswith("_") and name not in namespace:
            namespace[name] = getattr(_C, name)


_export_ops()
del _export_ops
