// Kernel tables of the neural-network family: softmax and log_softmax, embedding, index bounds and
// one-hot. Front-ends hand kernels contiguous operands with the dtypes already checked.
#pragma once

#include <cstdint>
#include <optional>

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// x, out: [outer, n, inner], the softmax dim being n. log selects log_softmax.
using SoftmaxFn = void(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log);
// grad_x = out * (g - sum(g * out)) for softmax, g - exp(out) * sum(g) for log_softmax.
using SoftmaxBackwardFn = void(const Tensor& grad_x, const Tensor& g, const Tensor& out, int64_t outer, int64_t n,
                               int64_t inner, bool log);

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

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_NN_KERNELS(X)                    \
  X(softmax, SoftmaxFn)                      \
  X(softmax_backward, SoftmaxBackwardFn)     \
  X(embedding, EmbeddingFn)                  \
  X(embedding_backward, EmbeddingBackwardFn) \
  X(index_bounds, IndexBoundsFn)             \
  X(one_hot, OneHotFn)
RTX_NN_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
