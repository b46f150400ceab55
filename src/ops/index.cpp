// Indexing front-ends: index_select, gather, scatter, scatter_add, index_add, tril and triu, and
// nonzero, masked_select, index_fill and index_copy, which are built on them (a cumulative sum ranks the true elements, a
// scatter lists their positions; counting them reads one number back from the device). Index
// tensors are int64 or int32 and are never wrapped: a value outside [0, size) raises IndexError naming
// the value, the dim and its size (on CUDA at the next synchronization, src/dispatch/index.h). Like
// PyTorch, a 0-d tensor counts as a 1-element 1-d one where an op needs a dim. Gradients are written
// with these same ops (gather <-> scatter_add, index_select <-> index_add), so that they are
// differentiable again. Also here: the messages of every op's index faults (index_fault_message) and
// the RTX_SYNC_CHECKS switch.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "autograd/function.h"
#include "dispatch/index.h"
#include "ops/internal.h"
#include "ops/nn_internal.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::shape_str;
using kernels::IndexOp;
using kernels::ScatterMode;

void check_index(const char* op, const Tensor& x, const Tensor& index) {
  check_defined(index, op, "index");
  RTX_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, DTypeError,
            "[{}] index must be an int64 (or int32) tensor, got {}", op, index.dtype());
  detail::check_same_device(op, x, index);
}

// A 0-d tensor as a 1-element 1-d view (kernels always see the dim they work along); others as they are.
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? detail::make_view(t, {1}, {1}, t.storage_offset()) : t; }

// The check of an index kernel of op along dim of size.
kernels::IndexCheck check_of(kernels::IndexOp op, int64_t dim, int64_t size) { return {op, size, dim, std::nullopt}; }

// index (at least 1-d) must have target's number of dims and fit inside it in every dim (but dim,
// when skip_dim).
void check_fits(const char* op, const Tensor& index, const Tensor& target, const char* what, int64_t dim, bool skip_dim) {
  RTX_CHECK(index.dim() == target.dim(), ShapeError,
            "[{}] index of shape {} has {} dims but {} of shape {} has {}; they must have the same number of dims", op,
            shape_str(index.sizes()), index.dim(), what, shape_str(target.sizes()), target.dim());
  if (index.numel() == 0) return;
  for (int64_t d = 0; d < index.dim(); ++d) {
    RTX_CHECK((skip_dim && d == dim) || index.size(d) <= target.size(d), ShapeError,
              "[{}] index of shape {} does not fit {} of shape {}: size {} > {} at dim {}{}", op,
              shape_str(index.sizes()), what, shape_str(target.sizes()), index.size(d), target.size(d), d,
              skip_dim ? fmt::format(" (only dim {} may be larger)", dim) : std::string());
  }
}

// t (index's shape) padded with zeros at the end of every dim to shape: the gradient of a tensor of
// which only the leading index-shaped block was read.
Tensor pad_to(Tensor t, const Shape& shape) {
  if (t.dim() == 0 && !shape.empty()) t = t.reshape({1});
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == shape[d]) continue;
    Shape zeros_shape = t.sizes();
    zeros_shape[d] = shape[d] - t.size(d);
    t = cat({t, zeros(zeros_shape, t.options())}, d);
  }
  return t;
}

// A copy of x with src (index's shape, already viewed so) scattered into it along dim.
Tensor scatter_into_copy(IndexOp op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                         ScatterMode mode, const Scalar& alpha = 1) {
  Tensor out = detail::make_tensor(x.sizes(), x.dtype(), x.device());
  detail::copy_raw(out, x);
  const Tensor out1 = at_least_1d(out);
  if (index.numel() > 0)
    detail::raise_index_fault(
        kernels::scatter_kernel.get(x.device())(out1, dim, index, src, mode, alpha, check_of(op, dim, out1.size(dim))));
  return out;
}

