// nn::utils::clip_grad_norm_ and clip_grad_value_: gradient clipping over a list of parameters, in
// place on the gradients and without a host round trip (the scale stays on the device). The norms
// and the scaling take the multi-tensor ops, a few kernel launches per device for any number of
// gradients.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn::utils {

Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  // The gradients by device, devices in order of first appearance.
  std::vector<Device> devices;
  std::vector<TensorList> grads;
  for (const Tensor& p : parameters) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const size_t d = static_cast<size_t>(std::find(devices.begin(), devices.end(), g.device()) - devices.begin());
    if (d == devices.size()) {
      devices.push_back(g.device());
      grads.emplace_back();
    }
    grads[d].push_back(g);
  }
  if (devices.empty()) return zeros({});
  const Device device = devices.front();
  TensorList norms;  // each device's gradient norms, stacked, on the first gradient's device
  for (const TensorList& on_device : grads) norms.push_back(stack(foreach_norm(on_device, norm_type)).to(device));
  const Tensor total = (norms.size() == 1 ? norms.front() : cat(norms)).norm(norm_type);
  if (error_if_nonfinite) {
    const double value = total.to(kFloat64).item<double>();
    RTX_CHECK(std::isfinite(value), ValueError,
              "[clip_grad_norm_] the total norm of order {} of the gradients is {}; pass error_if_nonfinite=false "
              "to clip anyway", norm_type, value);
  }
  const Tensor scale = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (size_t d = 0; d < devices.size(); ++d) foreach_mul_(grads[d], d == 0 ? scale : scale.to(devices[d]));
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
