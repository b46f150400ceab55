// Matrix ops built from views, where, matmul and reductions (so every device and autograd come with
// them): diag, diag_embed, trace, tril_indices/triu_indices, kron, tensordot, cross and cdist.
#include <algorithm>
#include <cstdlib>

#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::shape_str;
using detail::wrap_dim;

// The [2, count] coordinates (i, j) of a rows x cols matrix where keep(j - i) holds, row by row.
template <typename Keep>
Tensor triangle_indices(const char* op, int64_t rows, int64_t cols, const TensorOptions& options, const Keep& keep) {
  RTX_CHECK(rows >= 0 && cols >= 0, ValueError, "[{}] rows and cols must be non-negative, got {} and {}", op, rows,
            cols);
  std::vector<int64_t> is, js;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (keep(j - i)) is.push_back(i), js.push_back(j);
  is.insert(is.end(), js.begin(), js.end());
  const Tensor flat = tensor(is, TensorOptions(kInt64));
  return flat.view({2, static_cast<int64_t>(js.size())}).to(options.device.value_or(Device(kCPU)), options.dtype.value_or(kInt64));
}

}  // namespace

Tensor diag_embed(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  check_defined(x, "diag_embed");
  RTX_CHECK(x.dim() >= 1, ShapeError, "[diag_embed] expects a tensor of at least 1 dim, got a 0-d tensor");
  const int64_t nd = x.dim() + 1;
  const int64_t d1 = wrap_dim(dim1, nd, "diag_embed"), d2 = wrap_dim(dim2, nd, "diag_embed");
  RTX_CHECK(d1 != d2, ValueError, "[diag_embed] dim1 and dim2 name the same dim {}", d1);
  const int64_t n = x.size(-1);
  // [..., n, 1] selected onto the diagonal of [..., n, n] (where, so an inf stays off the other
  // elements), then padded to [..., m, m] with the diagonal moved by offset.
  const Tensor eye_mask = eye(n, n, TensorOptions(kBool, x.device()));
  Tensor square = where(eye_mask, x.unsqueeze(-1), Scalar(0));
  if (offset != 0) {
    const int64_t k = std::abs(offset);
    Shape cols = square.sizes(), rows;
    cols.back() = k;
    const Tensor side = zeros(cols, square.options());
    square = offset > 0 ? cat({side, square}, -1) : cat({square, side}, -1);  // [..., n, m]
    rows = square.sizes();
    rows[rows.size() - 2] = k;
    const Tensor band = zeros(rows, square.options());
    square = offset > 0 ? cat({square, band}, -2) : cat({band, square}, -2);  // [..., m, m]
  }
  return movedim(square, {-2, -1}, {d1, d2});
}

Tensor diag(const Tensor& x, int64_t offset) {
  check_defined(x, "diag");
  RTX_CHECK(x.dim() == 1 || x.dim() == 2, ShapeError, "[diag] expects a 1-d or 2-d tensor, got shape {}",
            shape_str(x.sizes()));
  return x.dim() == 1 ? diag_embed(x, offset, 0, 1) : diagonal(x, offset, 0, 1).clone();
}

Tensor trace(const Tensor& x) {
  check_defined(x, "trace");
  RTX_CHECK(x.dim() == 2, ShapeError, "[trace] expects a matrix, got shape {}", shape_str(x.sizes()));
  return sum(diagonal(x, 0, 0, 1));
}

Tensor tril_indices(int64_t rows, int64_t cols, int64_t offset, const TensorOptions& options) {
  return triangle_indices("tril_indices", rows, cols, options, [offset](int64_t k) { return k <= offset; });
}

Tensor triu_indices(int64_t rows, int64_t cols, int64_t offset, const TensorOptions& options) {
  return triangle_indices("triu_indices", rows, cols, options, [offset](int64_t k) { return k >= offset; });
}

Tensor kron(const Tensor& a, const Tensor& b) {
  check_defined(a, "kron", "input");
  check_defined(b, "kron", "other");
  const int64_t nd = std::max(a.dim(), b.dim());
  // a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...], then each pair of dims merged.
  Shape as(static_cast<size_t>(2 * nd), 1), bs(static_cast<size_t>(2 * nd), 1), out(static_cast<size_t>(nd));
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t ai = i - (nd - a.dim()), bi = i - (nd - b.dim());
    const int64_t an = ai >= 0 ? a.size(ai) : 1, bn = bi >= 0 ? b.size(bi) : 1;
    as[static_cast<size_t>(2 * i)] = an;
    bs[static_cast<size_t>(2 * i + 1)] = bn;
    out[static_cast<size_t>(i)] = an * bn;
  }
  return (a.reshape(as) * b.reshape(bs)).reshape(out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t n) {
  check_defined(a, "tensordot", "a");
  check_defined(b, "tensordot", "b");
  RTX_CHECK(n >= 0 && n <= a.dim() && n <= b.dim(), ValueError,
            "[tensordot] cannot contract {} dims of tensors of shapes {} and {}", n, shape_str(a.sizes()),
            shape_str(b.sizes()));
  Shape da, db;
  for (int64_t i = 0; i < n; ++i) da.push_back(a.dim() - n + i), db.push_back(i);
  return tensordot(a, b, da, db);
}

