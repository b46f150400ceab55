# CUDA toolchain detection for rtx.
#
# Declares RTX_WITH_CUDA (default ON when a working CUDA compiler is found) and,
# when it is ON, enables the CUDA language and finds the CUDA toolkit.
include_guard(GLOBAL)

# Prefer the conventional toolkit location when the user gave no compiler.
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
   AND EXISTS "/usr/local/cuda/bin/nvcc")
  set(ENV{CUDACXX} "/usr/local/cuda/bin/nvcc")
endif()
# nvcc must use the same host compiler as the C++ sources.
if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER AND NOT DEFINED ENV{CUDAHOSTCXX}
   AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(ENV{CUDAHOSTCXX} "${CMAKE_CXX_COMPILER}")
endif()

if(NOT DEFINED RTX_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_rtx_cuda_default ON)
  else()
    set(_rtx_cuda_default OFF)
  endif()
else()
  set(_rtx_cuda_default OFF)
endif()
option(RTX_WITH_CUDA "Build the CUDA backend" ${_rtx_cuda_default})
unset(_rtx_cuda_default)

if(RTX_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures to build for")
  endif()
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
  endif()
  # Link the shared CUDA runtime (libcudart.so), never the static one.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "rtx: CUDA ${CMAKE_CUDA_COMPILER_VERSION} "
                 "(architectures: ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "rtx: CUDA backend disabled")
endif()
