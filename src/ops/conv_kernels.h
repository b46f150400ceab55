// Kernel tables of the convolution and pooling families (the signatures every backend implements),
// their geometry structs, and the internal backward ops: recorded ops of their own, so that the
// gradients of conv2d and the pools are differentiable again.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// Geometry of a 2-d convolution; index 0 is the height, 1 the width.
struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};

// Geometry of a 2-d pooling window; index 0 is the height, 1 the width. The output size (which
// ceil_mode decides) is the output tensor's.
struct Pool2dParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  bool count_include_pad = true;  // average pooling: divide by the window size including padding
};

// Convolution kernels see contiguous tensors of one floating dtype:
// x [N, C, H, W], weight [O, C / groups, kH, kW], bias [O] (undefined: none), out [N, O, OH, OW].
using Conv2dFn = void(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& p);
// grad_x [N, C, H, W] from grad_out [N, O, OH, OW] and weight (writes every element).
using Conv2dBackwardInputFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& weight,
                                   const Conv2dParams& p);
// grad_weight [O, C / groups, kH, kW] from grad_out and x (writes every element).
using Conv2dBackwardWeightFn = void(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& x,
                                    const Conv2dParams& p);

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

RTX_DECLARE_KERNEL(conv2d_kernel, Conv2dFn);
RTX_DECLARE_KERNEL(conv2d_backward_input_kernel, Conv2dBackwardInputFn);
RTX_DECLARE_KERNEL(conv2d_backward_weight_kernel, Conv2dBackwardWeightFn);
RTX_DECLARE_KERNEL(max_pool2d_kernel, MaxPool2dFn);
RTX_DECLARE_KERNEL(max_pool2d_backward_kernel, MaxPool2dBackwardFn);
RTX_DECLARE_KERNEL(avg_pool2d_kernel, AvgPool2dFn);
RTX_DECLARE_KERNEL(avg_pool2d_backward_kernel, AvgPool2dBackwardFn);
RTX_DECLARE_KERNEL(adaptive_avg_pool2d_kernel, AdaptiveAvgPool2dFn);
RTX_DECLARE_KERNEL(adaptive_avg_pool2d_backward_kernel, AdaptiveAvgPool2dBackwardFn);

}  // namespace rtx::kernels

namespace rtx::detail {

// The gradient of conv2d with respect to its 4-d input of shape input_size, given grad_out and weight.
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                             const kernels::Conv2dParams& p);
// The gradient of conv2d with respect to its weight of shape weight_size, given grad_out and the 4-d input.
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, const Shape& weight_size,
                              const kernels::Conv2dParams& p);
// The gradient of max_pool2d with respect to its 4-d input of shape input_size.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_size);
// The gradient of avg_pool2d with respect to its 4-d input of shape input_size.
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size, const kernels::Pool2dParams& p,
                           bool ceil_mode);
// The gradient of adaptive_avg_pool2d with respect to its 4-d input of shape input_size.
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size);

}  // namespace rtx::detail
