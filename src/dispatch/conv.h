// Kernel tables of the convolution family (the signatures every backend implements) and its geometry.
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

// Convolution kernels see contiguous tensors of one floating dtype:
// x [N, C, H, W], weight [O, C / groups, kH, kW], bias [O] (undefined: none), out [N, O, OH, OW].
using Conv2dFn = void(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                      const Conv2dParams& p);
// grad_x [N, C, H, W] from grad_out [N, O, OH, OW] and weight (writes every element).
using Conv2dBackwardInputFn = void(const Tensor& grad_x, const Tensor& grad_out, const Tensor& weight,
                                   const Conv2dParams& p);
// grad_weight [O, C / groups, kH, kW] from grad_out and x (writes every element), and grad_bias [O]
// (undefined: not asked for), the sums of grad_out over images and positions, where the backend
// computes them in the same pass; returns whether grad_bias was written (false: the backend fuses no
// such sums into this pass, and the caller computes them).
using Conv2dBackwardWeightFn = bool(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                                    const Tensor& x, const Conv2dParams& p);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_CONV_KERNELS(X)                         \
  X(conv2d, Conv2dFn)                               \
  X(conv2d_backward_input, Conv2dBackwardInputFn)   \
  X(conv2d_backward_weight, Conv2dBackwardWeightFn)
RTX_CONV_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
