// Kernel tables of the neural-network family (softmax, normalization, embedding, one-hot, attention)
// and of the losses. Front-ends hand kernels contiguous operands (attention's may be strided, as its
// table says), the dtypes already checked and the statistics tensors in the accumulation dtype
// (float for 16-bit floats).
#pragma once

#include <cstdint>
#include <optional>

#include "core/dispatch.h"
#include "kernels/common/head_layout.h"
#include "rtx/ops.h"

namespace rtx::kernels {

// x, out: [outer, n, inner], the softmax dim being n. log selects log_softmax.
using SoftmaxFn = void(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log);
// grad_x = out * (g - sum(g * out)) for softmax, g - exp(out) * sum(g) for log_softmax.
using SoftmaxBackwardFn = void(const Tensor& grad_x, const Tensor& g, const Tensor& out, int64_t outer, int64_t n,
                               int64_t inner, bool log);

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

// out: [k, dim] = rows of weight [num, dim] picked by the k indices (int32/int64, in range).
using EmbeddingFn = void(const Tensor& out, const Tensor& weight, const Tensor& indices);
// grad_weight: [num, dim] = sums of the rows of g [k, dim] by index; row padding_idx (if any) stays zero.
using EmbeddingBackwardFn = void(const Tensor& grad_weight, const Tensor& g, const Tensor& indices,
                                 std::optional<int64_t> padding_idx);

// Smallest and largest value of an index tensor (int32/int64), skipping `skip`; found is false when
// no value is left.
struct IndexBounds {
  int64_t min = 0;
  int64_t max = 0;
  bool found = false;
};
using IndexBoundsFn = IndexBounds(const Tensor& indices, std::optional<int64_t> skip);
// out: [k, classes] int64 = one-hot rows of the k int64 indices (in range).
using OneHotFn = void(const Tensor& out, const Tensor& indices);

// Class-index losses. logits / log_probs: [n, classes, inner]; target: [n, inner] int64 (in range or
// ignore_index); weight: [classes] or undefined. out: [n, inner] for Reduction::None, else 0-d.
// total_weight (0-d): the sum of the weights of the non-ignored targets, the divisor of the mean.
// lse: [n, inner], the log-sum-exp of each logits row (undefined contents for ignored targets).
using CrossEntropyFn = void(const Tensor& out, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                            const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction,
                            double label_smoothing);
// g: like out; grad_logits: like logits.
using CrossEntropyBackwardFn = void(const Tensor& grad_logits, const Tensor& g, const Tensor& logits, const Tensor& lse,
                                    const Tensor& target, const Tensor& weight, const Tensor& total_weight,
                                    int64_t ignore_index, Reduction reduction, double label_smoothing);
using NllLossFn = void(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs, const Tensor& target,
                       const Tensor& weight, int64_t ignore_index, Reduction reduction);
// grad_log_probs: [n, classes, inner] (written entirely).
using NllLossBackwardFn = void(const Tensor& grad_log_probs, const Tensor& g, const Tensor& target,
                               const Tensor& weight, const Tensor& total_weight, int64_t ignore_index,
                               Reduction reduction);

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

RTX_DECLARE_KERNEL(softmax_kernel, SoftmaxFn);
RTX_DECLARE_KERNEL(softmax_backward_kernel, SoftmaxBackwardFn);
RTX_DECLARE_KERNEL(layer_norm_kernel, LayerNormFn);
RTX_DECLARE_KERNEL(layer_norm_backward_kernel, LayerNormBackwardFn);
RTX_DECLARE_KERNEL(batch_norm_stats_kernel, BatchNormStatsFn);
RTX_DECLARE_KERNEL(batch_norm_apply_kernel, BatchNormApplyFn);
RTX_DECLARE_KERNEL(batch_norm_backward_kernel, BatchNormBackwardFn);
RTX_DECLARE_KERNEL(embedding_kernel, EmbeddingFn);
RTX_DECLARE_KERNEL(embedding_backward_kernel, EmbeddingBackwardFn);
RTX_DECLARE_KERNEL(index_bounds_kernel, IndexBoundsFn);
RTX_DECLARE_KERNEL(one_hot_kernel, OneHotFn);
RTX_DECLARE_KERNEL(cross_entropy_kernel, CrossEntropyFn);
RTX_DECLARE_KERNEL(cross_entropy_backward_kernel, CrossEntropyBackwardFn);
RTX_DECLARE_KERNEL(nll_loss_kernel, NllLossFn);
RTX_DECLARE_KERNEL(nll_loss_backward_kernel, NllLossBackwardFn);
RTX_DECLARE_KERNEL(attention_kernel, AttentionFn);
RTX_DECLARE_KERNEL(attention_backward_kernel, AttentionBackwardFn);

}  // namespace rtx::kernels
