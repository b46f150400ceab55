// Kernel tables of the fused attention family.
#pragma once

#include "core/dispatch.h"
#include "kernels/common/head_layout.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// Fused attention over bh independent heads: q and out [..., L, D], k and v [..., S, D], with one
// batch shape holding the bh heads and one float dtype; lse [bh, L] (contiguous) in the accumulation
// dtype (acc_dtype) receives the log-sum-exp of each row of scaled scores. scores = scale * q k^T;
// causal masks the keys j > i (top-left aligned, as PyTorch's is_causal), so no row is empty.
// S >= 1. Every [..., n, D] operand has a head_layout: its heads and rows may be strided.
using AttentionFn = void(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                         double scale, bool causal);
// dq [..., L, D], dk and dv [..., S, D] (written entirely) from g [..., L, D], the gradient of out,
// and the forward's out and lse.
using AttentionBackwardFn = void(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g,
                                 const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, double scale, bool causal);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_ATTENTION_KERNELS(X)             \
  X(attention, AttentionFn)                  \
  X(attention_backward, AttentionBackwardFn)
RTX_ATTENTION_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
