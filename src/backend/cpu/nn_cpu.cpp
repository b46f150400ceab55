// CPU kernels of the neural-network family: softmax and log_softmax, embedding, one-hot and the
// index check. Elementwise math runs in the opmath type (float for 16-bit floats), the softmax loops
// also built for AVX2 and AVX-512 (vector_isa.h); sums accumulate in double. Results never depend on
// the thread count: reductions combine fixed blocks in order, and accumulations into shared rows
// (the embedding gradient) are partitioned by destination, without atomics.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/nn_rows.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "dispatch/nn.h"

namespace rtx::cpu {
namespace {

using namespace rows;
using detail::opmath_t;

// ---- softmax ------------------------------------------------------------------------------------

template <typename T, bool kLog, typename S>
void softmax_slice(T* out, const T* x, int64_t n, S s) {
  using acc_t = opmath_t<T>;
  if constexpr (kLog) {
    const MaxLogSum<T> ml = slice_max_logsum(x, n, s);
    const acc_t log_sum = static_cast<acc_t>(ml.log_sum);
    for (int64_t j = 0; j < n; ++j) out[j * s] = static_cast<T>((static_cast<acc_t>(x[j * s]) - ml.max) - log_sum);
  } else {
    const acc_t m = slice_max(x, n, s);
    if constexpr (std::is_same_v<T, acc_t>) {
      // Keep the exponentials in the output instead of computing them twice.
      const double sum = lane_sum(n, [&](int64_t j) {
        const acc_t e = fn::exp_of(x[j * s] - m);
        out[j * s] = e;
        return e;
      });
      const acc_t inv = static_cast<acc_t>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) out[j * s] *= inv;
    } else {
      const double sum = lane_sum(n, [&](int64_t j) { return fn::exp_of(static_cast<acc_t>(x[j * s]) - m); });
      const acc_t inv = static_cast<acc_t>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) out[j * s] = static_cast<T>(fn::exp_of(static_cast<acc_t>(x[j * s]) - m) * inv);
    }
  }
}

template <typename T, bool kLog, typename S>
void softmax_backward_slice(T* gx, const T* g, const T* out, int64_t n, S s) {
  using acc_t = opmath_t<T>;
  double dot = 0;
  if constexpr (kLog) {
    for (int64_t j = 0; j < n; ++j) dot += static_cast<acc_t>(g[j * s]);
    const acc_t total = static_cast<acc_t>(dot);
    for (int64_t j = 0; j < n; ++j)
      gx[j * s] = static_cast<T>(static_cast<acc_t>(g[j * s]) - fn::exp_of(static_cast<acc_t>(out[j * s])) * total);
  } else {
    for (int64_t j = 0; j < n; ++j) dot += static_cast<acc_t>(g[j * s]) * static_cast<acc_t>(out[j * s]);
    const acc_t total = static_cast<acc_t>(dot);
    for (int64_t j = 0; j < n; ++j)
      gx[j * s] = static_cast<T>(static_cast<acc_t>(out[j * s]) * (static_cast<acc_t>(g[j * s]) - total));
  }
}

// f(offset, stride) for every slice of an [outer, n, inner] layout along n.
template <typename F>
void for_each_slice(int64_t outer, int64_t n, int64_t inner, const F& f) {
  with_stride(inner, [&](auto s) {
    parallel_for(outer * inner, grain_for(n), [&](int64_t b, int64_t e) {
      with_vector_isa([&] {
        for (int64_t t = b; t < e; ++t) f((t / inner) * n * inner + t % inner, s);
      });
    });
  });
}

void softmax_cpu(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  RTX_DISPATCH_FLOATS(x.dtype(), "softmax", [&] {
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t* xp = x.data_ptr<scalar_t>();
    for_each_slice(outer, n, inner, [&](int64_t off, auto s) {
      if (log)
        softmax_slice<scalar_t, true>(o + off, xp + off, n, s);
      else
        softmax_slice<scalar_t, false>(o + off, xp + off, n, s);
    });
  });
}

