// One element of the fused Adam/AdamW update, shared by the CPU and CUDA kernels: PyTorch's rule
// (maximize, L2 or decoupled weight decay, moment updates, AMSGrad, bias-corrected step) computed in
// the opmath type, each tensor read and written once.
#pragma once

#include <cmath>

#include "kernels/common/opmath.h"
#include "rtx/export.h"

namespace rtx::kernels {

// The scalars of one update; bias_correction1 = 1 - beta1^step, bias_correction2_sqrt = sqrt(1 - beta2^step).
struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, maximize;
  double bias_correction1, bias_correction2_sqrt;
};

// max_exp_avg_sq is null without AMSGrad.
template <typename T>
RTX_INLINE void adam_step_element(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq, int64_t i,
                                  const AdamStep& s) {
  using A = detail::opmath_t<T>;
  A p = static_cast<A>(param[i]);
  A g = static_cast<A>(grad[i]);
  if (s.maximize) g = -g;
  if (s.weight_decay != 0) {
    if (s.decoupled_weight_decay) p = p * static_cast<A>(1 - s.lr * s.weight_decay);
    else g = g + static_cast<A>(s.weight_decay) * p;
  }
  A m = static_cast<A>(exp_avg[i]);
  m = m + static_cast<A>(1 - s.beta1) * (g - m);
  const A v = static_cast<A>(exp_avg_sq[i]) * static_cast<A>(s.beta2) + static_cast<A>(1 - s.beta2) * g * g;
  A second = v;
  if (max_exp_avg_sq != nullptr) {
    const A vmax = static_cast<A>(max_exp_avg_sq[i]);
    second = vmax > v ? vmax : v;
    max_exp_avg_sq[i] = static_cast<T>(second);
  }
  const A denom = std::sqrt(second) / static_cast<A>(s.bias_correction2_sqrt) + static_cast<A>(s.eps);
  param[i] = static_cast<T>(p + static_cast<A>(-s.lr / s.bias_correction1) * m / denom);
  exp_avg[i] = static_cast<T>(m);
  exp_avg_sq[i] = static_cast<T>(v);
}

}  // namespace rtx::kernels
