// CPU kernels of the sorting family: sort (stable) and topk, row by row along dim in parallel. Each
// row is loaded into (value, position) pairs, values widened to their compute type (float for the
// 16-bit floats, exact), ordered with a NaN-aware comparator (NaN is largest) and written back.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/dtype_dispatch.h"
#include "dispatch/sort.h"
#include "backend/cpu/row_walker.h"

namespace rtx::cpu {
namespace {


template <typename K>
struct Entry {
  K value;
  int64_t index;
};

template <typename K>
bool is_nan(K v) {
  if constexpr (std::is_floating_point_v<K>) return std::isnan(v);
  else return false;
}

// Whether a comes strictly before b in ascending (descending) order, NaN being the largest value.
template <typename K>
struct Before {
  bool descending;
  bool operator()(const Entry<K>& a, const Entry<K>& b) const {
    return descending ? (a.value > b.value || (is_nan(a.value) && !is_nan(b.value)))
                      : (a.value < b.value || (is_nan(b.value) && !is_nan(a.value)));
  }
};

// Before, with ties going to the lower position: a total order, so that unstable selection is deterministic.
template <typename K>
struct BeforeOrFirst {
  Before<K> before;
  bool operator()(const Entry<K>& a, const Entry<K>& b) const {
    return before(a, b) || (!before(b, a) && a.index < b.index);
  }
};

// Runs body(row, values_row, indices_row) for every row of x along dim, with row holding the row's
// (value, position) pairs; values/indices may have another size than x at dim.
template <typename T, typename Body>
void for_each_row(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, int64_t work_per_row,
                  const Body& body) {
  using K = detail::opmath_t<T>;
  const int64_t n = x.size(dim), xs = x.stride(dim);
  T* vp = static_cast<T*>(values.data_ptr());
  int64_t* ip = static_cast<int64_t*>(indices.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  const RowWalker<3> walker(x.sizes(), dim, {&values.strides(), &indices.strides(), &x.strides()});
  parallel_for(walker.rows(), std::max<int64_t>(1, kGrainSize / std::max<int64_t>(work_per_row, 1)),
               [&](int64_t b, int64_t e) {
                 RowWalker<3> w = walker;
                 w.seek(b);
                 std::vector<Entry<K>> row(static_cast<size_t>(n));
                 for (int64_t r = b; r < e; ++r, w.next()) {
                   const auto& off = w.offsets();
                   for (int64_t j = 0; j < n; ++j) row[j] = {static_cast<K>(xp[off[2] + j * xs]), j};
                   body(row, vp + off[0], ip + off[1]);
                 }
               });
}

// Writes the first count entries of row along dim.
template <typename T, typename K>
void store(const std::vector<Entry<K>>& row, int64_t count, T* values, int64_t vs, int64_t* indices, int64_t is) {
  for (int64_t j = 0; j < count; ++j) {
    values[j * vs] = static_cast<T>(row[j].value);
    indices[j * is] = row[j].index;
  }
}

void sort_cpu(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool descending) {
  const int64_t n = x.size(dim), vs = values.stride(dim), is = indices.stride(dim);
  RTX_DISPATCH_ALL(x.dtype(), "sort", [&] {
    using K = detail::opmath_t<scalar_t>;
    const Before<K> before{descending};
    for_each_row<scalar_t>(values, indices, x, dim, n * 8, [&](std::vector<Entry<K>>& row, scalar_t* v, int64_t* i) {
      std::stable_sort(row.begin(), row.end(), before);
      store(row, n, v, vs, i, is);
    });
  });
}

// Below this k a sorted topk uses a heap (partial_sort); above, selection then a sort of the k.
constexpr int64_t kHeapTopk = 32;

void topk_cpu(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, int64_t k, bool largest,
              bool sorted) {
  const int64_t n = x.size(dim), vs = values.stride(dim), is = indices.stride(dim);
  RTX_DISPATCH_ALL(x.dtype(), "topk", [&] {
    using K = detail::opmath_t<scalar_t>;
    const BeforeOrFirst<K> before{{largest}};
    for_each_row<scalar_t>(values, indices, x, dim, n * 2, [&](std::vector<Entry<K>>& row, scalar_t* v, int64_t* i) {
      const auto kth = row.begin() + k;
      if (sorted && k <= kHeapTopk) {
        std::partial_sort(row.begin(), kth, row.end(), before);
      } else {
        if (k < n) std::nth_element(row.begin(), kth, row.end(), before);
        if (sorted) std::sort(row.begin(), kth, before);
      }
      store(row, k, v, vs, i, is);
    });
  });
}

}  // namespace

RTX_REGISTER_KERNELS(sort_cpu) { RTX_SORT_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