Tensor tensordot(const Tensor& a, const Tensor& b, const Shape& dims_a, const Shape& dims_b) {
  check_defined(a, "tensordot", "a");
  check_defined(b, "tensordot", "b");
  RTX_CHECK(dims_a.size() == dims_b.size(), ValueError, "[tensordot] dims {} and {} must have the same length",
            shape_str(dims_a), shape_str(dims_b));
  std::vector<bool> in_a(static_cast<size_t>(a.dim()), false), in_b(static_cast<size_t>(b.dim()), false);
  Shape perm_a, perm_b, free_sizes;
  int64_t k = 1;
  for (size_t i = 0; i < dims_a.size(); ++i) {
    const int64_t da = wrap_dim(dims_a[i], a.dim(), "tensordot"), db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    RTX_CHECK(a.size(da) == b.size(db), ShapeError,
              "[tensordot] contracted dims differ: dim {} of a {} has size {}, dim {} of b {} has size {}", da,
              shape_str(a.sizes()), a.size(da), db, shape_str(b.sizes()), b.size(db));
    RTX_CHECK(!in_a[static_cast<size_t>(da)] && !in_b[static_cast<size_t>(db)], ValueError,
              "[tensordot] a dim is contracted twice in {} and {}", shape_str(dims_a), shape_str(dims_b));
    in_a[static_cast<size_t>(da)] = in_b[static_cast<size_t>(db)] = true;
    k *= a.size(da);
  }
  // a as [free_a, k], b as [k, free_b]; the contracted dims in the order the lists pair them.
  int64_t fa = 1, fb = 1;
  for (int64_t i = 0; i < a.dim(); ++i)
    if (!in_a[static_cast<size_t>(i)]) perm_a.push_back(i), free_sizes.push_back(a.size(i)), fa *= a.size(i);
  for (int64_t d : dims_a) perm_a.push_back(wrap_dim(d, a.dim(), "tensordot"));
  for (int64_t d : dims_b) perm_b.push_back(wrap_dim(d, b.dim(), "tensordot"));
  for (int64_t i = 0; i < b.dim(); ++i)
    if (!in_b[static_cast<size_t>(i)]) perm_b.push_back(i), free_sizes.push_back(b.size(i)), fb *= b.size(i);
  const Tensor product = mm(a.permute(perm_a).reshape({fa, k}), b.permute(perm_b).reshape({k, fb}));
  return product.reshape(free_sizes);
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim) {
  check_defined(a, "cross", "input");
  check_defined(b, "cross", "other");
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "cross");
  const int64_t nd = static_cast<int64_t>(shape.size());
  int64_t d = -1;
  if (dim) {
    d = wrap_dim(*dim, nd, "cross");
  } else {
    const auto three = std::find(shape.begin(), shape.end(), 3);
    d = three == shape.end() ? -1 : three - shape.begin();
  }
  RTX_CHECK(d >= 0 && shape[static_cast<size_t>(d)] == 3, ShapeError,
            "[cross] needs a dim of size 3, got shapes {} and {}{}", shape_str(a.sizes()), shape_str(b.sizes()),
            dim ? fmt::format(" with dim {}", *dim) : std::string());
  const Tensor x = a.expand(shape), y = b.expand(shape);
  const auto at = [d](const Tensor& t, int64_t i) { return t.narrow(d, i, 1); };
  return cat({at(x, 1) * at(y, 2) - at(x, 2) * at(y, 1), at(x, 2) * at(y, 0) - at(x, 0) * at(y, 2),
              at(x, 0) * at(y, 1) - at(x, 1) * at(y, 0)},
             d);
}

Tensor cdist(const Tensor& a, const Tensor& b, double p) {
  check_defined(a, "cdist", "x1");
  check_defined(b, "cdist", "x2");
  RTX_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-1), ShapeError,
            "[cdist] expects [..., P, M] and [..., R, M], got shapes {} and {}", shape_str(a.sizes()),
            shape_str(b.sizes()));
  RTX_CHECK(p >= 0, ValueError, "[cdist] p must be non-negative, got {}", p);
  return norm(a.unsqueeze(-2) - b.unsqueeze(-3), p, {-1});
}

}  // namespace rtx
