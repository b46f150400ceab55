// Kernel tables of the normalization family: layer norm and batch norm, forward and backward.
// Front-ends hand kernels contiguous operands and the statistics tensors in the accumulation dtype
// (float for 16-bit floats).
#pragma once

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// x, out: [m, n] normalized over n; weight, bias: [n] or undefined; mean, rstd: [m].
using LayerNormFn = void(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                         const Tensor& weight, const Tensor& bias, int64_t m, int64_t n, double eps);
// Writes each defined output among grad_x [m, n], grad_weight [n], grad_bias [n].
using LayerNormBackwardFn = void(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& weight, int64_t m, int64_t n);

// x: [batch, channels, spatial]; mean and biased var: [channels].
using BatchNormStatsFn = void(const Tensor& mean, const Tensor& var, const Tensor& x);
// out = (x - mean) * invstd * weight + bias per channel; weight, bias: [channels] or undefined.
using BatchNormApplyFn = void(const Tensor& out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                              const Tensor& weight, const Tensor& bias);
// Writes each defined output; with batch_stats the statistics depend on x (training mode).
using BatchNormBackwardFn = void(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Tensor& g, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& weight, bool batch_stats);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_NORM_KERNELS(X)                   \
  X(layer_norm, LayerNormFn)                  \
  X(layer_norm_backward, LayerNormBackwardFn) \
  X(batch_norm_stats, BatchNormStatsFn)       \
  X(batch_norm_apply, BatchNormApplyFn)       \
  X(batch_norm_backward, BatchNormBackwardFn)
RTX_NORM_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
