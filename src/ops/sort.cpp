// Sorting front-ends: sort (stable, NaN largest like PyTorch), argsort and topk. Only the values are
// differentiable: their gradient goes back to the positions the indices name (a scatter into zeros).
#include "autograd/function.h"
#include "dispatch/sort.h"
#include "ops/internal.h"

namespace rtx {

namespace {

using detail::check_defined;

// A 0-d tensor as a 1-element 1-d view (kernels always see the dim they work along); others as they are.
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? detail::make_view(t, {1}, {1}, t.storage_offset()) : t; }

// Records values' backward: each gradient element goes to where its value came from in x.
void record_values_backward(const char* op, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices) {
  if (auto node = autograd::make_node(op, x)) {
    node->save(indices);
    const Shape in_shape = x.sizes();
    node->set_backward([in_shape, dim](const TensorList& g, const TensorList& s) {
      Tensor z = zeros(in_shape, g[0].options());
      return TensorList{g[0].numel() == 0 ? z : scatter(z, dim, s[0], g[0])};
    });
    autograd::set_history(values, node);
  }
}

// Sorted values and indices, not recorded.
ValuesIndices sort_values(const Tensor& x, int64_t dim, bool descending) {
  ValuesIndices r{detail::make_tensor(x.sizes(), x.dtype(), x.device()), detail::make_tensor(x.sizes(), kInt64, x.device())};
  if (x.numel() > 0) kernels::sort_kernel.get(x.device())(at_least_1d(r.values), at_least_1d(r.indices), at_least_1d(x), dim, descending);
  return r;
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  check_defined(x, "sort");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "sort");
  ValuesIndices r = sort_values(x, d, descending);
  record_values_backward("sort", x, d, r.values, r.indices);
  return r;
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  check_defined(x, "argsort");
  return sort_values(x, detail::wrap_dim(dim, x.dim(), "argsort"), descending).indices;
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  check_defined(x, "topk");
  const int64_t d = detail::wrap_dim(dim, x.dim(), "topk");
  const Tensor x1 = at_least_1d(x);
  const int64_t size = x1.size(d);
  RTX_CHECK(k >= 0 && k <= size, ValueError, "[topk] k = {} is out of range for dim {} of size {} (need 0 <= k <= {})",
            k, d, size, size);
  Shape shape = x1.sizes();
  shape[d] = k;
  if (x.dim() == 0 && k == 1) shape = {};
  ValuesIndices r{detail::make_tensor(shape, x.dtype(), x.device()), detail::make_tensor(shape, kInt64, x.device())};
  if (r.values.numel() > 0)
    kernels::topk_kernel.get(x.device())(at_least_1d(r.values), at_least_1d(r.indices), x1, d, k, largest, sorted);
  record_values_backward("topk", x, d, r.values, r.indices);
  return r;
}

}  // namespace rtx
