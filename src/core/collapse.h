// Dim collapsing for pointwise launchers of every backend: drops size-1 dims and merges dims that
// are contiguous with each other in every operand, so most strided loops run over one or two dims.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "rtx/tensor.h"

namespace rtx::detail {

// Sizes and per-operand byte strides after dropping size-1 dims and merging dims that are
// contiguous with each other in every operand. Innermost dim last.
template <size_t N>
struct Geometry {
  std::vector<int64_t> sizes;
  std::array<std::vector<int64_t>, N> strides;
};

template <size_t N>
Geometry<N> collapse(const std::array<const Tensor*, N>& ops) {
  Geometry<N> g;
  const Shape& shape = ops[0]->sizes();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !g.sizes.empty();
    for (size_t k = 0; k < N && merge; ++k) {
      const int64_t es = static_cast<int64_t>(ops[k]->element_size());
      merge = g.strides[k].back() == ops[k]->strides()[d] * es * shape[d];
    }
    if (merge) {
      g.sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) g.strides[k].back() = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size());
    } else {
      g.sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) g.strides[k].push_back(ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size()));
    }
  }
  if (g.sizes.empty()) {
    g.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) g.strides[k].push_back(0);
  }
  return g;
}

}  // namespace rtx::detail
