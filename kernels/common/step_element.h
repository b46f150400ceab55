// What every optimizer's element update starts and ends with, shared by adam_step.h and sgd_step.h:
// the value it updates (the float32 master copy when there is one, else the parameter), the
// gradient unscaled by a GradScaler's scale (and stored back unscaled, as PyTorch's fused kernels
// do), and the write of the result to the master copy and, rounded, to the parameter.
#pragma once

#include <cstdint>

#include "rtx/export.h"

namespace rtx::kernels {

template <typename A, typename T, typename S>
RTX_INLINE A load_weight(const T* param, const S* master, int64_t i) {
  return master != nullptr ? static_cast<A>(master[i]) : static_cast<A>(param[i]);
}

// grad_scale: null, or the scale every gradient is divided by.
template <typename A, typename T>
RTX_INLINE A load_grad(T* grad, int64_t i, const float* grad_scale) {
  A g = static_cast<A>(grad[i]);
  if (grad_scale != nullptr) {
    g = g / static_cast<A>(*grad_scale);
    grad[i] = static_cast<T>(g);
  }
  return g;
}

template <typename A, typename T, typename S>
RTX_INLINE void store_weight(T* param, S* master, int64_t i, A p) {
  if (master != nullptr) master[i] = static_cast<S>(p);
  param[i] = static_cast<T>(p);
}

}  // namespace rtx::kernels