// Validates a tensor scatter (scatter, scatter_add) and returns its result, not recorded.
Tensor scatter_tensor(IndexOp tag, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      ScatterMode mode) {
  const char* op = kernels::index_op_name(tag);
  check_defined(x, op);
  check_defined(src, op, "src");
  check_index(op, x, index);
  detail::check_same_device(op, x, src);
  RTX_CHECK(src.dtype() == x.dtype(), DTypeError, "[{}] src has dtype {} but the input has {}; they must match", op,
            src.dtype(), x.dtype());
  const int64_t d = detail::wrap_dim(dim, x.dim(), op);
  const Tensor x1 = at_least_1d(x), i1 = at_least_1d(index), s1 = at_least_1d(src);
  check_fits(op, i1, x1, "the input", d, true);
  check_fits(op, i1, s1, "src", d, false);
  const Tensor src_view = detail::make_view(s1, i1.sizes(), s1.strides(), s1.storage_offset());
  return scatter_into_copy(tag, x, d, i1, src_view, mode);
}

Tensor triangle(const char* op, const Tensor& x, int64_t diagonal, bool upper) {
  check_defined(x, op);
  RTX_CHECK(x.dim() >= 2, ShapeError, "[{}] needs a tensor with at least 2 dims, got shape {}", op, shape_str(x.sizes()));
  Tensor out = detail::make_tensor(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) kernels::triangle_kernel.get(x.device())(out, x, diagonal, upper);
  if (auto node = autograd::make_node(op, x)) {
    node->set_backward([diagonal, upper](const TensorList& g, const TensorList&) {
      return TensorList{upper ? triu(g[0], diagonal) : tril(g[0], diagonal)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// The flat (row-major) positions of the true elements of a bool tensor, in order: int64 [count].
Tensor true_positions(const Tensor& mask) {
  const Tensor flat = mask.reshape({-1});
  const int64_t n = flat.numel();
  const Tensor ranks = cumsum(flat, 0);  // int64: the true elements up to each one, inclusive
  const int64_t count = n == 0 ? 0 : ranks.select(0, n - 1).item<int64_t>();
  // Position i goes to slot (true elements before i). The true element of slot s comes last in
  // index order among the positions sent there (the false ones between its predecessor and it), and
  // a scatter's last write wins, so each slot ends up holding its true element; false positions
  // after the last true one land in a spare slot past the end.
  const TensorOptions index_options(kInt64, mask.device());
  const Tensor slots = ranks - flat;
  return scatter(zeros({count + 1}, index_options), 0, slots, arange(n, index_options)).narrow(0, 0, count);
}

}  // namespace

Tensor nonzero(const Tensor& x) {
  check_defined(x, "nonzero");
  const TensorOptions index_options(kInt64, x.device());
  if (x.numel() == 0) return zeros({0, x.dim()}, index_options);
  const Tensor positions = true_positions(x.dtype() == kBool ? x : ne(x, Scalar(0)));
  if (x.dim() == 0) return zeros({positions.numel(), 0}, index_options);
  // The coordinate at dim d of flat position p is (p // stride_d) % size_d (contiguous strides).
  TensorList columns;
  int64_t stride = x.numel();
  for (int64_t d = 0; d < x.dim(); ++d) {
    stride /= x.size(d);
    Tensor column = stride == 1 ? positions : floor_divide(positions, Scalar(stride));
    if (d > 0) column = remainder(column, Scalar(x.size(d)));
    columns.push_back(column);
  }
  return stack(columns, 1);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_defined(x, "masked_select");
  check_defined(mask, "masked_select", "mask");
  RTX_CHECK(mask.dtype() == kBool, DTypeError, "[masked_select] mask must be a bool tensor, got dtype {}",
            mask.dtype());
  detail::check_same_device("masked_select", x, mask);
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_select");
  return x.expand(shape).reshape({-1}).index_select(0, true_positions(mask.expand(shape)));
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "index_select");
  check_index("index_select", x, index);
  const int64_t d = detail::wrap_dim(dim, x.dim(), "index_select");
  RTX_CHECK(index.dim() <= 1, ShapeError, "[index_select] index must be 0-d or 1-d, got shape {}",
            shape_str(index.sizes()));
  RTX_CHECK(x.dim() > 0 || index.numel() == 1, ShapeError, "[index_select] a 0-d input takes exactly one index, got {}",
            index.numel());
  Shape shape = x.sizes();
  if (x.dim() > 0) shape[d] = index.numel();
  Tensor out = detail::make_tensor(shape, x.dtype(), x.device());
  if (out.numel() > 0) {
    const Tensor x1 = at_least_1d(x);
    detail::raise_index_fault(kernels::index_select_kernel.get(x.device())(
        at_least_1d(out), x1, d, at_least_1d(index), check_of(IndexOp::IndexSelect, d, x1.size(d))));
  }
  if (auto node = autograd::make_node("index_select", x)) {
    node->save(index);
    const Shape in_shape = x.sizes();
    node->set_backward([in_shape, d](const TensorList& g, const TensorList& s) {
      return TensorList{index_add(zeros(in_shape, g[0].options()), d, s[0], g[0])};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "gather");
  check_index("gather", x, index);
  const int64_t d = detail::wrap_dim(dim, x.dim(), "gather");
  const Tensor x1 = at_least_1d(x), i1 = at_least_1d(index);
  check_fits("gather", i1, x1, "the input", d, true);
  Tensor out = detail::make_tensor(index.sizes(), x.dtype(), x.device());
  if (out.numel() > 0)
    detail::raise_index_fault(
        kernels::gather_kernel.get(x.device())(at_least_1d(out), x1, d, i1, check_of(IndexOp::Gather, d, x1.size(d))));
  if (auto node = autograd::make_node("gather", x)) {
    node->save(index);
    const Shape in_shape = x.sizes();
    node->set_backward([in_shape, d](const TensorList& g, const TensorList& s) {
      return TensorList{scatter_add(zeros(in_shape, g[0].options()), d, s[0], g[0])};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = scatter_tensor(IndexOp::Scatter, x, dim, index, src, ScatterMode::Assign);
  if (auto node = autograd::make_node("scatter", x, src)) {
    const int64_t d = detail::wrap_dim(dim, x.dim(), "scatter");
    node->save(index);
    const Shape src_shape = src.sizes();
    node->set_backward([d, src_shape](const TensorList& g, const TensorList& s) {
      // Overwritten elements of x get no gradient; each src element gets the gradient of where it went.
      return TensorList{scatter(g[0], d, s[0], 0), pad_to(gather(g[0], d, s[0]), src_shape)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  check_defined(x, "scatter");
  check_index("scatter", x, index);
  const int64_t d = detail::wrap_dim(dim, x.dim(), "scatter");
  const Tensor x1 = at_least_1d(x), i1 = at_least_1d(index);
  check_fits("scatter", i1, x1, "the input", d, true);
  const Tensor v = detail::wrap_scalar(value, x.dtype(), x.device());
  const Tensor src_view = detail::make_view(v, i1.sizes(), Shape(i1.dim(), 0), v.storage_offset());
  Tensor out = scatter_into_copy(IndexOp::Scatter, x, d, i1, src_view, ScatterMode::Assign);
  if (auto node = autograd::make_node("scatter", x)) {
    node->save(index);
    node->set_backward([d](const TensorList& g, const TensorList& s) { return TensorList{scatter(g[0], d, s[0], 0)}; });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = scatter_tensor(IndexOp::ScatterAdd, x, dim, index, src, ScatterMode::Add);
  if (auto node = autograd::make_node("scatter_add", x, src)) {
    const int64_t d = detail::wrap_dim(dim, x.dim(), "scatter_add");
    node->save(index);
    const Shape src_shape = src.sizes();
    node->set_backward([d, src_shape](const TensorList& g, const TensorList& s) {
      return TensorList{g[0], pad_to(gather(g[0], d, s[0]), src_shape)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  check_defined(x, "index_add");
  check_defined(source, "index_add", "source");
  check_index("index_add", x, index);
  detail::check_same_device("index_add", x, source);
  const int64_t d = detail::wrap_dim(dim, x.dim(), "index_add");
  RTX_CHECK(index.dim() <= 1, ShapeError, "[index_add] index must be 0-d or 1-d, got shape {}", shape_str(index.sizes()));
  RTX_CHECK(source.dtype() == x.dtype(), DTypeError, "[index_add] source has dtype {} but the input has {}; they must match",
            source.dtype(), x.dtype());
  RTX_CHECK(is_floating(x.dtype()) || !alpha.is_floating(), DTypeError,
            "[index_add] alpha must be an integer for an input of dtype {}, got {}", x.dtype(), alpha.to_double());
  const Tensor x1 = at_least_1d(x), s1 = at_least_1d(source), i1 = at_least_1d(index);
  Shape expected = x1.sizes();
  expected[d] = i1.numel();
  RTX_CHECK(s1.sizes() == expected, ShapeError,
            "[index_add] source of shape {} must have the input's shape {} with the index's length {} at dim {}",
            shape_str(source.sizes()), shape_str(x.sizes()), i1.numel(), d);
  // The index broadcast to source's shape makes index_add a scatter_add.
  Shape index_strides(s1.dim(), 0);
  index_strides[d] = i1.stride(0);
  const Tensor index_view = detail::make_view(i1, s1.sizes(), index_strides, i1.storage_offset());
  Tensor out = scatter_into_copy(IndexOp::IndexAdd, x, d, index_view, s1, ScatterMode::Add, alpha);
  if (auto node = autograd::make_node("index_add", x, source)) {
    node->save(index);
    node->set_backward([d, alpha](const TensorList& g, const TensorList& s) {
      Tensor grad_source = index_select(g[0], d, s[0]);
      if (!(alpha.is_integral() && alpha.to_int() == 1)) grad_source = grad_source * alpha;
      return TensorList{g[0], grad_source};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// ---- index faults -------------------------------------------------------------------------------

std::string kernels::index_fault_message(const IndexFault& fault) {
  const IndexCheck& c = fault.check;
  switch (c.op) {
    case IndexOp::Gather:
    case IndexOp::IndexSelect:
    case IndexOp::Scatter:
    case IndexOp::ScatterAdd:
    case IndexOp::IndexAdd:
      break;
    case IndexOp::Embedding:
      return detail::embedding_fault_message(fault);
    case IndexOp::OneHot:
      return detail::one_hot_fault_message(fault);
    case IndexOp::CrossEntropy:
    case IndexOp::NllLoss:
      return detail::class_target_fault_message(fault);
  }
  return fmt::format("[{}] index {} is out of bounds for dim {} with size {}", index_op_name(c.op), fault.value, c.dim,
                     c.bound);
}

namespace {
std::atomic<bool>& sync_checks_flag() {
  static std::atomic<bool> flag{[] {
    const char* text = std::getenv("RTX_SYNC_CHECKS");
    return text != nullptr && std::strcmp(text, "1") == 0;
  }()};
  return flag;
}
}  // namespace

bool kernels::sync_checks() { return sync_checks_flag().load(std::memory_order_relaxed); }
void kernels::set_sync_checks(bool on) { sync_checks_flag().store(on, std::memory_order_relaxed); }

void detail::raise_index_fault(const kernels::IndexFault& fault) {
  if (fault.found) throw IndexError(kernels::index_fault_message(fault));
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle("tril", x, diagonal, false); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle("triu", x, diagonal, true); }

namespace {
// The bool mask of the slices along d that index names, shaped [1, .., size(d), .., 1] to broadcast
// against x.
Tensor slice_mask(const char* op, const Tensor& x, int64_t d, const Tensor& index) {
  RTX_CHECK(index.dim() <= 1, ShapeError, "[{}] index must be 0-d or 1-d, got shape {}", op, shape_str(index.sizes()));
  const Tensor x1 = at_least_1d(x);
  const Tensor mask = scatter(zeros({x1.size(d)}, TensorOptions(kBool, x.device())), 0, at_least_1d(index),
                              Scalar(true));
  Shape shape(static_cast<size_t>(x1.dim()), 1);
  shape[static_cast<size_t>(d)] = x1.size(d);
  return mask.view(shape);
}
}  // namespace

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  check_defined(x, "index_fill");
  check_index("index_fill", x, index);
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "index_fill");
  return where(slice_mask("index_fill", x, d, index), value, at_least_1d(x)).view(x.sizes());
}

Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  check_defined(x, "index_copy");
  check_index("index_copy", x, index);
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "index_copy");
  // index_add into zeros places each source slice (index_add checks the shapes and dtypes).
  const Tensor placed = at_least_1d(index_add(zeros_like(x), dim, index, source));
  return where(slice_mask("index_copy", x, d, index), placed, at_least_1d(x)).view(x.sizes());
}

}  // namespace rtx
