// Error checks for runtime calls and kernel launches: a failure raises rtx::Error (OutOfMemoryError
// for allocation failures) quoting the call, its file and line, and the runtime's message.
#pragma once

#include <cstdint>

#include "kernels/cuda/compat.h"
#include "rtx/export.h"

namespace rtx::cuda::detail {
[[noreturn]] RTX_API void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
// The calling thread's kernel launches (RTX_CUDA_CHECK_LAUNCH counts each, count_library_call each
// cuBLASLt and cuDNN call), whether run or captured: rtx::cuda::kernel_launches().
inline thread_local uint64_t t_kernel_launches = 0;
inline void count_library_call() { ++t_kernel_launches; }
}  // namespace rtx::cuda::detail

#define RTX_CUDA_CHECK(call)                                                                                \
  do {                                                                                                      \
    const cudaError_t rtx_err_ = (call);                                                                    \
    if (rtx_err_ != cudaSuccess) ::rtx::cuda::detail::throw_cuda_error(rtx_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: counts it and reports a bad launch configuration at the launch site.
#define RTX_CUDA_CHECK_LAUNCH()                  \
  do {                                           \
    ++::rtx::cuda::detail::t_kernel_launches;    \
    RTX_CUDA_CHECK(cudaGetLastError());          \
  } while (0)
