// Shape utilities: dim wrapping, numel, contiguous strides, broadcasting and dim collapsing.
#pragma once

#include <cstdint>
#include <string>

#include "rtx/tensor.h"

namespace rtx::detail {

// dim in [-ndim, ndim) -> [0, ndim); IndexError naming op otherwise. A 0-d tensor accepts -1 and 0.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The number of elements of a shape: ValueError naming op for a negative size, or when the product of
// the sizes (zeros counted as ones, which bounds the contiguous strides) exceeds int64.
int64_t checked_numel(const Shape& sizes, const char* op);
inline int64_t numel_of(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}
Shape contiguous_strides(const Shape& sizes);
bool is_contiguous(const Shape& sizes, const Shape& strides);
// Dims wrapped, sorted and unique (empty -> all dims); IndexError on repeats.
std::vector<int64_t> wrap_dims(const Shape& dims, int64_t ndim, const char* op);
// "[2, 3]"
std::string shape_str(const Shape& s);
// Strides of a view of a tensor with (sizes, strides) reshaped to new_sizes, or empty when impossible.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes);
// Expands t (no autograd) to shape; used by front-ends after broadcasting.
Tensor expand_to(const Tensor& t, const Shape& shape);

}  // namespace rtx::detail
