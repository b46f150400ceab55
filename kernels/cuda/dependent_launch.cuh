// Programmatic dependent launch (compute capability 9.0 and up): a kernel launched through
// launch_dependent may be scheduled while the kernel before it on the stream is still running, so
// its launch latency hides behind that kernel's tail; in a CUDA graph the capture records the same
// dependency as a programmatic edge. Such a kernel's first statement is wait_for_prior_grids(),
// which returns once the kernels before it have completed and their writes are visible, so it sees
// memory exactly as after an ordinary launch. allow_dependents_to_launch() then lets the next
// dependent kernel be scheduled: at most two of them are resident on a stream at a time.
// Elsewhere (older GPUs, HIP) the same calls are an ordinary launch and two no-ops.
#pragma once

#include <utility>

#include "backend/cuda/runtime.h"
#include "kernels/cuda/check.h"

namespace rtx::cuda {

__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIP_PLATFORM_AMD__)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependents_to_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__HIP_PLATFORM_AMD__)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, 0, scope's stream>>>(args...) as a dependent launch where the
// device supports it. The kernel must begin with wait_for_prior_grids().
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), unsigned grid, unsigned block, const detail::KernelScope& scope,
                      Args&&... args) {
#if defined(__HIP_PLATFORM_AMD__)
  kernel<<<grid, block, 0, scope.stream()>>>(std::forward<Args>(args)...);
#else
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.stream = scope.stream();
  config.attrs = &attribute;
  config.numAttrs = detail::supports_dependent_launch(scope.device()) ? 1 : 0;
  RTX_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(std::forward<Args>(args))...));
#endif
  RTX_CUDA_CHECK_LAUNCH();
}

}  // namespace rtx::cuda
