// The internal backward ops of convolution: recorded ops of their own, so that the gradients of
// conv2d are differentiable again.
#pragma once

#include "dispatch/conv.h"
#include "rtx/tensor.h"

namespace rtx::detail {

// The gradient of conv2d with respect to its 4-d input of shape input_size, given grad_out and weight.
Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                             const kernels::Conv2dParams& p);
// The gradient of conv2d with respect to its weight of shape weight_size, given grad_out and the 4-d input.
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, const Shape& weight_size,
                              const kernels::Conv2dParams& p);

}  // namespace rtx::detail
