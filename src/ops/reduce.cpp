// Reduction front-ends: dims and dtype rules, zero-size results and backward formulas of sum, mean,
// prod, amax/amin, max/min, argmax/argmin, var/std, norm, logsumexp, any/all and cumsum. Kernels get
// the result viewed with the input's rank (size 1 on reduced dims) and never see empty tensors.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "ops/internal.h"
#include "dispatch/reduce.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::KernelTable;
using detail::shape_str;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// What a reduction reduces and the shapes involved.
struct ReduceSpec {
  std::vector<int64_t> dims;  // wrapped, sorted, unique
  Shape in_shape;
  Shape keep_shape;           // in_shape with the reduced dims set to 1
  Shape out_shape;            // keep_shape, or in_shape without the reduced dims
  bool keepdim = false;
  int64_t count = 1;          // elements reduced into each result element
};

ReduceSpec make_spec(const char* op, const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined(x, op);
  ReduceSpec s;
  s.dims = detail::wrap_dims(dims, x.dim(), op);
  s.in_shape = s.keep_shape = x.sizes();
  s.keepdim = keepdim;
  for (int64_t d : s.dims) {
    s.count *= x.size(d);
    s.keep_shape[d] = 1;
  }
  size_t next = 0;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const bool reduced = next < s.dims.size() && s.dims[next] == d;
    if (reduced) ++next;
    if (keepdim || !reduced) s.out_shape.push_back(s.keep_shape[d]);
  }
  return s;
}

// Ops without an identity (max, argmax, inf-norm) cannot reduce a zero-size dim.
void check_no_empty_reduction(const char* op, const Tensor& x, const ReduceSpec& s) {
  if (x.numel() != 0) return;
  for (int64_t d : s.dims)
    RTX_CHECK(x.size(d) != 0, IndexError,
              "[{}] cannot reduce over a zero-size dim {} of a tensor of shape {}: the op has no identity; "
              "reduce over other dims or check the input is not empty",
              op, d, shape_str(x.sizes()));
}

void check_floating(const char* op, const Tensor& x) {
  RTX_CHECK(is_floating(x.dtype()), DTypeError,
            "[{}] expects a floating point input, got {}; convert it with .to(rtx::kFloat32) first", op, x.dtype());
}

// sum/prod/cumsum of bool and integers give int64.
DType widened(DType t) { return is_floating(t) ? t : kInt64; }

// A result of out_shape and the same storage viewed with keep_shape (what kernels write through).
struct Result {
  Tensor out;
  Tensor keep;
};
Result make_result(const ReduceSpec& s, DType dtype, Device device) {
  Tensor out = detail::make_tensor(s.out_shape, dtype, device);
  Tensor keep = out.sizes() == s.keep_shape ? out
                                             : detail::make_view(out, s.keep_shape, detail::contiguous_strides(s.keep_shape), 0);
  return {out, keep};
}

// Runs a reduction kernel, or fills the result with empty_value when x has no elements.
template <typename Fn, typename... Args>
Tensor run_reduce(const KernelTable<Fn>& k, const Tensor& x, const ReduceSpec& s, DType dtype, double empty_value,
                  const Args&... args) {
  Result r = make_result(s, dtype, x.device());
  if (r.out.numel() == 0) return r.out;
  if (x.numel() == 0) detail::fill_raw(r.out, empty_value);
  else k.get(x.device())(r.keep, x, args...);
  return r.out;
}


// ---- backward helpers ---------------------------------------------------------------------------

// t (a result of s) with its reduced dims back as size 1.
Tensor keep_dims(const Tensor& t, const ReduceSpec& s) {
  if (s.keepdim) return t;
  Tensor r = t;
  for (int64_t d : s.dims) r = r.unsqueeze(d);
  return r;
}

// A gradient of the result broadcast back to the input's shape.
Tensor expand_back(const Tensor& g, const ReduceSpec& s) { return keep_dims(g, s).expand(s.in_shape); }

enum class Save { Nothing, Input, Output, Both };

