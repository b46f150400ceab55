// Kernel tables of the pooling family (the signatures every backend implements) and its geometry.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// Geometry of a 2-d pooling window; index 0 is the height, 1 the width. The output size (which
// ceil_mode decides) is the output tensor's.
struct Pool2dParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  bool count_include_pad = true;  // average pooling: divide by the window size including padding
};

// Pooling kernels see contiguous [N, C, H, W] inputs and [N, C, OH, OW] outputs of the input's dtype.
// indices: int64, the flat h * W + w position of each window's max within its input plane (-1, with
// a -inf value, for a window that covers no input element, which dilation allows).
using MaxPool2dFn = void(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p);
// grad_x (every element written) = grad_out summed into the positions indices name (-1: none).
using MaxPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices);
using AvgPool2dFn = void(const Tensor& out, const Tensor& x, const Pool2dParams& p);
using AvgPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out, const Pool2dParams& p);
// Windows follow PyTorch: output o of n covers [floor(o * in / n), ceil((o + 1) * in / n)).
using AdaptiveAvgPool2dFn = void(const Tensor& out, const Tensor& x);
using AdaptiveAvgPool2dBackwardFn = void(const Tensor& grad_x, const Tensor& grad_out);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_POOL_KERNELS(X)                                    \
  X(max_pool2d, MaxPool2dFn)                                   \
  X(max_pool2d_backward, MaxPool2dBackwardFn)                  \
  X(avg_pool2d, AvgPool2dFn)                                   \
  X(avg_pool2d_backward, AvgPool2dBackwardFn)                  \
  X(adaptive_avg_pool2d, AdaptiveAvgPool2dFn)                  \
  X(adaptive_avg_pool2d_backward, AdaptiveAvgPool2dBackwardFn)
RTX_POOL_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
