"""rustytorch.utils: data loading, gradient checkpointing and the location of the C++ package for CMake."""
import os

from . import checkpoint, data  # noqa: F401

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Give to CMake as CMAKE_PREFIX_PATH so that find_package(rtx CONFIG) finds the library this
#: package was built with (set when the package was installed with pip).
cmake_prefix_path = _PACKAGE_DIR
