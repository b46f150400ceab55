// View ops: new geometry over the same storage, never a copy (reshape copies only when no view
// exists). Each is differentiable: shape-only views reshape the gradient back, permutations permute
// it back, sub-views scatter it into zeros of the input's shape (itself a recorded op, so that
// higher-order gradients flow), expand sums it back.
#include <algorithm>
#include <numeric>

#include "autograd/function.h"
#include "core/checked_size.h"
#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::shape_str;
using detail::wrap_dim;

using ViewFn = std::function<Tensor(const Tensor&)>;

// zeros(base_shape) with g written into view_fn's region of it. Recorded: its backward is view_fn of
// the incoming gradient.
Tensor scatter_into_zeros(const Tensor& g, const Shape& base_shape, const ViewFn& view_fn) {
  Tensor z = zeros(base_shape, g.options());
  {
    NoGradGuard no_grad;
    detail::copy_raw(view_fn(z), g);
  }
  if (auto node = autograd::make_node("view_backward", g)) {
    node->set_backward([view_fn](const TensorList& gg, const TensorList&) { return TensorList{view_fn(gg[0])}; });
    autograd::set_history(z, node);
  }
  return z;
}

// Wraps a new view of x, recording its backward when x requires grad.
template <typename Backward>
Tensor make_recorded_view(const char* op, const Tensor& x, Shape sizes, Shape strides, int64_t offset, Backward backward) {
  Tensor out = detail::make_view(x, std::move(sizes), std::move(strides), offset);
  if (auto node = autograd::make_node(op, x)) {
    node->set_backward([backward](const TensorList& g, const TensorList&) { return TensorList{backward(g[0])}; });
    autograd::set_history(out, node);
    autograd::mark_view(out);
  }
  return out;
}

// The view of a sub-region whose gradient is scattered back (narrow, slice, select, diagonal).
Tensor make_subview(const char* op, const Tensor& x, Shape sizes, Shape strides, int64_t offset, ViewFn redo) {
  const Shape base = x.sizes();
  return make_recorded_view(op, x, std::move(sizes), std::move(strides), offset,
                            [base, redo](const Tensor& g) { return scatter_into_zeros(g, base, redo); });
}

Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t infer = -1, known = 1;
  bool zero = false, overflow = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      RTX_CHECK(infer < 0, ShapeError, "[{}] only one dimension can be inferred (-1) in shape {}", op, shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      RTX_CHECK(shape[i] >= 0, ShapeError, "[{}] invalid size {} in shape {}", op, shape[i], shape_str(shape));
      zero = zero || shape[i] == 0;
      overflow = overflow || __builtin_mul_overflow(known, shape[i], &known);
    }
  }
  if (zero) known = 0;
  RTX_CHECK(!overflow || zero, ShapeError, "[{}] shape {} is invalid for input of size {}", op, shape_str(shape), numel);
  if (infer >= 0) {
    RTX_CHECK(known != 0 && numel % known == 0, ShapeError, "[{}] shape {} is invalid for input of size {}", op,
              shape_str(shape), numel);
    out[infer] = numel / known;
  } else {
    RTX_CHECK(known == numel, ShapeError, "[{}] shape {} is invalid for input of size {}", op, shape_str(shape), numel);
  }
  detail::checked_numel(out, op);  // an empty shape's strides must fit too
  return out;
}

}  // namespace

