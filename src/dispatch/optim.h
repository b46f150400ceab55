// Kernel tables of the fused optimizer updates: one step of every tensor of a list in one pass each,
// the lists' tensors contiguous and on one device.
#pragma once

#include <type_traits>

#include "core/dispatch.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/adam_step.h"
#include "kernels/common/sgd_step.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// Parallel lists, entry i belonging to params[i]: params and grads share one float dtype, the other
// tensors another (float32 with master weights, else the params' dtype). Lists a step does not use
// are empty: max_exp_avg_sqs without AMSGrad, masters without master weights, steps when the host
// keeps the step count (then AdamStep holds its bias corrections); steps are 1-element float32
// tensors counting this update.
struct AdamTensors {
  const TensorList& params;
  const TensorList& grads;
  const TensorList& masters;
  const TensorList& exp_avgs;
  const TensorList& exp_avg_sqs;
  const TensorList& max_exp_avg_sqs;
  const TensorList& steps;
};

// momentum_buffers is empty without momentum, masters without master weights.
struct SgdTensors {
  const TensorList& params;
  const TensorList& grads;
  const TensorList& masters;
  const TensorList& momentum_buffers;
};

// The scalars' pointers (StepScalars) address memory on the tensors' device. With steps, the kernel
// first adds one to each step count (CUDA: a launch of its own), then reads it; a nonzero found_inf
// leaves every tensor, step counts included, as it was.
using AdamMultiStepFn = void(const AdamTensors& tensors, const AdamStep& step, const StepScalars& scalars);
using SgdMultiStepFn = void(const SgdTensors& tensors, const SgdStep& step, const StepScalars& scalars);

// Calls f(T{}, S{}) with the parameters' type T and the state's S: float with master weights (16-bit
// parameters only), else T.
template <typename F>
void dispatch_param_and_state_types(DType param_dtype, bool master, const char* op, const F& f) {
  RTX_DISPATCH_FLOATS(param_dtype, op, [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<detail::opmath_t<T>, T>) {
      f(T{}, T{});
    } else if (master) {
      f(T{}, float{});
    } else {
      f(T{}, T{});
    }
  });
}

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_OPTIM_KERNELS(X)          \
  X(adam_multi_step, AdamMultiStepFn) \
  X(sgd_multi_step, SgdMultiStepFn)
RTX_OPTIM_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
