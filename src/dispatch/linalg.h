// Kernel table of the linear algebra family (the signature every backend implements).
#pragma once

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// out[..., M, N] = a[..., M, K] @ b[..., K, N] (+ bias) for every batch index. a and b have out's batch
// shape (broadcast batch dims are stride-0 views) and any strides, out is contiguous, both operands have
// out's dtype; K = 0 gives zeros (or the bias). bias is undefined, or, for a 2-d float out only, a
// contiguous [N] tensor of out's dtype added to every row (fused into the product where the backend
// can: linear's bias).
using MatmulFn = void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias);
// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_LINALG_KERNELS(X) \
  X(matmul, MatmulFn)
RTX_LINALG_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
