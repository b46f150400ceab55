// Kernel tables of the sorting family: sort and topk.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// Stable sort of every row of x along dim into values and int64 indices (x's shape); NaN sorts as largest.
using SortFn = void(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool descending);
// The k largest (smallest) elements of every row of x along dim, in order when sorted; values and
// int64 indices have x's shape with k at dim. NaN counts as largest.
using TopkFn = void(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, int64_t k, bool largest,
                    bool sorted);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_SORT_KERNELS(X) \
  X(sort, SortFn)           \
  X(topk, TopkFn)
RTX_SORT_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