Tensor view_dtype(const Tensor& x, DType dtype) {
  check_defined(x, "view");
  const auto from = static_cast<int64_t>(element_size(x.dtype())), to = static_cast<int64_t>(element_size(dtype));
  if (from == to) return detail::make_view(x, x.sizes(), x.strides(), x.storage_offset(), dtype);
  const std::string what = fmt::format("a {} tensor of shape {} and strides {} as {}", dtype_name(x.dtype()),
                                       shape_str(x.sizes()), shape_str(x.strides()), dtype_name(dtype));
  RTX_CHECK(x.dim() > 0, ShapeError, "[view] cannot view {}: a 0-d tensor can only be viewed as a dtype of its size",
            what);
  RTX_CHECK(x.stride(-1) == 1 || x.size(-1) == 1, ShapeError,
            "[view] cannot view {}: the last dimension must have stride 1 (call contiguous() first)", what);
  Shape sizes = x.sizes(), strides = x.strides();
  int64_t offset = x.storage_offset();
  if (from > to) {  // each element becomes from / to narrower ones along the last dimension
    const int64_t ratio = from / to;
    for (int64_t& s : strides) s *= ratio;
    sizes.back() *= ratio;
    strides.back() = 1;
    offset *= ratio;
  } else {  // every to / from consecutive elements become one
    const int64_t ratio = to / from;
    RTX_CHECK(sizes.back() % ratio == 0, ShapeError,
              "[view] cannot view {}: the last dimension's size must be a multiple of {}", what, ratio);
    RTX_CHECK(offset % ratio == 0, ShapeError,
              "[view] cannot view {}: the storage offset {} must be a multiple of {}", what, offset, ratio);
    for (size_t d = 0; d + 1 < strides.size(); ++d)
      RTX_CHECK(strides[d] % ratio == 0, ShapeError,
                "[view] cannot view {}: every stride but the last must be a multiple of {}", what, ratio);
    for (int64_t& s : strides) s /= ratio;
    sizes.back() /= ratio;
    strides.back() = 1;
    offset /= ratio;
  }
  return detail::make_view(x, std::move(sizes), std::move(strides), offset, dtype);
}

