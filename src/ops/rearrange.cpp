// Rearranging ops built from other ops (so every device and autograd come with them): flip, roll,
// movedim, repeat_interleave, diff, unfold's sliding windows, meshgrid, take_along_dim and rot90.
#include <algorithm>
#include <numeric>

#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;
using detail::shape_str;
using detail::wrap_dim;

// The dims of x that `dims` names, wrapped, in their order; a dim named twice raises.
std::vector<int64_t> distinct_dims(const Tensor& x, const Shape& dims, const char* op) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(d, std::max<int64_t>(x.dim(), 1), op));
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      RTX_CHECK(out[i] != out[j], ValueError, "[{}] dims {} name dim {} more than once", op, shape_str(dims), out[i]);
  return out;
}

}  // namespace

Tensor flip(const Tensor& x, const Shape& dims) {
  check_defined(x, "flip");
  Tensor out = x;
  for (int64_t d : distinct_dims(x, dims, "flip")) {
    if (x.dim() == 0) break;
    const int64_t n = x.size(d);
    out = index_select(out, d, arange(n - 1, -1, -1, TensorOptions(kInt64, x.device())));
  }
  return dims.empty() || x.dim() == 0 ? out.clone() : out;
}

Tensor fliplr(const Tensor& x) {
  check_defined(x, "fliplr");
  RTX_CHECK(x.dim() >= 2, ShapeError, "[fliplr] expects a tensor of at least 2 dims, got shape {}", shape_str(x.sizes()));
  return flip(x, {1});
}

Tensor flipud(const Tensor& x) {
  check_defined(x, "flipud");
  RTX_CHECK(x.dim() >= 1, ShapeError, "[flipud] expects a tensor of at least 1 dim, got a 0-d tensor");
  return flip(x, {0});
}

Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims) {
  check_defined(x, "roll");
  if (dims.empty()) {
    RTX_CHECK(shifts.size() == 1, ValueError, "[roll] without dims, shifts must be one number, got {}",
              shape_str(shifts));
    return roll(x.flatten(), shifts, {0}).view(x.sizes());
  }
  RTX_CHECK(shifts.size() == dims.size(), ValueError, "[roll] shifts {} and dims {} must have the same length",
            shape_str(shifts), shape_str(dims));
  Tensor out = x;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    const int64_t n = x.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;  // the first s elements of the result are the last s of x
    if (s == 0) continue;
    out = cat({out.narrow(d, n - s, s), out.narrow(d, 0, n - s)}, d);
  }
  return out.is_same(x) ? x.clone() : out;
}

Tensor movedim(const Tensor& x, const Shape& source, const Shape& destination) {
  check_defined(x, "movedim");
  RTX_CHECK(source.size() == destination.size(), ValueError,
            "[movedim] source {} and destination {} must name as many dims", shape_str(source),
            shape_str(destination));
  const int64_t nd = x.dim();
  const std::vector<int64_t> src = distinct_dims(x, source, "movedim");
  const std::vector<int64_t> dst = distinct_dims(x, destination, "movedim");
  // Each named dim goes to its destination; the others fill the remaining places in their order.
  Shape order(static_cast<size_t>(nd), -1);
  std::vector<bool> moved(static_cast<size_t>(nd), false);
  for (size_t i = 0; i < src.size(); ++i) {
    order[static_cast<size_t>(dst[i])] = src[i];
    moved[static_cast<size_t>(src[i])] = true;
  }
  int64_t next = 0;
  for (auto& o : order) {
    if (o >= 0) continue;
    while (moved[static_cast<size_t>(next)]) ++next;
    o = next++;
  }
  return x.permute(order);
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  check_defined(x, "repeat_interleave");
  RTX_CHECK(repeats >= 0, ValueError, "[repeat_interleave] repeats must be non-negative, got {}", repeats);
  if (!dim) return repeat_interleave(x.flatten(), repeats, 0);
  const int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave");
  const Tensor x1 = x.dim() == 0 ? x.view({1}) : x;
  Shape expanded = x1.sizes();
  expanded.insert(expanded.begin() + d + 1, repeats);
  return x1.unsqueeze(d + 1).expand(expanded).flatten(d, d + 1);
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  check_defined(x, "repeat_interleave");
  check_defined(repeats, "repeat_interleave");
  RTX_CHECK(is_integral(repeats.dtype()) && repeats.dim() <= 1, ValueError,
            "[repeat_interleave] repeats must be an integer tensor of 0 or 1 dims, got {} of shape {}",
            repeats.dtype(), shape_str(repeats.sizes()));
  if (repeats.dim() == 0) return repeat_interleave(x, repeats.item().to_int(), dim);
  if (!dim) return repeat_interleave(x.flatten(), repeats, 0);
  const int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "repeat_interleave");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  RTX_CHECK(repeats.numel() == n, ShapeError, "[repeat_interleave] {} repeats for a dim of size {}",
            repeats.numel(), n);
  // The source index of every output position, made on the host (the output's size depends on it).
  const std::vector<int64_t> counts = repeats.tolist<int64_t>();
  std::vector<int64_t> index;
  for (int64_t i = 0; i < n; ++i) {
    RTX_CHECK(counts[static_cast<size_t>(i)] >= 0, ValueError,
              "[repeat_interleave] repeats must be non-negative, got {}", counts[static_cast<size_t>(i)]);
    index.insert(index.end(), static_cast<size_t>(counts[static_cast<size_t>(i)]), i);
  }
  const Tensor idx = tensor(index, TensorOptions(kInt64, x.device()));
  return index_select(x.dim() == 0 ? x.view({1}) : x, d, idx);
}