void softmax_backward_cpu(const Tensor& grad_x, const Tensor& g, const Tensor& out, int64_t outer, int64_t n,
                          int64_t inner, bool log) {
  RTX_DISPATCH_FLOATS(out.dtype(), "softmax_backward", [&] {
    scalar_t* gx = grad_x.data_ptr<scalar_t>();
    const scalar_t* gp = g.data_ptr<scalar_t>();
    const scalar_t* op = out.data_ptr<scalar_t>();
    for_each_slice(outer, n, inner, [&](int64_t off, auto s) {
      if (log)
        softmax_backward_slice<scalar_t, true>(gx + off, gp + off, op + off, n, s);
      else
        softmax_backward_slice<scalar_t, false>(gx + off, gp + off, op + off, n, s);
    });
  });
}

// ---- embedding, one-hot, index bounds -----------------------------------------------------------

void embedding_cpu(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t k = indices.numel();
  const size_t row_bytes = static_cast<size_t>(weight.size(1)) * weight.element_size();
  const char* w = static_cast<const char*>(weight.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  RTX_DISPATCH_INDEX(indices.dtype(), "embedding", [&] {
    const scalar_t* idx = indices.data_ptr<scalar_t>();
    parallel_for(k, grain_for(weight.size(1)), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(o + i * row_bytes, w + static_cast<int64_t>(idx[i]) * row_bytes, row_bytes);
    });
  });
}

// Rows of g grouped by index with a counting sort (positions in increasing order within a group),
// then every weight row summed by one thread: deterministic, no atomics.
template <typename T, typename I>
void embedding_backward_impl(T* gw, const T* g, const I* idx, int64_t k, int64_t num, int64_t dim,
                             std::optional<int64_t> padding_idx) {
  using acc_t = opmath_t<T>;
  std::vector<int64_t> start(static_cast<size_t>(num) + 1, 0), order(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) ++start[static_cast<int64_t>(idx[i]) + 1];
  for (int64_t v = 0; v < num; ++v) start[v + 1] += start[v];
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < k; ++i) order[next[static_cast<int64_t>(idx[i])]++] = i;
  const int64_t rows_per_index = std::max<int64_t>(1, k / std::max<int64_t>(1, num));
  parallel_for(num, grain_for(dim * rows_per_index), [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(static_cast<size_t>(dim));
    for (int64_t v = begin; v < end; ++v) {
      std::fill(acc.begin(), acc.end(), acc_t(0));
      if (!padding_idx || v != *padding_idx) {
        for (int64_t p = start[v]; p < start[v + 1]; ++p) {
          const T* row = g + order[p] * dim;
          for (int64_t d = 0; d < dim; ++d) acc[d] += static_cast<acc_t>(row[d]);
        }
      }
      T* out = gw + v * dim;
      for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<T>(acc[d]);
    }
  });
}

void embedding_backward_cpu(const Tensor& grad_weight, const Tensor& g, const Tensor& indices,
                            std::optional<int64_t> padding_idx) {
  RTX_DISPATCH_FLOATS(g.dtype(), "embedding_backward", [&] {
    using T = scalar_t;
    RTX_DISPATCH_INDEX(indices.dtype(), "embedding_backward", [&] {
      embedding_backward_impl<T, scalar_t>(grad_weight.data_ptr<T>(), g.data_ptr<T>(), indices.data_ptr<scalar_t>(),
                                           indices.numel(), grad_weight.size(0), grad_weight.size(1), padding_idx);
    });
  });
}

kernels::IndexFault index_check_cpu(const Tensor& indices, const kernels::IndexCheck& check) {
  using kernels::IndexFault;
  IndexFault r;
  RTX_DISPATCH_INDEX(indices.dtype(), "index_check", [&] {
    const scalar_t* p = indices.data_ptr<scalar_t>();
    r = blocked_reduce(
        indices.numel(), kGrainSize, IndexFault{},
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const int64_t v = p[i];
            if ((v < 0 || v >= check.bound) && v != check.skip) return IndexFault{true, check, v};
          }
          return IndexFault{};
        },
        [](const IndexFault& first, const IndexFault& next) { return first.found ? first : next; });
  });
  return r;
}

void one_hot_cpu(const Tensor& out, const Tensor& indices) {
  const int64_t k = indices.numel(), classes = out.numel() / k;
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t* idx = indices.data_ptr<int64_t>();
  parallel_for(k, grain_for(classes), [&](int64_t begin, int64_t end) {
    std::fill(o + begin * classes, o + end * classes, int64_t{0});
    for (int64_t i = begin; i < end; ++i) o[i * classes + idx[i]] = 1;
  });
}

}  // namespace

RTX_REGISTER_KERNELS(nn_cpu) { RTX_NN_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
