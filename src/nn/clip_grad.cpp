// nn::utils::clip_grad_norm_ and clip_grad_value_: gradient clipping over a list of parameters, in
// place on the gradients and without a host round trip (the scale stays on the device).
#include <cmath>

#include "core/check.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn::utils {

Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  TensorList grads;
  for (const Tensor& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  const Device device = grads.front().device();
  TensorList norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(g.norm(norm_type).to(device));
  const Tensor total = stack(norms).norm(norm_type);
  if (error_if_nonfinite) {
    const double value = total.to(kFloat64).item<double>();
    RTX_CHECK(std::isfinite(value), ValueError,
              "[clip_grad_norm_] the total norm of order {} of the gradients is {}; pass error_if_nonfinite=false "
              "to clip anyway", norm_type, value);
  }
  const Tensor scale = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (Tensor g : grads) g.mul_(g.device() == device ? scale : scale.to(g.device()));
  return total;
}

void clip_grad_value_(const TensorList& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    Tensor g = p.grad();
    if (g.defined()) clamp_(g, -clip_value, clip_value);
  }
}

}  // namespace rtx::nn::utils
