// Kernel tables of the indexing, joining and sorting families (the signatures every backend
// implements), and RowWalker, the row iteration their CPU kernels share. Kernels see operands the
// front-end has validated and shaped; they never validate user input, except that an index kernel
// reads every index value and must neither read nor write with one outside [0, size): it skips it and
// reports the first one (in the index tensor's row-major order) as an IndexFault, and the front-end
// raises. A device backend sets a flag in device memory where the CPU sets a local one.
#pragma once

#include <array>
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
// Stable sort of every row of x along dim into values and int64 indices (x's shape); NaN sorts as largest.
using SortFn = void(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool descending);
// The k largest (smallest) elements of every row of x along dim, in order when sorted; values and
// int64 indices have x's shape with k at dim. NaN counts as largest.
using TopkFn = void(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, int64_t k, bool largest,
                    bool sorted);

RTX_DECLARE_KERNEL(gather_kernel, GatherFn);
RTX_DECLARE_KERNEL(index_select_kernel, IndexSelectFn);
RTX_DECLARE_KERNEL(scatter_kernel, ScatterFn);
RTX_DECLARE_KERNEL(cat_kernel, CatFn);
RTX_DECLARE_KERNEL(triangle_kernel, TriangleFn);
RTX_DECLARE_KERNEL(sort_kernel, SortFn);
RTX_DECLARE_KERNEL(topk_kernel, TopkFn);

// Walks the rows along one dim of N operands that share the sizes of every other dim, in row-major
// order, giving each operand's element offset of the row's first element. Copy it per thread.
template <size_t N>
class RowWalker {
 public:
  // sizes: the shared shape (its size at dim is ignored); strides: each operand's, in elements.
  RowWalker(const Shape& sizes, int64_t dim, const std::array<const Shape*, N>& strides) {
    for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
      if (d == dim || sizes[d] == 1) continue;
      sizes_.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k) strides_[k].push_back((*strides[k])[d]);
      rows_ *= sizes[d];
    }
    idx_.assign(sizes_.size(), 0);
  }
  int64_t rows() const { return rows_; }
  // Moves to row r.
  void seek(int64_t r) {
    offsets_.fill(0);
    for (int64_t d = static_cast<int64_t>(sizes_.size()) - 1; d >= 0; --d) {
      idx_[d] = r % sizes_[d];
      r /= sizes_[d];
      for (size_t k = 0; k < N; ++k) offsets_[k] += idx_[d] * strides_[k][d];
    }
  }
  // Moves to the next row.
  void next() {
    for (int64_t d = static_cast<int64_t>(sizes_.size()) - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) offsets_[k] += strides_[k][d];
      if (++idx_[d] < sizes_[d]) return;
      for (size_t k = 0; k < N; ++k) offsets_[k] -= sizes_[d] * strides_[k][d];
      idx_[d] = 0;
    }
  }
  const std::array<int64_t, N>& offsets() const { return offsets_; }

 private:
  Shape sizes_;
  std::array<Shape, N> strides_;
  Shape idx_;
  std::array<int64_t, N> offsets_{};
  int64_t rows_ = 1;
};

}  // namespace rtx::kernels
