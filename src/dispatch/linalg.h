// Kernel table of the linear algebra family (the signature every backend implements).
#pragma once

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// What a 2-d float product computes besides a @ b, fused into it where the backend can; undefined
// members are unused, and at most one is defined.
struct MatmulEpilogue {
  Tensor bias;    // contiguous [N] of out's dtype, added to every row of out (linear's bias)
  Tensor a_sums;  // contiguous [M] of out's dtype, written with the sums of a's rows (linear's bias gradient)
};
// out[..., M, N] = a[..., M, K] @ b[..., K, N] for every batch index. a and b have out's batch shape
// (broadcast batch dims are stride-0 views) and any strides, out is contiguous, both operands have out's
// dtype; K = 0 gives zeros (or the bias rows). A bias is always added; returns whether a_sums was
// written (false: the backend fuses no such sums into this product, and the caller computes them).
using MatmulFn = bool(const Tensor& out, const Tensor& a, const Tensor& b, const MatmulEpilogue& epilogue);
// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_LINALG_KERNELS(X) \
  X(matmul, MatmulFn)
RTX_LINALG_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
