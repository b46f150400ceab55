// Kernel table of the fused optimizer updates: one pass over contiguous tensors of one float dtype
// on one device.
#pragma once

#include "core/dispatch.h"
#include "kernels/common/adam_step.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// param, exp_avg, exp_avg_sq and (with AMSGrad, else undefined) max_exp_avg_sq updated in place from grad.
using AdamStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamStep& step);

RTX_KERNEL(adam_step_kernel, AdamStepFn);

}  // namespace rtx::kernels
