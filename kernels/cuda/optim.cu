// CUDA kernel of the fused Adam/AdamW update (kernels/common/adam_step.h): a grid-stride loop over
// the elements, each tensor read and written once.
#include <algorithm>

#include "backend/cuda/register.h"
#include "backend/cuda/runtime.h"
#include "core/dtype_dispatch.h"
#include "dispatch/optim.h"

namespace rtx::cuda {
namespace {

constexpr int kAdamThreads = 256;
constexpr int64_t kAdamMaxBlocks = 8192;

template <typename T>
__global__ void adam_step_grid(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t n,
                                 const kernels::AdamStep step) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    kernels::adam_step_element(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, i, step);
}

void adam_step_cuda(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_exp_avg_sq, const kernels::AdamStep& step) {
  detail::KernelScope scope(param.device());
  const int64_t n = param.numel();
  const int blocks = static_cast<int>(std::min<int64_t>((n + kAdamThreads - 1) / kAdamThreads, kAdamMaxBlocks));
  RTX_DISPATCH_FLOATS(param.dtype(), "adam_update", [&] {
    using T = scalar_t;
    adam_step_grid<T><<<blocks, kAdamThreads, 0, scope.stream()>>>(
        param.data_ptr<T>(), grad.data_ptr<T>(), exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(),
        max_exp_avg_sq.defined() ? max_exp_avg_sq.data_ptr<T>() : nullptr, n, step);
    RTX_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void register_optim_kernels() { kernels::adam_step_kernel.set(kCUDA, adam_step_cuda); }

}  // namespace rtx::cuda