Tensor view(const Tensor& x, const Shape& shape) {
  check_defined(x, "view");
  Shape sizes = infer_size(shape, x.numel(), "view");
  auto strides = detail::view_strides(x.sizes(), x.strides(), sizes);
  RTX_CHECK(strides.has_value(), ShapeError,
            "[view] a tensor of shape {} and strides {} cannot be viewed as {} without a copy; use reshape()",
            shape_str(x.sizes()), shape_str(x.strides()), shape_str(sizes));
  const Shape in_shape = x.sizes();
  return make_recorded_view("view", x, sizes, *strides, x.storage_offset(),
                            [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_defined(x, "reshape");
  Shape sizes = infer_size(shape, x.numel(), "reshape");
  if (detail::view_strides(x.sizes(), x.strides(), sizes)) return view(x, sizes);
  return view(clone(x), sizes);
}

Tensor permute(const Tensor& x, const Shape& dims) {
  check_defined(x, "permute");
  const int64_t nd = x.dim();
  RTX_CHECK(static_cast<int64_t>(dims.size()) == nd, ShapeError,
            "[permute] got {} dims {} for a {}-d tensor", dims.size(), shape_str(dims), nd);
  Shape sizes(nd), strides(nd), inverse(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = wrap_dim(dims[i], nd, "permute");
    RTX_CHECK(!seen[d], IndexError, "[permute] dim {} repeats in {}", d, shape_str(dims));
    seen[d] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
    inverse[d] = i;
  }
  return make_recorded_view("permute", x, sizes, strides, x.storage_offset(),
                            [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  check_defined(x, "transpose");
  const int64_t nd = x.dim();
  const int64_t a = wrap_dim(dim0, nd, "transpose"), b = wrap_dim(dim1, nd, "transpose");
  if (nd == 0) return x;
  Shape dims(nd);
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[a], dims[b]);
  return permute(x, dims);
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_defined(x, "narrow");
  RTX_CHECK(x.dim() > 0, IndexError, "[narrow] cannot narrow a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "narrow");
  const int64_t size = x.sizes()[d];
  RTX_CHECK(start >= -size && start <= size, IndexError, "[narrow] start {} out of range for dim {} of size {}", start, d,
            size);
  if (start < 0) start += size;
  RTX_CHECK(length >= 0 && length <= size - start, IndexError,
            "[narrow] start {} + length {} exceeds dim {} of size {}", start, length, d, size);
  return slice(x, d, start, start + length, 1);
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt, int64_t step) {
  check_defined(x, "slice");
  RTX_CHECK(x.dim() > 0, IndexError, "[slice] cannot slice a 0-d tensor");
  RTX_CHECK(step > 0, ValueError, "[slice] step must be positive, got {}", step);
  const int64_t d = wrap_dim(dim, x.dim(), "slice");
  const int64_t size = x.sizes()[d];
  auto clampi = [size](int64_t v) {
    if (v < 0) v += size;
    return std::clamp<int64_t>(v, 0, size);
  };
  const int64_t start = start_opt ? clampi(*start_opt) : 0;
  const int64_t end = std::max(start, end_opt ? clampi(*end_opt) : size);
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[d] = end == start ? 0 : (end - start - 1) / step + 1;
  strides[d] = x.strides()[d] * step;
  const int64_t offset = x.storage_offset() + start * x.strides()[d];
  return make_subview("slice", x, sizes, strides, offset,
                      [d, start, end, step](const Tensor& t) { return slice(t, d, start, end, step); });
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  check_defined(x, "select");
  RTX_CHECK(x.dim() > 0, IndexError, "[select] cannot index a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.sizes()[d];
  RTX_CHECK(index >= -size && index < size, IndexError, "[select] index {} is out of range for dim {} of size {}", index,
            d, size);
  if (index < 0) index += size;
  Shape sizes = x.sizes(), strides = x.strides();
  const int64_t offset = x.storage_offset() + index * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return make_subview("select", x, sizes, strides, offset, [d, index](const Tensor& t) { return select(t, d, index); });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined(x, "expand");
  const int64_t nd = static_cast<int64_t>(shape.size());
  RTX_CHECK(nd >= x.dim(), ShapeError, "[expand] target shape {} has fewer dims than the tensor's shape {}",
            shape_str(shape), shape_str(x.sizes()));
  Shape sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    const int64_t xi = i - (nd - x.dim());
    if (xi >= 0) {
      const int64_t have = x.sizes()[xi];
      const int64_t want = shape[i] == -1 ? have : shape[i];
      RTX_CHECK(have == want || have == 1, ShapeError,
                "[expand] size {} at dim {} cannot expand to {} (tensor shape {}, target {})", have, xi, want,
                shape_str(x.sizes()), shape_str(shape));
      RTX_CHECK(want >= 0, ShapeError, "[expand] invalid size {} in target {}", want, shape_str(shape));
      sizes[i] = want;
      strides[i] = have == want ? x.strides()[xi] : 0;
    } else {
      RTX_CHECK(shape[i] >= 0, ShapeError, "[expand] size -1 is not allowed for the new leading dim {} of {}", i,
                shape_str(shape));
      sizes[i] = shape[i];
      strides[i] = 0;
    }
  }
  if (sizes == x.sizes()) return x;
  detail::checked_numel(sizes, "expand");
  const Shape in_shape = x.sizes();
  return make_recorded_view("expand", x, sizes, strides, x.storage_offset(),
                            [in_shape](const Tensor& g) { return sum_to(g, in_shape); });
}

Tensor squeeze(const Tensor& x, std::optional<int64_t> dim) {
  check_defined(x, "squeeze");
  Shape sizes;
  if (dim) {
    const int64_t d = wrap_dim(*dim, x.dim(), "squeeze");
    sizes = x.sizes();
    if (x.dim() > 0 && sizes[d] == 1) sizes.erase(sizes.begin() + d);
  } else {
    for (int64_t s : x.sizes())
      if (s != 1) sizes.push_back(s);
  }
  return sizes == x.sizes() ? x : view(x, sizes);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  check_defined(x, "unsqueeze");
  // The new dim goes anywhere from before the first dim to after the last: index in [-nd - 1, nd].
  const int64_t nd = x.dim();
  RTX_CHECK(dim >= -nd - 1 && dim <= nd, IndexError, "[unsqueeze] dim {} out of range for a {}-d tensor (expected {}..{})",
            dim, nd, -nd - 1, nd);
  const int64_t d = dim < 0 ? dim + nd + 1 : dim;
  Shape sizes = x.sizes(), strides = x.strides();
  const int64_t st = d < x.dim() ? sizes[d] * strides[d] : 1;
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, st);
  return make_recorded_view("unsqueeze", x, sizes, strides, x.storage_offset(),
                            [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_defined(x, "flatten");
  if (x.dim() == 0) return reshape(x, {1});
  const int64_t s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  RTX_CHECK(s <= e, ValueError, "[flatten] start_dim {} comes after end_dim {}", s, e);
  if (s == e) return x;
  Shape sizes(x.sizes().begin(), x.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= x.sizes()[i];
  sizes.push_back(n);
  sizes.insert(sizes.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return reshape(x, sizes);
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  check_defined(x, "unflatten");
  const int64_t d = wrap_dim(dim, x.dim(), "unflatten");
  RTX_CHECK(!sizes.empty(), ValueError, "[unflatten] sizes must not be empty");
  Shape inner = infer_size(sizes, x.sizes()[d], "unflatten");
  Shape shape(x.sizes().begin(), x.sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), x.sizes().begin() + d + 1, x.sizes().end());
  return view(x, shape);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  check_defined(x, "diagonal");
  RTX_CHECK(x.dim() >= 2, ShapeError, "[diagonal] needs at least 2 dims, got shape {}", shape_str(x.sizes()));
  const int64_t a = wrap_dim(dim1, x.dim(), "diagonal"), b = wrap_dim(dim2, x.dim(), "diagonal");
  RTX_CHECK(a != b, ValueError, "[diagonal] dim1 and dim2 must differ, both are {}", a);
  int64_t len, start = x.storage_offset();
  if (offset >= 0) {
    len = std::max<int64_t>(0, std::min(x.sizes()[a], x.sizes()[b] - offset));
    if (len > 0) start += offset * x.strides()[b];
  } else {
    len = std::max<int64_t>(0, std::min(x.sizes()[a] + offset, x.sizes()[b]));
    if (len > 0) start -= offset * x.strides()[a];
  }
  Shape sizes, strides;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i == a || i == b) continue;
    sizes.push_back(x.sizes()[i]);
    strides.push_back(x.strides()[i]);
  }
  sizes.push_back(len);
  strides.push_back(x.strides()[a] + x.strides()[b]);
  return make_subview("diagonal", x, sizes, strides, start,
                      [offset, a, b](const Tensor& t) { return diagonal(t, offset, a, b); });
}

Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset) {
  check_defined(x, "as_strided");
  RTX_CHECK(sizes.size() == strides.size(), ShapeError, "[as_strided] {} sizes but {} strides", sizes.size(), strides.size());
  const int64_t offset = storage_offset.value_or(x.storage_offset());
  RTX_CHECK(offset >= 0, ValueError, "[as_strided] negative storage offset {}", offset);
  detail::checked_numel(sizes, "as_strided");
  for (int64_t st : strides)
    RTX_CHECK(st >= 0, ValueError, "[as_strided] negative stride in {}", shape_str(strides));
  const int64_t extent = detail::checked_extent(sizes, strides, offset, "as_strided");
  const bool empty = extent == 0;
  const int64_t max_index = extent - 1;
  const int64_t storage_elems =
      static_cast<int64_t>(x.impl()->storage->nbytes() / element_size(x.dtype()));
  RTX_CHECK(extent <= storage_elems, IndexError,
            "[as_strided] sizes {}, strides {} and offset {} reach element {}, beyond the storage's {} elements",
            shape_str(sizes), shape_str(strides), offset, max_index, storage_elems);
  // Gradient: every input element collects the gradients of the output elements that alias it.
  // The positions come from the same view of the input's element numbering.
  const Shape in_shape = x.sizes(), in_strides = x.strides();
  const int64_t in_offset = x.storage_offset();
  return make_recorded_view("as_strided", x, sizes, strides, offset,
                            [=](const Tensor& g) {
                              const int64_t n = detail::numel_of(in_shape);
                              RTX_CHECK(detail::is_contiguous(in_shape, in_strides) && offset >= in_offset &&
                                            (empty || max_index < in_offset + n),
                                        Error,
                                        "[as_strided] backward needs a contiguous input and a view that stays inside "
                                        "its elements; call .contiguous() before as_strided");
                              Tensor numbering = arange(in_offset, in_offset + n, 1,
                                                        TensorOptions(kInt64, g.device()));
                              Tensor positions = detail::make_view(numbering, sizes, strides, offset - in_offset).contiguous();
                              Tensor flat = zeros({n}, g.options());
                              return index_add(flat, 0, positions.flatten() - in_offset, g.reshape({-1})).view(in_shape);
                            });
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    RTX_CHECK(da == db || da == 1 || db == 1, ShapeError,
              "[{}] shapes {} and {} cannot be broadcast: sizes {} and {} differ at dim {}", op, shape_str(a),
              shape_str(b), da, db, i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

TensorList broadcast_tensors(const TensorList& tensors) {
  Shape shape;
  for (const auto& t : tensors) {
    check_defined(t, "broadcast_tensors");
    shape = broadcast_shapes(shape, t.sizes(), "broadcast_tensors");
  }
  TensorList out;
  for (const auto& t : tensors) out.push_back(expand(t, shape));
  return out;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  check_defined(t, "sum_to");
  if (t.sizes() == shape) return t;
  const int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  RTX_CHECK(lead >= 0, ShapeError, "[sum_to] a tensor of shape {} cannot be summed to the larger shape {}",
            shape_str(t.sizes()), shape_str(shape));
  Shape dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (int64_t i = lead; i < t.dim(); ++i) {
    const int64_t want = shape[i - lead];
    if (want == 1 && t.sizes()[i] != 1) dims.push_back(i);
    else
      RTX_CHECK(want == t.sizes()[i], ShapeError, "[sum_to] a tensor of shape {} cannot be summed to shape {}",
                shape_str(t.sizes()), shape_str(shape));
  }
  Tensor r = dims.empty() ? t : sum(t, dims, true);
  return lead > 0 || r.sizes() != shape ? r.view(shape) : r;
}

// ---- Tensor methods ---------------------------------------------------------------------------
Tensor Tensor::view(const Shape& shape) const { return rtx::view(*this, shape); }
Tensor Tensor::view_dtype(DType dtype) const { return rtx::view_dtype(*this, dtype); }
Tensor Tensor::reshape(const Shape& shape) const { return rtx::reshape(*this, shape); }
Tensor Tensor::permute(const Shape& dims) const { return rtx::permute(*this, dims); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return rtx::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  RTX_CHECK(dim() <= 2, ShapeError, "[t] expects a tensor with <= 2 dims, got shape {}; use transpose() or mT()",
            shape_str(sizes()));
  return dim() < 2 ? *this : rtx::transpose(*this, 0, 1);
}
Tensor Tensor::mT() const {
  RTX_CHECK(dim() >= 2, ShapeError, "[mT] expects at least 2 dims, got shape {}", shape_str(sizes()));
  return rtx::transpose(*this, -2, -1);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const { return rtx::narrow(*this, dim, start, length); }
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  return rtx::slice(*this, dim, start, end, step);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return rtx::select(*this, dim, index); }
Tensor Tensor::expand(const Shape& shape) const { return rtx::expand(*this, shape); }
Tensor Tensor::squeeze() const { return rtx::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return rtx::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return rtx::unsqueeze(*this, dim); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return rtx::flatten(*this, s, e); }
Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const { return rtx::unflatten(*this, dim, sizes); }
Tensor Tensor::diagonal(int64_t offset, int64_t d1, int64_t d2) const { return rtx::diagonal(*this, offset, d1, d2); }
Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset) const {
  return rtx::as_strided(*this, sizes, strides, offset);
}

}  // namespace rtx