Tensor diff(const Tensor& x, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  check_defined(x, "diff");
  RTX_CHECK(x.dim() > 0, ShapeError, "[diff] expects a tensor of at least 1 dim, got a 0-d tensor");
  RTX_CHECK(n >= 0, ValueError, "[diff] order n must be non-negative, got {}", n);
  const int64_t d = wrap_dim(dim, x.dim(), "diff");
  TensorList parts;
  if (prepend.defined()) parts.push_back(prepend);
  parts.push_back(x);
  if (append.defined()) parts.push_back(append);
  Tensor out = parts.size() == 1 ? x : cat(parts, d);
  for (int64_t i = 0; i < n && out.size(d) > 0; ++i) {
    const int64_t m = out.size(d) - 1;
    const Tensor hi = out.narrow(d, 1, m), lo = out.narrow(d, 0, m);
    out = out.dtype() == kBool ? logical_xor(hi, lo) : hi - lo;
  }
  return n == 0 ? out.clone() : out;
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  check_defined(x, "unfold");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "unfold");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  RTX_CHECK(size >= 0 && size <= n, ShapeError, "[unfold] window size {} does not fit dim {} of size {}", size, d, n);
  RTX_CHECK(step > 0, ValueError, "[unfold] step must be positive, got {}", step);
  if (x.dim() == 0) return x.view({1});
  Shape sizes = x.sizes(), strides = x.strides();
  sizes[static_cast<size_t>(d)] = (n - size) / step + 1;
  strides[static_cast<size_t>(d)] *= step;
  sizes.push_back(size);
  strides.push_back(x.stride(d));
  return as_strided(x, sizes, strides, x.storage_offset());
}

TensorList meshgrid(const TensorList& tensors, const std::string& indexing) {
  RTX_CHECK(indexing == "ij" || indexing == "xy", ValueError, "[meshgrid] indexing must be 'ij' or 'xy', got '{}'",
            indexing);
  RTX_CHECK(!tensors.empty(), ValueError, "[meshgrid] expects at least one tensor");
  // Tensor i varies along output dim i; "xy" swaps the first two dims (Cartesian indexing).
  std::vector<int64_t> axis(tensors.size());
  std::iota(axis.begin(), axis.end(), 0);
  if (indexing == "xy" && tensors.size() >= 2) std::swap(axis[0], axis[1]);
  Shape shape(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_defined(tensors[i], "meshgrid");
    RTX_CHECK(tensors[i].dim() <= 1, ShapeError, "[meshgrid] expects 0-d or 1-d tensors, got tensor {} of shape {}", i,
              shape_str(tensors[i].sizes()));
    RTX_CHECK(tensors[i].dtype() == tensors[0].dtype() && tensors[i].device() == tensors[0].device(), ValueError,
              "[meshgrid] expects tensors of one dtype and device, got {} on {} and {} on {}", tensors[0].dtype(),
              tensors[0].device().str(), tensors[i].dtype(), tensors[i].device().str());
    shape[static_cast<size_t>(axis[i])] = tensors[i].numel();
  }
  TensorList out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Shape along(tensors.size(), 1);
    along[static_cast<size_t>(axis[i])] = tensors[i].numel();
    out.push_back(tensors[i].reshape(along).expand(shape));
  }
  return out;
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  check_defined(x, "take_along_dim");
  check_defined(indices, "take_along_dim");
  if (!dim) return gather(x.flatten(), 0, indices.flatten());
  RTX_CHECK(x.dim() == indices.dim(), ShapeError,
            "[take_along_dim] input of shape {} and indices of shape {} must have as many dims", shape_str(x.sizes()),
            shape_str(indices.sizes()));
  const int64_t d = wrap_dim(*dim, std::max<int64_t>(x.dim(), 1), "take_along_dim");
  if (x.dim() == 0) return gather(x.view({1}), 0, indices.view({1})).view({});
  // Every dim but d broadcasts between the two.
  Shape in_shape = x.sizes(), idx_shape = indices.sizes();
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k == d) continue;
    const Shape both = broadcast_shapes({in_shape[static_cast<size_t>(k)]}, {idx_shape[static_cast<size_t>(k)]},
                                        "take_along_dim");
    in_shape[static_cast<size_t>(k)] = idx_shape[static_cast<size_t>(k)] = both[0];
  }
  return gather(x.expand(in_shape), d, indices.expand(idx_shape));
}

Tensor rot90(const Tensor& x, int64_t k, const Shape& dims) {
  check_defined(x, "rot90");
  RTX_CHECK(dims.size() == 2, ValueError, "[rot90] expects 2 dims, got {}", shape_str(dims));
  RTX_CHECK(x.dim() >= 2, ShapeError, "[rot90] expects a tensor of at least 2 dims, got shape {}",
            shape_str(x.sizes()));
  const std::vector<int64_t> d = distinct_dims(x, dims, "rot90");
  switch (((k % 4) + 4) % 4) {
    case 1: return flip(x, {d[1]}).transpose(d[0], d[1]);
    case 2: return flip(x, {d[0], d[1]});
    case 3: return flip(x, {d[0]}).transpose(d[0], d[1]);
    default: return x.clone();
  }
}

}  // namespace rtx
