// Statistics built from reductions, sort and gather (so every device and autograd come with them):
// var_mean, std_mean, aminmax, nansum, nanmean, kthvalue, median, nanmedian, quantile and nanquantile. Order
// statistics sort along the dim (NaN sorts last) and gather the element they pick in each row, so the
// gradient flows to the element picked, as in PyTorch.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::wrap_dim;

// x with at least one dim (a 0-d tensor as [1]).
Tensor at_least_1d(const Tensor& x) { return x.dim() == 0 ? x.view({1}) : x; }

// The count of NaNs along d (kept as a size-1 dim), int64; zeros for types without NaN.
Tensor nan_count(const Tensor& x, int64_t d) {
  if (is_floating(x.dtype())) return sum(isnan(x), {d}, true);
  Shape s = x.sizes();
  s[static_cast<size_t>(d)] = 1;
  return zeros(s, TensorOptions(kInt64, x.device()));
}

// The median along dim: element (count - 1) / 2 of each sorted row. median counts every element and
// picks the first NaN of a row that has one; nanmedian counts the others (a row of NaNs gives NaN).
ValuesIndices sorted_median(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool skip_nan) {
  check_defined(x, op);
  const Tensor x1 = at_least_1d(x);
  const int64_t d = wrap_dim(dim, x1.dim(), op);
  const int64_t n = x1.size(d);
  RTX_CHECK(n > 0, ShapeError, "[{}] dim {} of shape {} is empty; there is no median to pick", op, d,
            detail::shape_str(x.sizes()));
  const ValuesIndices sorted = sort(x1, d);
  const Tensor nans = nan_count(x1, d);
  Tensor position;
  if (skip_nan) {
    const Tensor count = sub(Scalar(n), nans);
    position = where(gt(count, Scalar(0)), floor_divide(count - 1, Scalar(2)), Scalar(0));
  } else {
    position = where(gt(nans, Scalar(0)), sub(Scalar(n), nans), Scalar((n - 1) / 2));
  }
  ValuesIndices r{gather(sorted.values, d, position), gather(sorted.indices, d, position)};
  if (x.dim() == 0) return {r.values.view({}), r.indices.view({})};
  if (!keepdim) return {r.values.squeeze(d), r.indices.squeeze(d)};
  return r;
}

Tensor flat_median(const char* op, const Tensor& x, bool skip_nan) {
  check_defined(x, op);
  if (x.numel() == 0 && is_floating(x.dtype()))
    return full({}, Scalar(std::numeric_limits<double>::quiet_NaN()), x.options());
  return sorted_median(op, x.flatten(), 0, false, skip_nan).values;
}

// lerp(a, b, w) as PyTorch computes it: from the nearer end.
Tensor lerp_weighted(const Tensor& a, const Tensor& b, const Tensor& w) {
  const Tensor span = b - a;
  return where(lt(w, Scalar(0.5)), a + w * span, b - span * (1.0 - w));
}

}  // namespace

