// Inclusive scans built from pointwise ops (so every device, dtype rule and autograd come with them):
// cumprod, logcumsumexp, cummax and cummin. Each runs the Hillis-Steele scan: ceil(log2(n)) passes,
// pass k combining every element with the one 2^k before it, so that after the passes element i
// holds the combination of elements 0..i. The gradient follows the same passes back (through zeros
// for cumprod, exactly; through the picked element for cummax and cummin).
#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;

// x scanned along d with combine(earlier, later), elementwise over two equal-shaped tensors.
template <typename Combine>
Tensor scan(const Tensor& x, int64_t d, const Combine& combine) {
  const int64_t n = x.size(d);
  Tensor out = x;
  for (int64_t step = 1; step < n; step *= 2) {
    const Tensor later = combine(out.narrow(d, 0, n - step), out.narrow(d, step, n - step));
    out = cat({out.narrow(d, 0, step), later}, d);
  }
  return out.is_same(x) ? x.clone() : out;
}

// The running maximum (or minimum) and the index of the element it came from: on a tie the later
// element's index, and a NaN, once met, stays with its index (as PyTorch's).
ValuesIndices running_extreme(const char* op, const Tensor& x, int64_t dim, bool is_max) {
  check_defined(x, op);
  const Tensor x1 = x.dim() == 0 ? x.view({1}) : x;
  const int64_t d = detail::wrap_dim(dim, x1.dim(), op);
  Shape index_shape(static_cast<size_t>(x1.dim()), 1);
  index_shape[static_cast<size_t>(d)] = x1.size(d);
  Tensor values = x1, indices = arange(x1.size(d), TensorOptions(kInt64, x.device())).view(index_shape).expand(x1.sizes());
  const int64_t n = x1.size(d);
  for (int64_t step = 1; step < n; step *= 2) {
    const Tensor ev = values.narrow(d, 0, n - step), lv = values.narrow(d, step, n - step);
    const Tensor ei = indices.narrow(d, 0, n - step), li = indices.narrow(d, step, n - step);
    // The later element wins unless the earlier one is strictly better or is a NaN the later is not.
    Tensor earlier_wins = is_max ? gt(ev, lv) : lt(ev, lv);
    if (is_floating(x.dtype())) earlier_wins = logical_or(earlier_wins, logical_and(isnan(ev), logical_not(isnan(lv))));
    values = cat({values.narrow(d, 0, step), where(earlier_wins, ev, lv)}, d);
    indices = cat({indices.narrow(d, 0, step), where(earlier_wins, ei, li)}, d);
  }
  if (n <= 1) {  // no pass ran: values is x itself and indices an expanded view
    values = values.clone();
    indices = indices.contiguous();
  }
  if (x.dim() == 0) return {values.view({}), indices.view({})};
  return {values, indices};
}

}  // namespace

Tensor cumprod(const Tensor& x, int64_t dim) {
  check_defined(x, "cumprod");
  // Integers and bool multiply in int64, as cumsum's sums.
  const Tensor x1 = is_floating(x.dtype()) ? x : x.to(kInt64);
  const Tensor x2 = x1.dim() == 0 ? x1.view({1}) : x1;
  const Tensor out = scan(x2, detail::wrap_dim(dim, x2.dim(), "cumprod"),
                          [](const Tensor& a, const Tensor& b) { return a * b; });
  return x.dim() == 0 ? out.view({}) : out;
}

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  check_defined(x, "logcumsumexp");
  RTX_CHECK(is_floating(x.dtype()), DTypeError, "[logcumsumexp] expects a floating tensor, got {}", x.dtype());
  const Tensor x1 = x.dim() == 0 ? x.view({1}) : x;
  const Tensor out = scan(x1, detail::wrap_dim(dim, x1.dim(), "logcumsumexp"),
                          [](const Tensor& a, const Tensor& b) { return logaddexp(a, b); });
  return x.dim() == 0 ? out.view({}) : out;
}

ValuesIndices cummax(const Tensor& x, int64_t dim) { return running_extreme("cummax", x, dim, true); }
ValuesIndices cummin(const Tensor& x, int64_t dim) { return running_extreme("cummin", x, dim, false); }

}  // namespace rtx