// Records backward(g, x, out) -> the input's gradient; x and out are what `save` keeps (else undefined).
template <typename Backward>
void record(const char* op, const Tensor& x, const Tensor& out, Save save, Backward backward) {
  auto node = autograd::make_node(op, x);
  if (!node) return;
  const bool keep_x = save == Save::Input || save == Save::Both;
  const bool keep_out = save == Save::Output || save == Save::Both;
  if (keep_x) node->save(x);
  if (keep_out) node->save_output(out);
  node->set_backward([backward, keep_x, keep_out](const TensorList& g, const TensorList& saved) {
    const Tensor x = keep_x ? saved[0] : Tensor();
    const Tensor out = keep_out ? saved[keep_x ? 1 : 0] : Tensor();
    return TensorList{backward(g[0], x, out)};
  });
  autograd::set_history(out, node);
}

// Gradient of amax/amin: split evenly among the elements equal to the result (the NaNs, when it is NaN).
Tensor evenly_distribute(const Tensor& g, const Tensor& x, const Tensor& out, const ReduceSpec& s) {
  const Tensor value = keep_dims(out, s);
  Tensor mask = logical_or(x == value, logical_and(isnan(x), isnan(value)));
  Tensor ties = sum(mask, s.dims, true);
  return where(mask, expand_back(g, s) / ties, 0);
}

// Gradient of prod, exact also where x has zeros: d prod / d x_i = prod over the others. With z zeros
// among the reduced elements the others' product is nonzero only for z == 0 and for the zero itself
// when z == 1; the factor below also keeps the second derivative right for z <= 2.
Tensor prod_backward(const Tensor& g, const Tensor& x, const Tensor& out, const ReduceSpec& s) {
  Tensor is_zero = x == 0;
  if (!any(is_zero).item<bool>()) return expand_back(g, s) * keep_dims(out, s) / x;
  Tensor safe = where(is_zero, 1, x);
  Tensor nonzero_prod = prod(safe, s.dims, true);
  Tensor zeros_count = sum(is_zero, s.dims, true);
  Tensor zero_vals = where(is_zero, x, 0);             // value 0, derivative 1 at the zeros
  Tensor zero_sum = sum(zero_vals, s.dims, true);
  // Product of the zeros other than x_i (as a function with the right derivatives).
  Tensor others = where(zeros_count == 0, 1,
                        where(zeros_count == 1, where(is_zero, 1, zero_sum),
                              where(zeros_count == 2, where(is_zero, zero_sum - zero_vals, 0), 0)));
  return expand_back(g, s) * nonzero_prod / safe * others;
}

// where(t == 0, 1, t): a divisor that keeps the masked branch finite (and its derivatives NaN-free).
Tensor nonzero_or_one(const Tensor& t) { return where(t == 0, 1, t); }

Tensor var_backward(const Tensor& g, const Tensor& x, const ReduceSpec& s, int64_t correction) {
  const double divisor = std::max(0.0, static_cast<double>(s.count - correction));
  return expand_back(g, s) * (x - mean(x, s.dims, true)) * (2.0 / divisor);
}

Tensor norm_backward(const Tensor& g, const Tensor& x, const Tensor& out, const ReduceSpec& s, double p) {
  if (p == 0.0) return zeros_like(x);
  if (p == 1.0) return expand_back(g, s) * sign(x);
  const Tensor norm = keep_dims(out, s);
  const Tensor gk = keep_dims(g, s);
  if (std::isinf(p)) {
    // Like amax/amin of |x|: split evenly among the elements reaching the norm (NaNs included).
    Tensor a = abs(x);
    Tensor mask = logical_or(a == norm, isnan(a));
    return sign(x) * where(mask, gk / sum(mask, s.dims, true), 0);
  }
  // x |x|^(p-2) / norm^(p-1), written sign(x) |x|^(p-1) / norm^(p-1): zero where the norm or x is zero.
  Tensor zero_norm = norm == 0;
  Tensor scale = where(zero_norm, 0, gk / pow(nonzero_or_one(norm), p - 1));
  if (p == 2.0) return x * scale;
  return sign(x) * pow(nonzero_or_one(abs(x)), p - 1) * scale;
}

