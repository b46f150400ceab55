// Kernel tables of loss scaling: unscaling gradients while checking them for inf/NaN, and updating
// the scale (kernels/common/amp_scale.h holds both rules).
#pragma once

#include "core/dispatch.h"
#include "kernels/common/amp_scale.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// grads: contiguous tensors of one float dtype on the device of found_inf and inv_scale (1-element
// float32 tensors); sets found_inf to 1 when any element read is inf or NaN.
using NonFiniteCheckAndUnscaleFn = void(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale);
// scale (float32), growth_tracker (int32) and found_inf (float32): 1-element tensors of one device.
using UpdateScaleFn = void(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                           double growth_factor, double backoff_factor, int64_t growth_interval);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_AMP_KERNELS(X)                                    \
  X(non_finite_check_and_unscale, NonFiniteCheckAndUnscaleFn) \
  X(update_scale, UpdateScaleFn)
RTX_AMP_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
