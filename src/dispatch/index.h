// Kernel tables of the indexing family (gather, index_select, scatter, tril/triu) and of joining
// (cat, which src/ops/join.cpp's front-ends share). Kernels see operands the front-end has validated
// and shaped; they never validate user input, except that an index kernel reads every index value
// and must neither read nor write with one outside [0, size): it skips it and reports the first one
// (in the index tensor's row-major order) as an IndexFault, and the front-end raises. A device
// backend sets a flag in device memory where the CPU sets a local one.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "rtx/scalar.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// An index value outside [0, size) that a kernel met (found is false when every index was valid).
struct IndexFault {
  bool found = false;
  int64_t value = 0;
};

// How a scatter combines src into out.
enum class ScatterMode : uint8_t { Assign, Add };

// out[..., j, ...] = x[..., index[..., j, ...], ...] along dim: out and index share a shape, x has the
// same number of dims and at least index's size in every dim but dim.
using GatherFn = IndexFault(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
// out = x.index_select(dim, index): index is 1-d, out has x's shape with index.numel() at dim.
using IndexSelectFn = IndexFault(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
// out[..., index[..., j, ...], ...] (=|+= alpha *) src[..., j, ...] along dim, in index order along dim
// (deterministic: the last write wins, sums accumulate in order). index and src share a shape; out has
// the same number of dims and at least index's size in every dim but dim. out already holds its old values.
using ScatterFn = IndexFault(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode,
                             const Scalar& alpha);
// out (new, contiguous) = inputs concatenated along dim: every input has out's shape but at dim
// (sizes adding up to out's), any dtype (converted to out's).
using CatFn = void(const Tensor& out, const TensorList& inputs, int64_t dim);
// out (new, contiguous) = x with the elements above (upper: below) the diagonal of the last two dims
// zeroed; same shape.
using TriangleFn = void(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper);
// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_INDEX_KERNELS(X)     \
  X(gather, GatherFn)            \
  X(index_select, IndexSelectFn) \
  X(scatter, ScatterFn)          \
  X(cat, CatFn)                  \
  X(triangle, TriangleFn)
RTX_INDEX_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
