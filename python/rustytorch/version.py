"""rustytorch.version: what scripts print or check of torch.version: the library's version, the CUDA
toolkit version of its CUDA backend (None without one) and hip (None: the build is for CUDA)."""
from . import _C

__version__ = _C.__version__
cuda = _C._cuda_version() or None
hip = None
debug = False