// Values and indices of the max/min over the one dim of s; no recording.
ValuesIndices arg_reduce(const char* op, const Tensor& x, const ReduceSpec& s, bool largest) {
  check_no_empty_reduction(op, x, s);
  Result values = make_result(s, x.dtype(), x.device());
  Result indices = make_result(s, kInt64, x.device());
  if (values.out.numel() > 0)
    (largest ? kernels::argmax_kernel : kernels::argmin_kernel).get(x.device())(values.keep, indices.keep, x);
  return {values.out, indices.out};
}

Tensor extreme(const char* op, const Tensor& x, const Shape& dims, bool keepdim, bool largest) {
  const ReduceSpec s = make_spec(op, x, dims, keepdim);
  check_no_empty_reduction(op, x, s);
  Tensor out = run_reduce(largest ? kernels::amax_kernel : kernels::amin_kernel, x, s, x.dtype(), 0.0);
  record(op, x, out, Save::Both, [s](const Tensor& g, const Tensor& x, const Tensor& out) { return evenly_distribute(g, x, out, s); });
  return out;
}

ValuesIndices extreme_along(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool largest) {
  check_defined(x, op);
  const int64_t d = detail::wrap_dim(dim, x.dim(), op);
  const ReduceSpec s = make_spec(op, x, {d}, keepdim);
  ValuesIndices r = arg_reduce(op, x, s, largest);
  if (auto node = autograd::make_node(op, x)) {
    node->save(r.indices);
    node->set_backward([s, d](const TensorList& g, const TensorList& saved) {
      if (s.in_shape.empty()) return TensorList{g[0]};
      // The gradient goes to the selected position: positions along d equal to the index.
      Shape pos_shape(s.in_shape.size(), 1);
      pos_shape[d] = s.in_shape[d];
      Tensor positions = arange(s.in_shape[d], TensorOptions(kInt64, g[0].device())).view(pos_shape);
      return TensorList{where(positions == keep_dims(saved[0], s), expand_back(g[0], s), 0)};
    });
    autograd::set_history(r.values, node);
  }
  return r;
}

Tensor arg_index(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool largest) {
  check_defined(x, op);
  if (dim) return arg_reduce(op, x, make_spec(op, x, {*dim}, keepdim), largest).indices;
  RTX_CHECK(x.numel() != 0, IndexError,
            "[{}] cannot reduce over a zero-size dim: the input of shape {} has no elements; give a dim to reduce "
            "over a nonempty one",
            op, shape_str(x.sizes()));
  const Tensor c = detail::contiguous_raw(x);
  const Tensor flat = detail::make_view(c, {x.numel()}, {1}, c.storage_offset());
  Tensor index = arg_reduce(op, flat, make_spec(op, flat, {0}, false), largest).indices;
  return keepdim ? detail::make_view(index, Shape(x.dim(), 1), Shape(x.dim(), 1), 0) : index;
}

Tensor var_impl(const char* op, const Tensor& x, const Shape& dims, int64_t correction, bool keepdim, bool take_sqrt) {
  const ReduceSpec s = make_spec(op, x, dims, keepdim);
  check_floating(op, x);
  Tensor out = run_reduce(kernels::var_kernel, x, s, x.dtype(), kNaN, correction, take_sqrt);
  if (take_sqrt) {
    // PyTorch's rule: zero gradient where the standard deviation is zero.
    record(op, x, out, Save::Both, [s, correction](const Tensor& g, const Tensor& x, const Tensor& out) {
      Tensor g_var = where(out == 0, 0, g / (nonzero_or_one(out) * 2));
      return var_backward(g_var, x, s, correction);
    });
  } else {
    record(op, x, out, Save::Input, [s, correction](const Tensor& g, const Tensor& x, const Tensor&) {
      return var_backward(g, x, s, correction);
    });
  }
  return out;
}

