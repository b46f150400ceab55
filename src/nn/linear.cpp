// nn::Linear: y = x weight^T + bias, initialized like PyTorch.
#include <cmath>

#include "core/check.h"
#include "format.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias)
    : in_features(in_features), out_features(out_features) {
  RTX_CHECK(in_features > 0 && out_features > 0, ValueError,
            "[Linear] in_features and out_features must be positive, got {} and {}", in_features, out_features);
  weight = register_parameter("weight", empty({out_features, in_features}));
  if (has_bias) bias = register_parameter("bias", empty({out_features}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    NoGradGuard no_grad;
    uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

std::string Linear::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features,
                     detail::py_bool(bias.defined()));
}

}  // namespace rtx::nn
