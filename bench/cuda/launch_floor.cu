// The host time of a bare kernel launch on this machine, measured like the tiny ops of
// bench/torch/compare.cpp (batches of 256 launches timed before the GPU is drained, best of 7): the
// floor under the host time of any eager CUDA op, which spends at least one launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {

__global__ void increment_kernel(float* p) { p[threadIdx.x] += 1.0f; }

bool ok(cudaError_t err) {
  if (err == cudaSuccess) return true;
  std::printf("launch_floor: %s\n", cudaGetErrorString(err));
  return false;
}

}  // namespace

int main() {
  float* p = nullptr;
  cudaStream_t created = nullptr;
  if (!ok(cudaMalloc(&p, sizeof(float))) || !ok(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking))) return 1;
  constexpr int kBatch = 256, kBatches = 80;
  for (cudaStream_t stream : {static_cast<cudaStream_t>(nullptr), created}) {
    increment_kernel<<<1, 1, 0, stream>>>(p);
    if (!ok(cudaDeviceSynchronize())) return 1;
    double best = 1e30;
    for (int r = 0; r < 7; ++r) {
      double total = 0;
      for (int k = 0; k < kBatches; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < kBatch; ++i) increment_kernel<<<1, 1, 0, stream>>>(p);
        total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (!ok(cudaDeviceSynchronize())) return 1;
      }
      best = std::min(best, total / (kBatch * kBatches));
    }
    std::printf("bare kernel launch, %s: %.2f us host time\n", stream != nullptr ? "created stream" : "default stream",
                best);
  }
  return ok(cudaGetLastError()) ? 0 : 1;
}