Tensor logical(const char* op, const KernelTable<kernels::ReduceFn>& k, const Tensor& x, const Shape& dims,
               bool keepdim, bool empty_value) {
  const ReduceSpec s = make_spec(op, x, dims, keepdim);
  return run_reduce(k, x, s, kBool, empty_value ? 1.0 : 0.0);
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  RTX_AUTOCAST(fp32, sum, x, dims, keepdim);
  const ReduceSpec s = make_spec("sum", x, dims, keepdim);
  Tensor out = run_reduce(kernels::sum_kernel, x, s, widened(x.dtype()), 0.0);
  record("sum", x, out, Save::Nothing, [s](const Tensor& g, const Tensor&, const Tensor&) { return expand_back(g, s); });
  return out;
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  const ReduceSpec s = make_spec("mean", x, dims, keepdim);
  check_floating("mean", x);
  Tensor out = run_reduce(kernels::mean_kernel, x, s, x.dtype(), kNaN);
  record("mean", x, out, Save::Nothing, [s](const Tensor& g, const Tensor&, const Tensor&) { return expand_back(g, s) / s.count; });
  return out;
}

Tensor prod(const Tensor& x, const Shape& dims, bool keepdim) {
  RTX_AUTOCAST(fp32, prod, x, dims, keepdim);
  const ReduceSpec s = make_spec("prod", x, dims, keepdim);
  Tensor out = run_reduce(kernels::prod_kernel, x, s, widened(x.dtype()), 1.0);
  record("prod", x, out, Save::Both, [s](const Tensor& g, const Tensor& x, const Tensor& out) { return prod_backward(g, x, out, s); });
  return out;
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) { return extreme("amax", x, dims, keepdim, true); }
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) { return extreme("amin", x, dims, keepdim, false); }
Tensor max(const Tensor& x) { return extreme("max", x, {}, false, true); }
Tensor min(const Tensor& x) { return extreme("min", x, {}, false, false); }

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) { return extreme_along("max", x, dim, keepdim, true); }
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) { return extreme_along("min", x, dim, keepdim, false); }

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_index("argmax", x, dim, keepdim, true); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return arg_index("argmin", x, dim, keepdim, false); }

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return var_impl("var", x, dims, correction, keepdim, false);
}

Tensor std(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return var_impl("std", x, dims, correction, keepdim, true);
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  RTX_AUTOCAST(fp32, norm, x, p, dims, keepdim);
  const ReduceSpec s = make_spec("norm", x, dims, keepdim);
  check_floating("norm", x);
  RTX_CHECK(!std::isnan(p), ValueError, "[norm] p must be a number (got NaN)");
  if (std::isinf(p)) check_no_empty_reduction("norm", x, s);
  Tensor out = run_reduce(kernels::norm_kernel, x, s, x.dtype(), 0.0, p);
  record("norm", x, out, Save::Both, [s, p](const Tensor& g, const Tensor& x, const Tensor& out) { return norm_backward(g, x, out, s, p); });
  return out;
}

Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  RTX_AUTOCAST(fp32, logsumexp, x, dims, keepdim);
  const ReduceSpec s = make_spec("logsumexp", x, dims, keepdim);
  check_floating("logsumexp", x);
  Tensor out = run_reduce(kernels::logsumexp_kernel, x, s, x.dtype(), -kInf);
  record("logsumexp", x, out, Save::Both, [s](const Tensor& g, const Tensor& x, const Tensor& out) {
    return expand_back(g, s) * exp(x - keep_dims(out, s));
  });
  return out;
}

Tensor any(const Tensor& x, const Shape& dims, bool keepdim) { return logical("any", kernels::any_kernel, x, dims, keepdim, false); }
Tensor all(const Tensor& x, const Shape& dims, bool keepdim) { return logical("all", kernels::all_kernel, x, dims, keepdim, true); }

Tensor cumsum(const Tensor& x, int64_t dim) {
  RTX_AUTOCAST(fp32, cumsum, x, dim);
  check_defined(x, "cumsum");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "cumsum");
  Tensor out = detail::make_tensor(x.sizes(), widened(x.dtype()), x.device());
  if (out.numel() > 0) kernels::cumsum_kernel.get(x.device())(out, detail::contiguous_raw(x), d);
  if (auto node = autograd::make_node("cumsum", x)) {
    // The reverse cumulative sum: sum over j >= i of g_j.
    node->set_backward([d](const TensorList& g, const TensorList&) {
      if (g[0].dim() == 0) return TensorList{g[0]};
      return TensorList{sum(g[0], {d}, true) - cumsum(g[0], d) + g[0]};
    });
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace rtx
