// rtx::amp: the two ops of loss scaling (PyTorch's torch._amp_foreach_non_finite_check_and_unscale_
// and torch._amp_update_scale_), on which a GradScaler is built. Both run on the tensors' device
// and read nothing back to the host.
//
//   Tensor found_inf = zeros({1}, TensorOptions(kFloat32, dev)), inv_scale = ...;
//   amp::non_finite_check_and_unscale_(grads, found_inf, inv_scale);
//   amp::update_scale_(scale, growth_tracker, found_inf, 2.0, 0.5, 2000);
#pragma once

#include <cstdint>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::amp {

// Multiplies every gradient by inv_scale (a 1-element float32 tensor) in place and sets found_inf
// (1-element float32) to 1 when any element of any gradient is inf or NaN; found_inf is never reset
// to 0. Gradients of several float dtypes may be mixed; they, found_inf and inv_scale share one
// device. The gradients of one dtype go through one fused kernel (a few launches on CUDA).
RTX_API void non_finite_check_and_unscale_(const TensorList& grads, Tensor& found_inf, const Tensor& inv_scale);

// PyTorch's scale update, in place: when found_inf (1-element float32) is nonzero the scale
// (1-element float32) is multiplied by backoff_factor and growth_tracker (1-element int32) set to 0;
// otherwise the tracker counts one more clean step and, when it reaches growth_interval, the scale
// is multiplied by growth_factor (unless that overflows float32) and the tracker set to 0.
RTX_API void update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                           double backoff_factor, int64_t growth_interval);

}  // namespace rtx::amp
