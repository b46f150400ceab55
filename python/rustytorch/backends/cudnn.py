"""rustytorch.backends.cudnn: torch.backends.cudnn's switches as this library has them.
- allow_tf32: convolutions use TF32 exactly when float32 matrix products may (the float32 matmul
  precision, as backends.cuda.matmul.allow_tf32 sets it), so it reads and sets that one setting.
- deterministic: reads and sets use_deterministic_algorithms, under which convolutions run
  deterministic cuDNN algorithms only (and cuBLAS deterministic reductions).
- benchmark and enabled are kept as set: the library always takes cuDNN's heuristic choice
  (never timing, so benchmark=True changes nothing) and has no convolution path besides cuDNN on
  the GPU.
- is_available(): whether the build has cuDNN and a GPU is usable; version(): cuDNN's version."""
import sys
import types

from .. import _C
from . import cuda as _cuda


def is_available():
    return _C._built_with_cudnn and _C._cuda.is_available()


def version():
    """The version of the cuDNN library in use (e.g. 90100 for 9.1.0); None in a build without cuDNN."""
    return _C._cudnn_version() if _C._built_with_cudnn else None


class _CudnnModule(types.ModuleType):
    """This module, with allow_tf32 and deterministic as properties over the library's settings."""

    # The same setting as cuda.matmul.allow_tf32 (docs/pytorch_differences.md).
    allow_tf32 = property(lambda self: _cuda.matmul.allow_tf32,
                          lambda self, allow: setattr(_cuda.matmul, "allow_tf32", allow))

    @property
    def deterministic(self):
        return _C.are_deterministic_algorithms_enabled()

    @deterministic.setter
    def deterministic(self, on):
        _C.use_deterministic_algorithms(bool(on))


benchmark = False
enabled = True

sys.modules[__name__].__class__ = _CudnnModule
