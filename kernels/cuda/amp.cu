// CUDA kernels of loss scaling (kernels/common/amp_scale.h): every gradient of a dtype unscaled and
// checked in one multi-tensor launch (or a few), without reading anything back to the host, and the
// scale update in a one-thread kernel.
#include "core/dtype_dispatch.h"
#include "dispatch/amp.h"
#include "kernels/cuda/multi_tensor.cuh"

namespace rtx::cuda {
namespace {

template <typename T>
struct UnscaleChunk {
  float* found_inf;
  const float* inv_scale;
  __device__ void operator()(const MultiTensorMeta<1>& meta, int tensor, int64_t begin, int64_t end) const {
    T* grad = static_cast<T*>(meta.addresses[0][tensor]);
    const float inv = *inv_scale;
    bool all_finite = true;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      all_finite &= kernels::unscale_element(grad, i, inv);
    // Every writer stores the same value, so the race is harmless.
    if (!all_finite) *found_inf = 1.0f;
  }
};

void non_finite_check_and_unscale_cuda(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  RTX_DISPATCH_FLOATS(grads[0].dtype(), "_amp_foreach_non_finite_check_and_unscale_", [&] {
    multi_tensor_apply<1>(found_inf.device(), {&grads}, {},
                          UnscaleChunk<scalar_t>{found_inf.data_ptr<float>(), inv_scale.data_ptr<float>()});
  });
}

__global__ void update_scale_grid(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                                  double backoff_factor, int64_t growth_interval) {
  kernels::update_scale_element(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval);
}

void update_scale_cuda(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                       double growth_factor, double backoff_factor, int64_t growth_interval) {
  detail::KernelScope scope(scale.device());
  update_scale_grid<<<1, 1, 0, scope.stream()>>>(scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(),
                                                 found_inf.data_ptr<float>(), growth_factor, backoff_factor,
                                                 growth_interval);
  RTX_CUDA_CHECK_LAUNCH();
}

}  // namespace

RTX_REGISTER_KERNELS(amp_cuda) { RTX_AMP_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