TensorList var_mean(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  check_defined(x, "var_mean");
  return {var(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

TensorList std_mean(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  check_defined(x, "std_mean");
  return {rtx::std(x, dims, correction, keepdim), mean(x, dims, keepdim)};
}

TensorList aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_defined(x, "aminmax");
  const Shape dims = dim ? Shape{*dim} : Shape{};
  RTX_CHECK(dim ? x.dim() == 0 || x.size(wrap_dim(*dim, x.dim(), "aminmax")) > 0 : x.numel() > 0, ShapeError,
            "[aminmax] cannot reduce an empty {} of shape {}: there is no minimum or maximum",
            dim ? fmt::format("dim {}", *dim) : std::string("tensor"), detail::shape_str(x.sizes()));
  return {amin(x, dims, keepdim), amax(x, dims, keepdim)};
}

Tensor nansum(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined(x, "nansum");
  return sum(is_floating(x.dtype()) ? where(isnan(x), Scalar(0), x) : x, dims, keepdim);
}

Tensor nanmean(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined(x, "nanmean");
  RTX_CHECK(is_floating(x.dtype()), DTypeError, "[nanmean] expects a floating tensor, got {}", x.dtype());
  return nansum(x, dims, keepdim) / sum(logical_not(isnan(x)), dims, keepdim).to(x.dtype());
}

ValuesIndices kthvalue(const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
  check_defined(x, "kthvalue");
  const Tensor x1 = at_least_1d(x);
  const int64_t d = wrap_dim(dim, x1.dim(), "kthvalue");
  RTX_CHECK(k >= 1 && k <= x1.size(d), IndexError, "[kthvalue] k = {} is out of range for dim {} of shape {}",
            k, d, detail::shape_str(x.sizes()));
  const ValuesIndices sorted = sort(x1, d);
  ValuesIndices r{sorted.values.narrow(d, k - 1, 1), sorted.indices.narrow(d, k - 1, 1)};
  if (x.dim() == 0) return {r.values.view({}), r.indices.view({})};
  if (!keepdim) return {r.values.squeeze(d), r.indices.squeeze(d)};
  return {r.values.contiguous(), r.indices.contiguous()};
}

Tensor median(const Tensor& x) { return flat_median("median", x, false); }
ValuesIndices median(const Tensor& x, int64_t dim, bool keepdim) {
  return sorted_median("median", x, dim, keepdim, false);
}
Tensor nanmedian(const Tensor& x) { return flat_median("nanmedian", x, true); }
ValuesIndices nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return sorted_median("nanmedian", x, dim, keepdim, true);
}

namespace {
// quantile and nanquantile: the sorted rows (NaN last) indexed at rank q * (count - 1), where count is
// the row's length (a NaN then gives NaN) or, skipping NaNs, its count of numbers.
Tensor sorted_quantile(const char* op, const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                       const std::string& interpolation, bool skip_nan) {
  check_defined(x, op);
  check_defined(q, op, "q");
  RTX_CHECK(x.dtype() == kFloat32 || x.dtype() == kFloat64, DTypeError,
            "[{}] expects a float32 or float64 input, got {}", op, x.dtype());
  RTX_CHECK(q.dtype() == x.dtype(), DTypeError, "[{}] q ({}) must have the input's dtype ({})", op, q.dtype(),
            x.dtype());
  RTX_CHECK(q.dim() <= 1, ShapeError, "[{}] q must be a number or a 1-d tensor, got shape {}", op,
            detail::shape_str(q.sizes()));
  RTX_CHECK(interpolation == "linear" || interpolation == "lower" || interpolation == "higher" ||
                interpolation == "midpoint" || interpolation == "nearest",
            ValueError,
            "[{}] interpolation must be 'linear', 'lower', 'higher', 'midpoint' or 'nearest', got '{}'", op,
            interpolation);
  RTX_CHECK(all(logical_and(ge(q, Scalar(0)), le(q, Scalar(1)))).item().to_double() != 0.0, ValueError,
            "[{}] q values must lie in [0, 1]", op);
  const Tensor x1 = dim ? at_least_1d(x) : x.flatten();
  const int64_t d = dim ? wrap_dim(*dim, x1.dim(), op) : 0;
  const int64_t n = x1.size(d);
  RTX_CHECK(n > 0, ShapeError, "[{}] expects a non-empty input{}, got shape {}", op,
            dim ? fmt::format(" along dim {}", d) : std::string(), detail::shape_str(x.sizes()));
  const Tensor q1 = at_least_1d(q).to(x.device());
  Tensor out;
  const Tensor s = movedim(sort(x1, d).values, {d}, {-1});  // the sorted rows: [rest..., n]
  // quantile: a row holding a NaN gives NaN, its rank pointing at the last element, a NaN.
  // nanquantile: the numbers come first; a row of NaNs has none and again points at a NaN.
  const Tensor nans = sum(isnan(s), {-1}, true).to(x.dtype());
  const Tensor ranks = skip_nan ? where(eq(nans, Scalar(static_cast<double>(n))), Scalar(static_cast<double>(n - 1)),
                                        q1 * (sub(Scalar(static_cast<double>(n - 1)), nans)))
                                : where(gt(nans, Scalar(0)), Scalar(static_cast<double>(n - 1)),
                                        q1 * static_cast<double>(n - 1));
  const auto at = [&](const Tensor& r) { return gather(s, -1, r.to(kInt64)); };
  if (interpolation == "lower") {
    out = at(floor(ranks));
  } else if (interpolation == "higher") {
    out = at(ceil(ranks));
  } else if (interpolation == "nearest") {
    out = at(round(ranks));
  } else {
    const Tensor below = floor(ranks);
    const Tensor weight = interpolation == "midpoint" ? full_like(ranks, Scalar(0.5)) : ranks - below;
    out = lerp_weighted(at(below), at(ceil(ranks)), weight);
  }
  // out is [rest..., Q]: the reduced dim comes back as 1 with keepdim, and Q goes first.
  if (keepdim && x.dim() > 0) {
    if (dim) {
      out = out.unsqueeze(d);
    } else {
      Shape s(static_cast<size_t>(x.dim()), 1);
      s.push_back(q1.numel());
      out = out.reshape(s);
    }
  }
  out = movedim(out, {-1}, {0});
  return q.dim() == 0 ? out.squeeze(0) : out;
}
}  // namespace

Tensor quantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                const std::string& interpolation) {
  return sorted_quantile("quantile", x, q, dim, keepdim, interpolation, false);
}

Tensor nanquantile(const Tensor& x, const Tensor& q, std::optional<int64_t> dim, bool keepdim,
                   const std::string& interpolation) {
  return sorted_quantile("nanquantile", x, q, dim, keepdim, interpolation, true);
}

}  // namespace rtx
