// The element rules of loss scaling, shared by the CPU and CUDA kernels: unscaling a gradient while
// checking it for inf/NaN, and PyTorch's update of the scale and its growth tracker.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/opmath.h"
#include "rtx/export.h"

namespace rtx::kernels {

// grad[i] *= inv_scale (left as it is when inv_scale is 1); returns whether the value read was finite.
template <typename T>
RTX_INLINE bool unscale_element(T* grad, int64_t i, float inv_scale) {
  using A = detail::opmath_t<T>;
  const A value = static_cast<A>(grad[i]);
  if (inv_scale != 1.0f) grad[i] = static_cast<T>(value * static_cast<A>(inv_scale));
  return std::isfinite(value);
}

// After a step that found inf/NaN gradients the scale backs off and the tracker restarts; after
// growth_interval clean steps in a row the scale grows (unless it would overflow float32) and the
// tracker restarts; otherwise the tracker counts the clean step.
RTX_INLINE void update_scale_element(float* scale, int32_t* growth_tracker, const float* found_inf,
                                     double growth_factor, double backoff_factor, int64_t growth_interval) {
  if (*found_inf != 0.0f) {
    *scale = static_cast<float>(static_cast<double>(*scale) * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*growth_tracker) + 1;
  if (successful == growth_interval) {
    const auto grown = static_cast<float>(static_cast<double>(*scale) * growth_factor);
    if (std::isfinite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = static_cast<int32_t>(successful);
  }
}

}  // namespace rtx::kernels
