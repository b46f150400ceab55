// One element of the fused SGD update, shared by the CPU and CUDA kernels: PyTorch's rule (maximize,
// weight decay, momentum with dampening, Nesterov) computed in the opmath type, each tensor read and
// written once. Master weights and gradient scales work as in adam_step.h.
#pragma once

#include <cstdint>

#include "kernels/common/opmath.h"
#include "kernels/common/step_element.h"
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
  A p = load_weight<A>(t.param, t.master, i);
  A g = load_grad<A>(t.grad, i, grad_scale);
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
  store_weight(t.param, t.master, i, p);
}

}  // namespace rtx::kernels
