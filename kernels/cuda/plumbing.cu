// Minimal CUDA code that proves the toolchain, the runtime link and the
// device query work. Used by the tests to decide whether CUDA tests can run.
#include "kernels/cuda/plumbing.h"

#include <cuda_runtime.h>

namespace rtx::cuda::detail {
namespace {

__global__ void plumbing_iota_kernel(int* out, int n, int offset) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    out[i] = offset + i;
  }
}

}  // namespace

int plumbing_probe() noexcept {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // reset the runtime error state
    return 0;
  }
  return count;
}

bool plumbing_kernel_check() noexcept {
  if (plumbing_probe() <= 0) {
    return false;
  }
  constexpr int kN = 300;
  constexpr int kOffset = 7;
  int* device_buffer = nullptr;
  if (cudaMalloc(&device_buffer, kN * sizeof(int)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  constexpr int kThreads = 128;
  plumbing_iota_kernel<<<(kN + kThreads - 1) / kThreads, kThreads>>>(device_buffer, kN, kOffset);
  int host[kN] = {};
  bool ok = cudaGetLastError() == cudaSuccess &&
            cudaMemcpy(host, device_buffer, kN * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
  for (int i = 0; ok && i < kN; ++i) {
    ok = host[i] == kOffset + i;
  }
  (void)cudaFree(device_buffer);
  (void)cudaGetLastError();
  return ok;
}

}  // namespace rtx::cuda::detail
