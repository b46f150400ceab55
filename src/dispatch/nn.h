// Kernel tables of the neural-network family: softmax and log_softmax, embedding, the index check and
// one-hot. Front-ends hand kernels contiguous operands with the dtypes already checked.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dispatch.h"
#include "dispatch/index.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// x, out: [outer, n, inner], the softmax dim being n. log selects log_softmax.
using SoftmaxFn = void(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log);
// grad_x = out * (g - sum(g * out)) for softmax, g - exp(out) * sum(g) for log_softmax.
using SoftmaxBackwardFn = void(const Tensor& grad_x, const Tensor& g, const Tensor& out, int64_t outer, int64_t n,
                               int64_t inner, bool log);

// out: [k, dim] = rows of weight [num, dim] picked by the k indices (int32/int64, checked by
// index_check before; on CUDA the row of a bad index is zero).
using EmbeddingFn = void(const Tensor& out, const Tensor& weight, const Tensor& indices);
// grad_weight: [num, dim] = sums of the rows of g [k, dim] by index; row padding_idx (if any) stays
// zero; on CUDA, bad indices add nothing.
using EmbeddingBackwardFn = void(const Tensor& grad_weight, const Tensor& g, const Tensor& indices,
                                 std::optional<int64_t> padding_idx);

// Checks every value of a contiguous int32/int64 index tensor (not empty), as src/dispatch/index.h
// says: the check of the ops whose other kernels read indices they do not check (embedding, one_hot,
// the class-index losses).
using IndexCheckFn = IndexFault(const Tensor& indices, const IndexCheck& check);
// out: [k, classes] int64 = one-hot rows of the k int64 indices (checked before; on CUDA the row of
// a bad index is zero).
using OneHotFn = void(const Tensor& out, const Tensor& indices);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_NN_KERNELS(X)                    \
  X(softmax, SoftmaxFn)                      \
  X(softmax_backward, SoftmaxBackwardFn)     \
  X(embedding, EmbeddingFn)                  \
  X(embedding_backward, EmbeddingBackwardFn) \
  X(index_check, IndexCheckFn)               \
  X(one_hot, OneHotFn)
RTX_NN_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
