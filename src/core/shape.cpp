// Shape utilities.
#include "core/shape.h"

#include <algorithm>

#include "core/check.h"
#include "core/tensor_impl.h"

namespace rtx::detail {

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  RTX_CHECK(dim >= -n && dim < n, IndexError, "[{}] dim {} out of range for a {}-d tensor (expected {}..{})", op, dim,
            ndim, -n, n - 1);
  return dim < 0 ? dim + n : dim;
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  // The product of the sizes (each at least 1) bounds the contiguous strides: it must fit too, even
  // when a zero size makes the tensor empty.
  int64_t product = 1;
  bool empty = false, overflow = false;
  for (int64_t s : sizes) {
    RTX_CHECK(s >= 0, ValueError, "[{}] negative size in shape {}", op, shape_str(sizes));
    empty = empty || s == 0;
    overflow = overflow || __builtin_mul_overflow(product, std::max<int64_t>(s, 1), &product);
  }
  RTX_CHECK(!overflow, ValueError, "[{}] shape {} has more than 2^63 elements{}", op, shape_str(sizes),
            empty ? " when its zero sizes count as ones, so that its strides would overflow" : "");
  return empty ? 0 : product;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t st = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = st;
    st *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

bool is_contiguous(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 0) return true;
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::vector<int64_t> wrap_dims(const Shape& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    RTX_CHECK(out[i] != out[i - 1], IndexError, "[{}] dim {} appears more than once in {}", op, out[i], shape_str(dims));
  if (ndim == 0) out.clear();
  return out;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& new_sizes) {
  // Walks both shapes in chunks whose elements are contiguous with each other in the old layout
  // (the same algorithm as numpy's and PyTorch's computeStride).
  const int64_t numel = numel_of(sizes);
  Shape out(new_sizes.size());
  if (numel == 0) return contiguous_strides(new_sizes);
  if (sizes.empty()) {
    for (auto& s : out) s = 1;
    return out;
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor expand_to(const Tensor& t, const Shape& shape) {
  if (t.sizes() == shape) return t;
  const int64_t nd = static_cast<int64_t>(shape.size());
  const int64_t td = t.dim();
  Shape strides(shape.size(), 0);
  for (int64_t i = 0; i < td; ++i) {
    const int64_t o = nd - td + i;
    strides[o] = t.sizes()[i] == 1 && shape[o] != 1 ? 0 : t.strides()[i];
  }
  return make_view(t, shape, strides, t.storage_offset());
}

}  // namespace rtx::detail
