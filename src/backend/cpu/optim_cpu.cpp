// CPU kernel of the fused Adam/AdamW update (kernels/common/adam_step.h), split over threads by
// element ranges.
#include "backend/cpu/parallel.h"
#include "backend/cpu/register.h"
#include "core/dtype_dispatch.h"
#include "dispatch/optim.h"

namespace rtx::cpu {
namespace {

void adam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const Tensor& max_exp_avg_sq, const kernels::AdamStep& step) {
  RTX_DISPATCH_FLOATS(param.dtype(), "adam_update", [&] {
    using T = scalar_t;
    T* p = param.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* vmax = max_exp_avg_sq.defined() ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    parallel_for(param.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) kernels::adam_step_element(p, g, m, v, vmax, i, step);
    });
  });
}

}  // namespace

void register_optim_kernels() { kernels::adam_step_kernel.set(kCPU, adam_step_cpu); }

}  // namespace rtx::cpu
