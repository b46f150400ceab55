// nn::Conv2d: 2-d convolution with a square kernel, initialized like PyTorch.
#include <cmath>

#include "core/check.h"
#include "format.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding,
               bool has_bias)
    : in_channels(in_channels), out_channels(out_channels), kernel_size(kernel_size), stride(stride), padding(padding) {
  RTX_CHECK(in_channels > 0 && out_channels > 0 && kernel_size > 0, ValueError,
            "[Conv2d] in_channels, out_channels and kernel_size must be positive, got {}, {} and {}", in_channels,
            out_channels, kernel_size);
  RTX_CHECK(stride > 0 && padding >= 0, ValueError, "[Conv2d] expected stride > 0 and padding >= 0, got {} and {}",
            stride, padding);
  weight = register_parameter("weight", empty({out_channels, in_channels, kernel_size, kernel_size}));
  if (has_bias) bias = register_parameter("bias", empty({out_channels}));
  reset_parameters();
}

void Conv2d::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::fan_in_and_fan_out(weight).first));
    NoGradGuard no_grad;
    uniform_(bias, -bound, bound);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, {stride, stride}, {padding, padding});
}

std::string Conv2d::extra_repr() const {
  std::string out = fmt::format("{}, {}, kernel_size={}, stride={}", in_channels, out_channels,
                                detail::py_tuple({kernel_size, kernel_size}), detail::py_tuple({stride, stride}));
  if (padding != 0) out += ", padding=" + detail::py_tuple({padding, padding});
  if (!bias.defined()) out += ", bias=False";
  return out;
}

}  // namespace rtx::nn
