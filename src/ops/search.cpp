// Counting and searching built from sort, cumsum, masked_select and scatter (so every device comes
// with them): unique, unique_consecutive, bincount, searchsorted and bucketize. None of them is
// differentiable; those whose output size depends on the values read a count back from the device.
#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::shape_str;

// The runs of equal neighbours in the 1-d s: {values (the first of each run), the run of each element,
// the length of each run}. NaNs differ from each other, so each is a run of its own.
TensorList runs(const Tensor& s) {
  const int64_t n = s.numel();
  const TensorOptions longs(kInt64, s.device());
  if (n == 0) return {s.clone(), empty({0}, longs), empty({0}, longs)};
  const Tensor starts =
      cat({ones({1}, TensorOptions(kBool, s.device())), ne(s.narrow(0, 1, n - 1), s.narrow(0, 0, n - 1))}, 0);
  const Tensor values = masked_select(s, starts);
  const Tensor run = cumsum(starts, 0) - 1;
  const Tensor counts = scatter_add(zeros({values.numel()}, longs), 0, run, ones({n}, longs));
  return {values, run, counts};
}

}  // namespace

TensorList unique(const Tensor& x) {
  check_defined(x, "unique");
  NoGradGuard not_differentiable;
  const ValuesIndices sorted = sort(x.flatten(), 0);
  TensorList r = runs(sorted.values);
  // The run of the sorted element k belongs to the element sorted.indices[k] came from.
  r[1] = scatter(zeros({x.numel()}, r[1].options()), 0, sorted.indices, r[1]).view(x.sizes());
  return r;
}

TensorList unique_consecutive(const Tensor& x) {
  check_defined(x, "unique_consecutive");
  NoGradGuard not_differentiable;
  TensorList r = runs(x.flatten());
  r[1] = r[1].view(x.sizes());
  return r;
}

Tensor bincount(const Tensor& x, const Tensor& weights, int64_t minlength) {
  check_defined(x, "bincount");
  NoGradGuard not_differentiable;
  RTX_CHECK(x.dim() == 1 && is_integral(x.dtype()), ValueError,
            "[bincount] expects a 1-d integer tensor, got {} of shape {}", x.dtype(), shape_str(x.sizes()));
  RTX_CHECK(minlength >= 0, ValueError, "[bincount] minlength must be non-negative, got {}", minlength);
  RTX_CHECK(!weights.defined() || weights.sizes() == x.sizes(), ShapeError,
            "[bincount] weights of shape {} for an input of shape {}", weights.defined() ? shape_str(weights.sizes()) : "",
            shape_str(x.sizes()));
  int64_t bins = minlength;
  if (x.numel() > 0) {
    // The smallest and largest value, read back together.
    const std::vector<int64_t> range = stack(aminmax(x), 0).to(kInt64).cpu().tolist<int64_t>();
    RTX_CHECK(range[0] >= 0, ValueError, "[bincount] expects non-negative values, got {}", range[0]);
    bins = std::max(bins, range[1] + 1);
  }
  const Tensor index = x.to(kInt64);
  if (!weights.defined()) return scatter_add(zeros({bins}, TensorOptions(kInt64, x.device())), 0, index, ones_like(index));
  const DType t = is_floating(weights.dtype()) ? weights.dtype() : kFloat64;
  return scatter_add(zeros({bins}, TensorOptions(t, x.device())), 0, index, weights.to(t));
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right, bool out_int32,
                    const Tensor& sorter) {
  check_defined(sorted_sequence, "searchsorted", "sorted_sequence");
  check_defined(values, "searchsorted", "values");
  NoGradGuard not_differentiable;
  const Tensor& seq = sorted_sequence;
  RTX_CHECK(seq.dim() >= 1, ShapeError, "[searchsorted] sorted_sequence must have at least 1 dim, got a 0-d tensor");
  const bool rows = seq.dim() > 1;
  if (rows) {
    const Shape lead_s(seq.sizes().begin(), seq.sizes().end() - 1);
    const Shape lead_v(values.sizes().begin(), values.sizes().end() - (values.dim() > 0 ? 1 : 0));
    RTX_CHECK(values.dim() == seq.dim() && lead_s == lead_v, ShapeError,
              "[searchsorted] sorted_sequence {} and values {} must share every dim but the last",
              shape_str(seq.sizes()), shape_str(values.sizes()));
  }
  RTX_CHECK(!sorter.defined() || (sorter.sizes() == seq.sizes() && sorter.dtype() == kInt64), ShapeError,
            "[searchsorted] sorter must be int64 of the sequence's shape {}, got {} of shape {}",
            shape_str(seq.sizes()), sorter.defined() ? dtype_name(sorter.dtype()) : "",
            sorter.defined() ? shape_str(sorter.sizes()) : "");
  const DType t = result_type(seq, values);
  const int64_t m = seq.size(-1);
  // Every row as [B, m] and its values as [B, nv].
  Tensor s = (sorter.defined() ? gather(seq, -1, sorter) : seq).to(t).reshape({-1, m});
  const Tensor v = values.to(t).reshape({s.size(0), -1});
  const int64_t nv = v.size(1);
  // A stable sort of the values with the row: the values first for the left side (each lands before
  // the equal elements), last for the right side (after them). A value's answer is then the count of
  // sequence elements sorted before it.
  const Tensor order = argsort(right ? cat({s, v}, 1) : cat({v, s}, 1), 1);
  const Tensor is_value = right ? ge(order, Scalar(m)) : lt(order, Scalar(nv));
  const Tensor elements_before = cumsum(logical_not(is_value), 1);
  const Tensor which = masked_select(order, is_value).view({s.size(0), nv}) - (right ? m : 0);
  const Tensor found = masked_select(elements_before, is_value).view({s.size(0), nv});
  const Tensor out = scatter(zeros({s.size(0), nv}, TensorOptions(kInt64, seq.device())), 1, which, found);
  return out.view(values.sizes()).to(out_int32 ? kInt32 : kInt64);
}

Tensor bucketize(const Tensor& x, const Tensor& boundaries, bool right, bool out_int32) {
  check_defined(boundaries, "bucketize", "boundaries");
  RTX_CHECK(boundaries.dim() == 1, ShapeError, "[bucketize] boundaries must be 1-d, got shape {}",
            shape_str(boundaries.sizes()));
  return searchsorted(boundaries, x, right, out_int32);
}

}  // namespace rtx
