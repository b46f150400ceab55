"""rustytorch.backends.cuda: matmul.allow_tf32 (PyTorch's switch for TF32 float32 matrix products),
which reads and sets the float32 matmul precision ("high" allows TF32, "highest" does not), and
is_built()."""
from .. import _C


class _Matmul:
    """cuda.matmul: allow_tf32 as a view of set_float32_matmul_precision."""

    @property
    def allow_tf32(self):
        return _C.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, allow):
        _C.set_float32_matmul_precision("high" if allow else "highest")


matmul = _Matmul()


def is_built():
    """Whether this build of the library includes the CUDA backend (a GPU may still be missing)."""
    return _C.built_with_cuda()
