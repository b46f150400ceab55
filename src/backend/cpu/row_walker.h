// RowWalker: the row iteration the CPU indexing and sorting kernels share.
#pragma once

#include <array>
#include <cstdint>

#include "rtx/tensor.h"

namespace rtx::cpu {

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

}  // namespace rtx::cpu
