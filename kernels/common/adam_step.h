// One element of the fused Adam/AdamW update, shared by the CPU and CUDA kernels: PyTorch's rule
// (maximize, L2 or decoupled weight decay, moment updates, AMSGrad, bias-corrected step) computed in
// the opmath type, each tensor read and written once. With master weights the update runs on the
// float32 master copy and the (float16/bfloat16) parameter receives it rounded; with a gradient
// scale the gradient is unscaled first and stored unscaled, as PyTorch's fused kernels do.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/opmath.h"
#include "kernels/common/step_element.h"
#include "rtx/export.h"

namespace rtx::kernels {

// base^n by repeated squaring: the same double operations on every device, so that a bias
// correction computed on the host (step counts kept by the host) and one computed on the device
// (step counts kept in tensors) agree to the bit.
RTX_INLINE double integer_power(double base, int64_t n) {
  double result = 1.0;
  while (n > 0) {
    if (n & 1) result *= base;
    base *= base;
    n >>= 1;
  }
  return result;
}

// Values a step reads from memory instead of taking them from the host (null when unused): the
// learning rate, the scale every gradient is divided by, and the flag that turns the whole step into
// a no-op (a GradScaler's found_inf).
struct StepScalars {
  const double* lr = nullptr;
  const float* grad_scale = nullptr;
  const float* found_inf = nullptr;
};

// The scalars of one update; bias_correction1 = 1 - beta1^step, bias_correction2_sqrt = sqrt(1 - beta2^step).
struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay, maximize;
  double bias_correction1, bias_correction2_sqrt;

  // Sets the bias corrections of the step that `step` counts (this update included).
  RTX_INLINE void set_step(double step) {
    const auto n = static_cast<int64_t>(step);
    bias_correction1 = 1 - integer_power(beta1, n);
    bias_correction2_sqrt = std::sqrt(1 - integer_power(beta2, n));
  }
};

// The tensors of one parameter: T is the parameter's and gradient's type, S the state's (float with
// master weights, else T). master is null without master weights, max_exp_avg_sq without AMSGrad.
template <typename T, typename S>
struct AdamPointers {
  T* param;
  T* grad;
  S* master;
  S* exp_avg;
  S* exp_avg_sq;
  S* max_exp_avg_sq;
};

template <typename T, typename S>
RTX_INLINE void adam_step_element(const AdamPointers<T, S>& t, int64_t i, const AdamStep& s, const float* grad_scale) {
  using A = detail::opmath_t<S>;
  A p = load_weight<A>(t.param, t.master, i);
  A g = load_grad<A>(t.grad, i, grad_scale);
  if (s.maximize) g = -g;
  // Decoupled decay as a factor, exactly 1 without it, so that a loop over elements has no branch
  // for it.
  p = p * static_cast<A>(s.decoupled_weight_decay ? 1 - s.lr * s.weight_decay : 1.0);
  if (s.weight_decay != 0 && !s.decoupled_weight_decay) g = g + static_cast<A>(s.weight_decay) * p;
  A m = static_cast<A>(t.exp_avg[i]);
  m = m + static_cast<A>(1 - s.beta1) * (g - m);
  const A v = static_cast<A>(t.exp_avg_sq[i]) * static_cast<A>(s.beta2) + static_cast<A>(1 - s.beta2) * g * g;
  A second = v;
  if (t.max_exp_avg_sq != nullptr) {
    const A vmax = static_cast<A>(t.max_exp_avg_sq[i]);
    second = vmax > v ? vmax : v;
    t.max_exp_avg_sq[i] = static_cast<S>(second);
  }
  const A denom = std::sqrt(second) / static_cast<A>(s.bias_correction2_sqrt) + static_cast<A>(s.eps);
  p = p + static_cast<A>(-s.lr / s.bias_correction1) * m / denom;
  store_weight(t.param, t.master, i, p);
  t.exp_avg[i] = static_cast<S>(m);
  t.exp_avg_sq[i] = static_cast<S>(v);
}

}  // namespace rtx::kernels
