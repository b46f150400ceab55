// Kernel table of the linear algebra family (the signature every backend implements).
#pragma once

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// out[..., M, N] = a[..., M, K] @ b[..., K, N] for every batch index. a and b have out's batch shape
// (broadcast batch dims are stride-0 views) and any strides, out is contiguous, both operands have out's
// dtype; K = 0 gives zeros.
using MatmulFn = void(const Tensor& out, const Tensor& a, const Tensor& b);
// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_LINALG_KERNELS(X) \
  X(matmul, MatmulFn)
RTX_LINALG_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
