// Kernel tables of the loss family: the class-index losses, forward and backward.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "rtx/ops.h"

namespace rtx::kernels {

// Class-index losses. logits / log_probs: [n, classes, inner]; target: [n, inner] int64, checked by
// nn's index_check before (in range or ignore_index; on CUDA, whose check reports later, a target out
// of range counts as ignored); weight: [classes] or undefined. out: [n, inner] for Reduction::None, else 0-d.
// total_weight (0-d): the sum of the weights of the non-ignored targets, the divisor of the mean.
// lse: [n, inner], the log-sum-exp of each logits row (undefined contents for ignored targets).
// cross_entropy's out and g (and every total_weight and lse) have the logits' accumulation dtype
// (float32 for 16-bit logits); weight has the logits' dtype. nll_loss's out and g have the dtype of
// log_probs.
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

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_LOSS_KERNELS(X)                         \
  X(cross_entropy, CrossEntropyFn)                  \
  X(cross_entropy_backward, CrossEntropyBackwardFn) \
  X(nll_loss, NllLossFn)                            \
  X(nll_loss_backward, NllLossBackwardFn)
RTX_LOSS_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
