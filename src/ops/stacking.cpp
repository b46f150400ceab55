// Joining and splitting built from views, cat and meshgrid (so every device and autograd come with
// them): atleast_1d/2d/3d, hstack, vstack, dstack, column_stack, tensor_split, hsplit, vsplit,
// dsplit, block_diag and cartesian_prod.
#include <algorithm>

#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::shape_str;

TensorList each(const TensorList& tensors, const char* op, Tensor (*f)(const Tensor&)) {
  RTX_CHECK(!tensors.empty(), ValueError, "[{}] expects a non-empty list of tensors", op);
  TensorList out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    check_defined(t, op);
    out.push_back(f(t));
  }
  return out;
}

// The tensors converted to their promoted dtype.
TensorList promoted(const TensorList& tensors) {
  DType t = tensors.front().dtype();
  for (const Tensor& x : tensors) t = promote_types(t, x.dtype());
  TensorList out;
  for (const Tensor& x : tensors) out.push_back(x.to(t));
  return out;
}

}  // namespace

Tensor atleast_1d(const Tensor& x) {
  check_defined(x, "atleast_1d");
  return x.dim() == 0 ? x.view({1}) : x;
}

Tensor atleast_2d(const Tensor& x) {
  check_defined(x, "atleast_2d");
  if (x.dim() >= 2) return x;
  return x.dim() == 0 ? x.view({1, 1}) : x.unsqueeze(0);
}

Tensor atleast_3d(const Tensor& x) {
  check_defined(x, "atleast_3d");
  switch (x.dim()) {
    case 0: return x.view({1, 1, 1});
    case 1: return x.unsqueeze(0).unsqueeze(2);
    case 2: return x.unsqueeze(2);
    default: return x;
  }
}

Tensor hstack(const TensorList& tensors) {
  const TensorList t = each(tensors, "hstack", atleast_1d);
  return cat(t, t.front().dim() == 1 ? 0 : 1);
}

Tensor vstack(const TensorList& tensors) { return cat(each(tensors, "vstack", atleast_2d), 0); }

Tensor dstack(const TensorList& tensors) { return cat(each(tensors, "dstack", atleast_3d), 2); }

Tensor column_stack(const TensorList& tensors) {
  const TensorList t = each(tensors, "column_stack", [](const Tensor& x) {
    return x.dim() <= 1 ? x.reshape({x.numel(), 1}) : x;
  });
  return cat(t, 1);
}

TensorList tensor_split(const Tensor& x, int64_t sections, int64_t dim) {
  check_defined(x, "tensor_split");
  RTX_CHECK(x.dim() > 0, ShapeError, "[tensor_split] expects a tensor of at least 1 dim, got a 0-d tensor");
  RTX_CHECK(sections > 0, ValueError, "[tensor_split] sections must be positive, got {}", sections);
  const int64_t d = detail::wrap_dim(dim, x.dim(), "tensor_split");
  const int64_t n = x.size(d), base = n / sections, longer = n % sections;
  TensorList out;
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    const int64_t len = base + (i < longer ? 1 : 0);
    out.push_back(x.narrow(d, start, len));
    start += len;
  }
  return out;
}

TensorList tensor_split(const Tensor& x, const Shape& indices, int64_t dim) {
  check_defined(x, "tensor_split");
  RTX_CHECK(x.dim() > 0, ShapeError, "[tensor_split] expects a tensor of at least 1 dim, got a 0-d tensor");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "tensor_split");
  // Each piece is x[start:end] along d with Python's slice rules (negative from the end, clamped).
  const int64_t n = x.size(d);
  const auto bound = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  TensorList out;
  for (size_t i = 0; i <= indices.size(); ++i) {
    const int64_t start = i > 0 ? bound(indices[i - 1]) : 0, end = i < indices.size() ? bound(indices[i]) : n;
    out.push_back(x.narrow(d, start, std::max<int64_t>(end - start, 0)));
  }
  return out;
}

namespace {
// The dim hsplit, vsplit and dsplit cut: `dim` of a tensor of at least min_dims dims (hsplit: dim 0
// of a 1-d one).
int64_t split_dim(const char* op, const Tensor& x, int64_t dim, int64_t min_dims) {
  check_defined(x, op);
  RTX_CHECK(x.dim() >= min_dims, ShapeError, "[{}] expects a tensor of at least {} dim{}, got shape {}", op,
            min_dims, min_dims == 1 ? "" : "s", shape_str(x.sizes()));
  return x.dim() == 1 ? 0 : dim;
}

TensorList equal_split(const char* op, const Tensor& x, int64_t dim, int64_t min_dims, int64_t sections) {
  const int64_t d = split_dim(op, x, dim, min_dims);
  RTX_CHECK(sections > 0 && x.size(d) % sections == 0, ValueError,
            "[{}] cannot split dim {} of size {} into {} equal sections", op, d, x.size(d), sections);
  return tensor_split(x, sections, d);
}
}  // namespace

TensorList hsplit(const Tensor& x, int64_t sections) { return equal_split("hsplit", x, 1, 1, sections); }
TensorList hsplit(const Tensor& x, const Shape& indices) {
  return tensor_split(x, indices, split_dim("hsplit", x, 1, 1));
}
TensorList vsplit(const Tensor& x, int64_t sections) { return equal_split("vsplit", x, 0, 2, sections); }
TensorList vsplit(const Tensor& x, const Shape& indices) {
  return tensor_split(x, indices, split_dim("vsplit", x, 0, 2));
}
TensorList dsplit(const Tensor& x, int64_t sections) { return equal_split("dsplit", x, 2, 3, sections); }
TensorList dsplit(const Tensor& x, const Shape& indices) {
  return tensor_split(x, indices, split_dim("dsplit", x, 2, 3));
}

Tensor block_diag(const TensorList& tensors) {
  if (tensors.empty()) return empty({1, 0});
  TensorList blocks = promoted(each(tensors, "block_diag", [](const Tensor& t) {
    RTX_CHECK(t.dim() <= 2, ShapeError, "[block_diag] expects tensors of at most 2 dims, got shape {}",
              shape_str(t.sizes()));
    return t.dim() == 2 ? t : t.reshape({1, t.numel()});
  }));
  int64_t cols = 0;
  for (const Tensor& b : blocks) cols += b.size(1);
  // Each block padded with zeros to the full width, then the rows stacked.
  TensorList rows;
  int64_t left = 0;
  for (const Tensor& b : blocks) {
    const int64_t r = b.size(0), c = b.size(1);
    rows.push_back(cat({zeros({r, left}, b.options()), b, zeros({r, cols - left - c}, b.options())}, 1));
    left += c;
  }
  return cat(rows, 0);
}

Tensor cartesian_prod(const TensorList& tensors) {
  const TensorList t = each(tensors, "cartesian_prod", [](const Tensor& x) {
    RTX_CHECK(x.dim() == 1, ShapeError, "[cartesian_prod] expects 1-d tensors, got shape {}", shape_str(x.sizes()));
    return x;
  });
  if (t.size() == 1) return t.front();
  TensorList columns;
  for (const Tensor& g : meshgrid(promoted(t), "ij")) columns.push_back(g.flatten());
  return stack(columns, 1);
}

}  // namespace rtx
