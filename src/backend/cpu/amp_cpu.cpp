// CPU kernels of loss scaling (kernels/common/amp_scale.h): unscaling and checking gradients tensor
// by tensor, each split over threads, and the scale update.
#include <atomic>

#include "backend/cpu/parallel.h"
#include "core/dtype_dispatch.h"
#include "dispatch/amp.h"

namespace rtx::cpu {
namespace {

void non_finite_check_and_unscale_cpu(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  const float inv = *inv_scale.data_ptr<float>();
  std::atomic<bool> any_non_finite{false};
  RTX_DISPATCH_FLOATS(grads[0].dtype(), "_amp_foreach_non_finite_check_and_unscale_", [&] {
    for (const Tensor& grad : grads) {
      scalar_t* g = grad.data_ptr<scalar_t>();
      parallel_for(grad.numel(), kGrainSize, [&](int64_t b, int64_t e) {
        bool all_finite = true;
        for (int64_t i = b; i < e; ++i) all_finite &= kernels::unscale_element(g, i, inv);
        if (!all_finite) any_non_finite.store(true, std::memory_order_relaxed);
      });
    }
  });
  if (any_non_finite.load()) *found_inf.data_ptr<float>() = 1.0f;
}

void update_scale_cpu(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                      double growth_factor, double backoff_factor, int64_t growth_interval) {
  kernels::update_scale_element(scale.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(),
                                found_inf.data_ptr<float>(), growth_factor, backoff_factor, growth_interval);
}

}  // namespace

RTX_REGISTER_KERNELS(amp_cpu) { RTX_AMP_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
