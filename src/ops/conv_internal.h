// The internal backward ops of convolution and pooling: recorded ops of their own, so that the
// gradients of conv2d and the pools are differentiable again.
#pragma once

#include "dispatch/conv.h"
#include "dispatch/pool.h"
#include "rtx/tensor.h"

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
