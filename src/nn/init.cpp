// nn::init: PyTorch's fan-based weight initializers, drawing from the library's generator.
#include <cmath>

#include "core/check.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn::init {

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& weight) {
  RTX_CHECK(weight.dim() >= 2, ValueError, "[fan_in_and_fan_out] expected a weight of at least 2 dims, got {} dims",
            weight.dim());
  int64_t receptive = 1;
  for (int64_t d = 2; d < weight.dim(); ++d) receptive *= weight.size(d);
  return {weight.size(1) * receptive, weight.size(0) * receptive};
}

Tensor& kaiming_uniform_(Tensor& weight, double a) {
  const int64_t fan_in = fan_in_and_fan_out(weight).first;
  RTX_CHECK(fan_in > 0, ValueError, "[kaiming_uniform_] the weight has fan_in 0");
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = std::sqrt(3.0) * gain / std::sqrt(static_cast<double>(fan_in));
  NoGradGuard no_grad;
  return uniform_(weight, -bound, bound);
}

Tensor& xavier_uniform_(Tensor& weight, double gain) {
  const auto [fan_in, fan_out] = fan_in_and_fan_out(weight);
  RTX_CHECK(fan_in + fan_out > 0, ValueError, "[xavier_uniform_] the weight has fan_in + fan_out 0");
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  NoGradGuard no_grad;
  return uniform_(weight, -bound, bound);
}

}  // namespace rtx::nn::init
