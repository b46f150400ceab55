// nn::MaxPool2d: max over square windows of NCHW inputs.
#include "core/check.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

MaxPool2d::MaxPool2d(int64_t kernel_size, std::optional<int64_t> stride, int64_t padding)
    : kernel_size(kernel_size), stride(stride.value_or(kernel_size)), padding(padding) {
  RTX_CHECK(kernel_size > 0 && this->stride > 0, ValueError,
            "[MaxPool2d] kernel_size and stride must be positive, got {} and {}", kernel_size, this->stride);
  RTX_CHECK(padding >= 0 && 2 * padding <= kernel_size, ValueError,
            "[MaxPool2d] padding must be in [0, kernel_size / 2], got {} for kernel_size {}", padding, kernel_size);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, {kernel_size, kernel_size}, {stride, stride}, {padding, padding});
}

std::string MaxPool2d::extra_repr() const {
  return fmt::format("kernel_size={}, stride={}, padding={}, dilation=1, ceil_mode=False", kernel_size, stride,
                     padding);
}

}  // namespace rtx::nn
