// Kernel tables of the multi-tensor ops: the norm of every tensor of a list, and every tensor of a
// list multiplied in place by one scalar. Front-ends hand the kernels contiguous tensors of one
// float dtype on one device.
#pragma once

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// out: a contiguous 1-d tensor of the tensors' dtype and device, one element per tensor: out[i] =
// the p-norm of tensors[i], as reduce_ops::NormOp accumulates it, or 0 for an empty tensor (p is not
// NaN, and is finite when a tensor is empty). The result does not depend on the thread count or the
// scheduling.
using ForeachNormFn = void(const Tensor& out, const TensorList& tensors, double p);
// tensors[i] = tensors[i] * s in the tensors' compute type (float for the 16-bit floats), where s
// is the value of scalar, a 1-element tensor of that compute type on the tensors' device, or value
// when scalar is undefined.
using ForeachMulFn = void(const TensorList& tensors, const Tensor& scalar, double value);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_FOREACH_KERNELS(X)    \
  X(foreach_norm, ForeachNormFn) \
  X(foreach_mul, ForeachMulFn)
RTX_FOREACH_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
