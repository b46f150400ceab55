// One element of the fused SGD update, shared by the CPU and CUDA kernels: PyTorch's rule (maximize,
// weight decay, momentum with dampening, Nesterov) computed in the opmath type, each tensor read and
// written once. Master weights and gradient scales work as in adam_step.h.
#pragma once

#include <cstdint>

#include "kernels/common/opmath.h"
#include "rtx/export.h"

namespace rtx::kernels {

// first: the momentum buffers are new, so that they start as the (decayed) gradient.
struct SgdStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize, first;
};

// The tensors of one parameter (T: parameter and gradient, S: state); master is null without master
// weights, momentum_buffer without momentum.
template <typename T, typename S>
struct SgdPointers {
  T* param;
  T* grad;
  S* master;
  S* momentum_buffer;
};

template <typename T, typename S>
RTX_INLINE void sgd_step_element(const SgdPointers<T, S>& t, int64_t i, const SgdStep& s, const float* grad_scale) {
  using A = detail::opmath_t<S>;
  A p = t.master != nullptr ? static_cast<A>(t.master[i]) : static_cast<A>(t.param[i]);
  A g = static_cast<A>(t.grad[i]);
  if (grad_scale != nullptr) {
    g = g / static_cast<A>(*grad_scale);
    t.grad[i] = static_cast<T>(g);
  }
  if (s.maximize) g = -g;
  if (s.weight_decay != 0) g = g + static_cast<A>(s.weight_decay) * p;
  if (t.momentum_buffer != nullptr) {
    A buf = g;
    if (!s.first)
      buf = static_cast<A>(s.momentum) * static_cast<A>(t.momentum_buffer[i]) + static_cast<A>(1 - s.dampening) * g;
    t.momentum_buffer[i] = static_cast<S>(buf);
    g = s.nesterov ? g + static_cast<A>(s.momentum) * buf : buf;
  }
  p = p + static_cast<A>(-s.lr) * g;
  if (t.master != nullptr) t.master[i] = static_cast<S>(p);
  t.param[i] = static_cast<T>(p);
}

}  // namespace rtx::kernels
