// CPU kernels of the neural-network family and the losses: softmax, layer and batch normalization,
// embedding, one-hot, index bounds, cross-entropy and nll. Elementwise math runs in the opmath type
// (float for 16-bit floats); sums over rows, channels and samples accumulate in double. Results never
// depend on the thread count: reductions combine fixed blocks in order, and accumulations into shared
// rows (embedding, weight gradients) are partitioned by destination, without atomics.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/register.h"
#include "core/dtype_dispatch.h"
#include "dispatch/loss.h"
#include "dispatch/nn.h"
#include "dispatch/norm.h"

namespace rtx::cpu {
namespace {

using detail::opmath_t;
using Unit = std::integral_constant<int64_t, 1>;

// Items per parallel task so that one task does about kGrainSize elements of work.
int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work_per_item));
}

// f(begin, end) over fixed blocks of [0, n), combined in block order (the same result for any
// number of threads).
template <typename T, typename F, typename Combine>
T blocked_reduce(int64_t n, int64_t block, T init, const F& f, const Combine& combine) {
  const int64_t blocks = (n + block - 1) / block;
  std::vector<T> partial(static_cast<size_t>(blocks), init);
  parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) partial[i] = f(i * block, std::min(n, (i + 1) * block));
  });
  T r = init;
  for (const T& p : partial) r = combine(r, p);
  return r;
}

// Calls f(stride) with a compile-time 1 when stride is 1, so that unit-stride loops vectorize.
template <typename F>
void with_stride(int64_t stride, const F& f) {
  if (stride == 1)
    f(Unit{});
  else
    f(stride);
}

// Sums of f(k) = (a, b) over k in [0, n) in double, kept in kLanes partial sums per quantity: one
// running sum would make the loop wait on each add, independent lanes let it vectorize. Lanes combine
// in a fixed order, so results depend only on the data.
class PairSums {
 public:
  template <typename F>
  void add(int64_t n, const F& f) {
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) {
        const auto [va, vb] = f(k + l);
        a_[l] += va;
        b_[l] += vb;
      }
    }
    for (int64_t l = 0; k < n; ++k, ++l) {
      const auto [va, vb] = f(k);
      a_[l] += va;
      b_[l] += vb;
    }
  }
  double a() const { return total(a_); }
  double b() const { return total(b_); }

 private:
  static constexpr int64_t kLanes = 16;
  static double total(const std::array<double, kLanes>& v) {
    double t = 0;
    for (double x : v) t += x;
    return t;
  }
  std::array<double, kLanes> a_{}, b_{};
};

// The mean and biased variance of value(k) over k in [0, n) in one pass: sums of d = value - shift and
// d^2 with the first value as the shift, which keeps (sum d)^2 / n from cancelling against sum d^2
// when the mean is large against the spread. Runs add value(k) for k in [0, len) of each run.
struct Moments {
  double mean, var;
};
template <typename Runs>
Moments shifted_moments_of_runs(int64_t count, double shift, const Runs& runs) {
  PairSums sums;
  runs([&](int64_t len, const auto& value) {
    sums.add(len, [&](int64_t k) {
      const double d = value(k) - shift;
      return std::pair<double, double>{d, d * d};
    });
  });
  const double n = static_cast<double>(count), s1 = sums.a();
  return {shift + s1 / n, std::max(0.0, (sums.b() - s1 * s1 / n) / n)};
}
template <typename F>
Moments shifted_moments(int64_t n, const F& value) {
  return shifted_moments_of_runs(n, n > 0 ? value(0) : 0.0, [&](const auto& run) { run(n, value); });
}

template <typename T, typename S>
opmath_t<T> slice_max(const T* x, int64_t n, S s) {
  using acc_t = opmath_t<T>;
  acc_t m = -std::numeric_limits<acc_t>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<acc_t>(x[j * s]));
  return m;
}

// The max of a slice and log(sum(exp(x - max))): their sum is the slice's log-sum-exp, kept apart so
// that x - logsumexp can be formed as (x - max) - log_sum without cancellation.
template <typename T>
struct MaxLogSum {
  opmath_t<T> max;
  double log_sum;
};
template <typename T, typename S>
MaxLogSum<T> slice_max_logsum(const T* x, int64_t n, S s) {
  using acc_t = opmath_t<T>;
  const acc_t m = slice_max(x, n, s);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<acc_t>(x[j * s]) - m);
  return {m, std::log(sum)};
}

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
    double sum = 0;
    if constexpr (std::is_same_v<T, acc_t>) {
      // Keep the exponentials in the output instead of computing them twice.
      for (int64_t j = 0; j < n; ++j) {
        const acc_t e = std::exp(x[j * s] - m);
        out[j * s] = e;
        sum += e;
      }
      const acc_t inv = static_cast<acc_t>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) out[j * s] *= inv;
    } else {
      for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<acc_t>(x[j * s]) - m);
      const acc_t inv = static_cast<acc_t>(1.0 / sum);
      for (int64_t j = 0; j < n; ++j) out[j * s] = static_cast<T>(std::exp(static_cast<acc_t>(x[j * s]) - m) * inv);
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
      gx[j * s] = static_cast<T>(static_cast<acc_t>(g[j * s]) - std::exp(static_cast<acc_t>(out[j * s])) * total);
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
      for (int64_t t = b; t < e; ++t) f((t / inner) * n * inner + t % inner, s);
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

// ---- layer norm ---------------------------------------------------------------------------------

template <typename T>
const T* optional_data(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

template <typename T>
void layer_norm_impl(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, int64_t m, int64_t n, double eps) {
  using acc_t = opmath_t<T>;
  T* o = out.data_ptr<T>();
  acc_t* mp = mean.data_ptr<acc_t>();
  acc_t* rp = rstd.data_ptr<acc_t>();
  const T* xp = x.data_ptr<T>();
  const T* w = optional_data<T>(weight);
  const T* b = optional_data<T>(bias);
  parallel_for(m, grain_for(n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* xr = xp + i * n;
      const auto [mu, var] = shifted_moments(n, [&](int64_t j) { return static_cast<double>(static_cast<acc_t>(xr[j])); });
      const double r = 1.0 / std::sqrt(var + eps);
      mp[i] = static_cast<acc_t>(mu);
      rp[i] = static_cast<acc_t>(r);
      const acc_t mu_a = static_cast<acc_t>(mu), r_a = static_cast<acc_t>(r);
      T* orow = o + i * n;
      for (int64_t j = 0; j < n; ++j) {
        acc_t y = (static_cast<acc_t>(xr[j]) - mu_a) * r_a;
        if (w) y *= static_cast<acc_t>(w[j]);
        if (b) y += static_cast<acc_t>(b[j]);
        orow[j] = static_cast<T>(y);
      }
    }
  });
}

// Sums f(row, col) over rows for every column into the defined outputs (a, b), parallel over column
// blocks so that every column is summed by one thread in row order.
template <typename T, typename F>
void column_sums(T* a, T* b, int64_t rows, int64_t cols, const F& f) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  parallel_for(blocks, grain_for(rows * kBlock), [&](int64_t begin, int64_t end) {
    std::array<double, kBlock> sa, sb;
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t j0 = blk * kBlock, len = std::min(kBlock, cols - j0);
      std::fill(sa.begin(), sa.end(), 0.0);
      std::fill(sb.begin(), sb.end(), 0.0);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < len; ++j) {
          const auto [va, vb] = f(i, j0 + j);
          sa[j] += va;
          sb[j] += vb;
        }
      }
      for (int64_t j = 0; j < len; ++j) {
        if (a) a[j0 + j] = static_cast<T>(sa[j]);
        if (b) b[j0 + j] = static_cast<T>(sb[j]);
      }
    }
  });
}

template <typename T>
void layer_norm_backward_impl(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                              const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t m,
                              int64_t n) {
  using acc_t = opmath_t<T>;
  const T* gp = g.data_ptr<T>();
  const T* xp = x.data_ptr<T>();
  const acc_t* mp = mean.data_ptr<acc_t>();
  const acc_t* rp = rstd.data_ptr<acc_t>();
  const T* w = optional_data<T>(weight);
  if (grad_x.defined()) {
    T* gx = grad_x.data_ptr<T>();
    parallel_for(m, grain_for(n), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* gr = gp + i * n;
        const T* xr = xp + i * n;
        const acc_t mu = mp[i], r = rp[i];
        // grad_x = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)), gxhat = g * weight
        PairSums sums;
        sums.add(n, [&](int64_t j) {
          const acc_t gh = static_cast<acc_t>(gr[j]) * (w ? static_cast<acc_t>(w[j]) : acc_t(1));
          return std::pair<double, double>{gh, gh * (static_cast<acc_t>(xr[j]) - mu) * r};
        });
        const acc_t c1 = static_cast<acc_t>(sums.a() / static_cast<double>(n));
        const acc_t c2 = static_cast<acc_t>(sums.b() / static_cast<double>(n));
        T* gxr = gx + i * n;
        for (int64_t j = 0; j < n; ++j) {
          const acc_t gh = static_cast<acc_t>(gr[j]) * (w ? static_cast<acc_t>(w[j]) : acc_t(1));
          const acc_t xh = (static_cast<acc_t>(xr[j]) - mu) * r;
          gxr[j] = static_cast<T>(r * (gh - c1 - xh * c2));
        }
      }
    });
  }
  if (grad_weight.defined() || grad_bias.defined()) {
    T* gw = grad_weight.defined() ? grad_weight.data_ptr<T>() : nullptr;
    T* gb = grad_bias.defined() ? grad_bias.data_ptr<T>() : nullptr;
    column_sums(gw, gb, m, n, [&](int64_t i, int64_t j) {
      const acc_t gv = static_cast<acc_t>(gp[i * n + j]);
      return std::pair<double, double>{gv * (static_cast<acc_t>(xp[i * n + j]) - mp[i]) * rp[i], gv};
    });
  }
}

void layer_norm_cpu(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                    const Tensor& bias, int64_t m, int64_t n, double eps) {
  RTX_DISPATCH_FLOATS(x.dtype(), "layer_norm",
                      [&] { layer_norm_impl<scalar_t>(out, mean, rstd, x, weight, bias, m, n, eps); });
}

void layer_norm_backward_cpu(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                             const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t m,
                             int64_t n) {
  RTX_DISPATCH_FLOATS(x.dtype(), "layer_norm_backward", [&] {
    layer_norm_backward_impl<scalar_t>(grad_x, grad_weight, grad_bias, g, x, mean, rstd, weight, m, n);
  });
}

// ---- batch norm ---------------------------------------------------------------------------------

// x as [batch, channels, spatial].
struct ChannelLayout {
  int64_t batch, channels, spatial;
  explicit ChannelLayout(const Tensor& x)
      : batch(x.size(0)), channels(x.size(1)), spatial(x.numel() == 0 ? 0 : x.numel() / (x.size(0) * x.size(1))) {}
  int64_t count() const { return batch * spatial; }
  // f(offset) for the start of every contiguous run of channel c.
  template <typename F>
  void for_runs(int64_t c, const F& f) const {
    for (int64_t b = 0; b < batch; ++b) f((b * channels + c) * spatial);
  }
};

template <typename T>
void batch_norm_stats_impl(const Tensor& mean, const Tensor& var, const Tensor& x) {
  using acc_t = opmath_t<T>;
  const ChannelLayout l(x);
  const T* xp = x.data_ptr<T>();
  acc_t* mp = mean.data_ptr<acc_t>();
  acc_t* vp = var.data_ptr<acc_t>();
  parallel_for(l.channels, grain_for(l.count()), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const double shift = l.count() > 0 ? static_cast<double>(static_cast<acc_t>(xp[c * l.spatial])) : 0.0;
      const Moments m = shifted_moments_of_runs(l.count(), shift, [&](const auto& run) {
        l.for_runs(c, [&](int64_t off) {
          run(l.spatial, [&](int64_t k) { return static_cast<double>(static_cast<acc_t>(xp[off + k])); });
        });
      });
      mp[c] = static_cast<acc_t>(m.mean);
      vp[c] = static_cast<acc_t>(m.var);
    }
  });
}

template <typename T>
void batch_norm_apply_impl(const Tensor& out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& bias) {
  using acc_t = opmath_t<T>;
  const ChannelLayout l(x);
  const T* xp = x.data_ptr<T>();
  T* o = out.data_ptr<T>();
  const acc_t* mp = mean.data_ptr<acc_t>();
  const acc_t* ip = invstd.data_ptr<acc_t>();
  const T* w = optional_data<T>(weight);
  const T* b = optional_data<T>(bias);
  // One task per (batch, channel) run: out = x * scale + shift.
  parallel_for(l.batch * l.channels, grain_for(l.spatial), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r % l.channels;
      const acc_t scale = ip[c] * (w ? static_cast<acc_t>(w[c]) : acc_t(1));
      const acc_t shift = (b ? static_cast<acc_t>(b[c]) : acc_t(0)) - mp[c] * scale;
      const T* xr = xp + r * l.spatial;
      T* orow = o + r * l.spatial;
      for (int64_t k = 0; k < l.spatial; ++k) orow[k] = static_cast<T>(static_cast<acc_t>(xr[k]) * scale + shift);
    }
  });
}

template <typename T>
void batch_norm_backward_impl(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                              const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                              bool batch_stats) {
  using acc_t = opmath_t<T>;
  const ChannelLayout l(x);
  const T* gp = g.data_ptr<T>();
  const T* xp = x.data_ptr<T>();
  const acc_t* mp = mean.data_ptr<acc_t>();
  const acc_t* ip = invstd.data_ptr<acc_t>();
  const T* w = optional_data<T>(weight);
  T* gx = grad_x.defined() ? grad_x.data_ptr<T>() : nullptr;
  T* gw = grad_weight.defined() ? grad_weight.data_ptr<T>() : nullptr;
  T* gb = grad_bias.defined() ? grad_bias.data_ptr<T>() : nullptr;
  parallel_for(l.channels, grain_for(l.count()), [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const acc_t mu = mp[c], is = ip[c];
      PairSums sums;
      l.for_runs(c, [&](int64_t off) {
        sums.add(l.spatial, [&](int64_t k) {
          const acc_t gv = static_cast<acc_t>(gp[off + k]);
          return std::pair<double, double>{gv, gv * (static_cast<acc_t>(xp[off + k]) - mu) * is};
        });
      });
      const double sum_g = sums.a(), sum_gxhat = sums.b();
      if (gw) gw[c] = static_cast<T>(sum_gxhat);
      if (gb) gb[c] = static_cast<T>(sum_g);
      if (!gx) continue;
      // grad_x = w * invstd * (g - mean(g) - xhat * mean(g * xhat)) with batch statistics; the
      // running statistics of evaluation mode are constants: grad_x = w * invstd * g.
      const acc_t scale = is * (w ? static_cast<acc_t>(w[c]) : acc_t(1));
      const double count = static_cast<double>(l.count());
      const acc_t c1 = batch_stats ? static_cast<acc_t>(sum_g / count) : acc_t(0);
      const acc_t c2 = batch_stats ? static_cast<acc_t>(sum_gxhat / count) : acc_t(0);
      l.for_runs(c, [&](int64_t off) {
        for (int64_t k = 0; k < l.spatial; ++k) {
          const acc_t xh = (static_cast<acc_t>(xp[off + k]) - mu) * is;
          gx[off + k] = static_cast<T>(scale * (static_cast<acc_t>(gp[off + k]) - c1 - xh * c2));
        }
      });
    }
  });
}

void batch_norm_stats_cpu(const Tensor& mean, const Tensor& var, const Tensor& x) {
  RTX_DISPATCH_FLOATS(x.dtype(), "batch_norm", [&] { batch_norm_stats_impl<scalar_t>(mean, var, x); });
}

void batch_norm_apply_cpu(const Tensor& out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                          const Tensor& weight, const Tensor& bias) {
  RTX_DISPATCH_FLOATS(x.dtype(), "batch_norm",
                      [&] { batch_norm_apply_impl<scalar_t>(out, x, mean, invstd, weight, bias); });
}

void batch_norm_backward_cpu(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                             const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                             bool batch_stats) {
  RTX_DISPATCH_FLOATS(x.dtype(), "batch_norm_backward", [&] {
    batch_norm_backward_impl<scalar_t>(grad_x, grad_weight, grad_bias, g, x, mean, invstd, weight, batch_stats);
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

kernels::IndexBounds index_bounds_cpu(const Tensor& indices, std::optional<int64_t> skip) {
  using kernels::IndexBounds;
  IndexBounds r;
  RTX_DISPATCH_INDEX(indices.dtype(), "index_bounds", [&] {
    const scalar_t* p = indices.data_ptr<scalar_t>();
    auto merge = [](IndexBounds a, IndexBounds b) {
      if (!a.found) return b;
      if (!b.found) return a;
      return IndexBounds{std::min(a.min, b.min), std::max(a.max, b.max), true};
    };
    r = blocked_reduce(
        indices.numel(), kGrainSize, IndexBounds{},
        [&](int64_t begin, int64_t end) {
          IndexBounds part;
          for (int64_t i = begin; i < end; ++i) {
            const int64_t v = p[i];
            if (skip && v == *skip) continue;
            part = merge(part, IndexBounds{v, v, true});
          }
          return part;
        },
        merge);
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

// ---- class-index losses -------------------------------------------------------------------------

// The [n, classes, inner] / [n, inner] geometry of a class-index loss.
struct ClassGeometry {
  int64_t n, classes, inner;
  explicit ClassGeometry(const Tensor& input3) : n(input3.size(0)), classes(input3.size(1)), inner(input3.size(2)) {}
  int64_t samples() const { return n * inner; }
  // Offset of (sample, class 0) in [n, classes, inner]; classes are inner apart.
  int64_t row(int64_t sample) const { return (sample / inner) * classes * inner + sample % inner; }
};

// Runs loss_of(sample, target, weight) -> loss for every sample whose target is not ignored, writes
// per-sample losses (Reduction::None) or their sum or weighted mean to out, and the total weight.
template <typename T, typename F>
void class_loss_forward(const Tensor& out, const Tensor& total_weight, const ClassGeometry& geo, const Tensor& target,
                        const Tensor& weight, int64_t ignore_index, Reduction reduction, const F& loss_of) {
  using acc_t = opmath_t<T>;
  const int64_t* t = target.data_ptr<int64_t>();
  const T* w = optional_data<T>(weight);
  T* o = out.data_ptr<T>();
  const bool none = reduction == Reduction::None;
  using Sums = std::array<double, 2>;  // loss, weight
  const Sums sums = blocked_reduce(
      geo.samples(), grain_for(geo.classes), Sums{0, 0},
      [&](int64_t begin, int64_t end) {
        Sums part{0, 0};
        for (int64_t i = begin; i < end; ++i) {
          double loss = 0;
          if (t[i] != ignore_index) {
            const double wt = w ? static_cast<double>(static_cast<acc_t>(w[t[i]])) : 1.0;
            loss = loss_of(i, t[i], wt);
            part[0] += loss;
            part[1] += wt;
          }
          if (none) o[i] = static_cast<T>(loss);
        }
        return part;
      },
      [](Sums a, Sums b) {
        return Sums{a[0] + b[0], a[1] + b[1]};
      });
  *total_weight.data_ptr<acc_t>() = static_cast<acc_t>(sums[1]);
  if (reduction == Reduction::Mean) *o = static_cast<T>(sums[0] / sums[1]);
  if (reduction == Reduction::Sum) *o = static_cast<T>(sums[0]);
}

// Runs grad_of(sample, target, weight, scale) for every sample, scale being what the sample's loss
// is multiplied by (the upstream gradient, over the total weight for Reduction::Mean) and weight
// zero for ignored targets.
template <typename T, typename F>
void class_loss_backward(const Tensor& g, const Tensor& total_weight, const ClassGeometry& geo, const Tensor& target,
                         const Tensor& weight, int64_t ignore_index, Reduction reduction, const F& grad_of) {
  using acc_t = opmath_t<T>;
  const int64_t* t = target.data_ptr<int64_t>();
  const T* w = optional_data<T>(weight);
  const T* gp = g.data_ptr<T>();
  const acc_t total = *total_weight.data_ptr<acc_t>();
  const acc_t reduced_scale = reduction == Reduction::Mean ? static_cast<acc_t>(*gp) / total : static_cast<acc_t>(*gp);
  parallel_for(geo.samples(), grain_for(geo.classes), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const bool ignored = t[i] == ignore_index;
      const acc_t wt = ignored ? acc_t(0) : w ? static_cast<acc_t>(w[t[i]]) : acc_t(1);
      const acc_t scale = reduction == Reduction::None ? static_cast<acc_t>(gp[i]) : reduced_scale;
      grad_of(i, ignored ? int64_t{-1} : t[i], wt, scale);
    }
  });
}

// Sum of the class weights (the number of classes without weights).
template <typename T>
double weight_sum(const T* w, int64_t classes) {
  double s = 0;
  for (int64_t c = 0; c < classes; ++c) s += w ? static_cast<double>(static_cast<opmath_t<T>>(w[c])) : 1.0;
  return s;
}

template <typename T>
void cross_entropy_impl(const Tensor& out, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                        const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction,
                        double smoothing) {
  using acc_t = opmath_t<T>;
  const ClassGeometry geo(logits);
  const T* x = logits.data_ptr<T>();
  const T* w = optional_data<T>(weight);
  acc_t* lp = lse.data_ptr<acc_t>();
  const double smooth_scale = smoothing / static_cast<double>(geo.classes);
  const double wsum = weight_sum(w, geo.classes);
  with_stride(geo.inner, [&](auto s) {
    class_loss_forward<T>(
        out, total_weight, geo, target, weight, ignore_index, reduction, [&](int64_t i, int64_t t, double wt) {
          const T* row = x + geo.row(i);
          const MaxLogSum<T> ml = slice_max_logsum(row, geo.classes, s);
          const double l = static_cast<double>(ml.max) + ml.log_sum;
          lp[i] = static_cast<acc_t>(l);
          double loss = wt * ((ml.max - static_cast<acc_t>(row[t * s])) + ml.log_sum);
          if (smoothing > 0.0) {
            // sum_c w_c * (lse - x_c) = sum_c w_c * (max - x_c) + log_sum * sum_c w_c
            double smooth = ml.log_sum * wsum;
            for (int64_t c = 0; c < geo.classes; ++c)
              smooth += (w ? static_cast<acc_t>(w[c]) : acc_t(1)) * (ml.max - static_cast<acc_t>(row[c * s]));
            loss = (1.0 - smoothing) * loss + smooth_scale * smooth;
          }
          return loss;
        });
  });
}

template <typename T>
void cross_entropy_backward_impl(const Tensor& grad_logits, const Tensor& g, const Tensor& logits, const Tensor& lse,
                                 const Tensor& target, const Tensor& weight, const Tensor& total_weight,
                                 int64_t ignore_index, Reduction reduction, double smoothing) {
  using acc_t = opmath_t<T>;
  const ClassGeometry geo(logits);
  const T* x = logits.data_ptr<T>();
  T* gx = grad_logits.data_ptr<T>();
  const T* w = optional_data<T>(weight);
  const acc_t* lp = lse.data_ptr<acc_t>();
  const acc_t smooth_scale = static_cast<acc_t>(smoothing / static_cast<double>(geo.classes));
  const acc_t keep = static_cast<acc_t>(1.0 - smoothing);
  const acc_t wsum = static_cast<acc_t>(weight_sum(w, geo.classes));
  with_stride(geo.inner, [&](auto s) {
    class_loss_backward<T>(g, total_weight, geo, target, weight, ignore_index, reduction,
                           [&](int64_t i, int64_t t, acc_t wt, acc_t scale) {
                             T* grow = gx + geo.row(i);
                             if (t < 0) {
                               for (int64_t c = 0; c < geo.classes; ++c) grow[c * s] = T(0);
                               return;
                             }
                             // scale * (A * softmax - B): A = sum_c B_c, B = keep * w_t * onehot + smooth * w
                             const T* row = x + geo.row(i);
                             const acc_t l = lp[i];
                             const acc_t a = keep * wt + smooth_scale * wsum;
                             for (int64_t c = 0; c < geo.classes; ++c) {
                               const acc_t wc = w ? static_cast<acc_t>(w[c]) : acc_t(1);
                               const acc_t b = (c == t ? keep * wt : acc_t(0)) + smooth_scale * wc;
                               grow[c * s] =
                                   static_cast<T>(scale * (a * std::exp(static_cast<acc_t>(row[c * s]) - l) - b));
                             }
                           });
  });
}

template <typename T>
void nll_loss_impl(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs, const Tensor& target,
                   const Tensor& weight, int64_t ignore_index, Reduction reduction) {
  const ClassGeometry geo(log_probs);
  const T* x = log_probs.data_ptr<T>();
  class_loss_forward<T>(
      out, total_weight, geo, target, weight, ignore_index, reduction,
      [&](int64_t i, int64_t t, double wt) { return -wt * static_cast<opmath_t<T>>(x[geo.row(i) + t * geo.inner]); });
}

template <typename T>
void nll_loss_backward_impl(const Tensor& grad, const Tensor& g, const Tensor& target, const Tensor& weight,
                            const Tensor& total_weight, int64_t ignore_index, Reduction reduction) {
  using acc_t = opmath_t<T>;
  const ClassGeometry geo(grad);
  T* gx = grad.data_ptr<T>();
  parallel_for(grad.numel(), kGrainSize, [&](int64_t begin, int64_t end) { std::fill(gx + begin, gx + end, T(0)); });
  class_loss_backward<T>(g, total_weight, geo, target, weight, ignore_index, reduction,
                         [&](int64_t i, int64_t t, acc_t wt, acc_t scale) {
                           if (t >= 0) gx[geo.row(i) + t * geo.inner] = static_cast<T>(-wt * scale);
                         });
}

void cross_entropy_cpu(const Tensor& out, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                       const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction,
                       double smoothing) {
  RTX_DISPATCH_FLOATS(logits.dtype(), "cross_entropy", [&] {
    cross_entropy_impl<scalar_t>(out, lse, total_weight, logits, target, weight, ignore_index, reduction, smoothing);
  });
}

void cross_entropy_backward_cpu(const Tensor& grad_logits, const Tensor& g, const Tensor& logits, const Tensor& lse,
                                const Tensor& target, const Tensor& weight, const Tensor& total_weight,
                                int64_t ignore_index, Reduction reduction, double smoothing) {
  RTX_DISPATCH_FLOATS(logits.dtype(), "cross_entropy_backward", [&] {
    cross_entropy_backward_impl<scalar_t>(grad_logits, g, logits, lse, target, weight, total_weight, ignore_index,
                                          reduction, smoothing);
  });
}

void nll_loss_cpu(const Tensor& out, const Tensor& total_weight, const Tensor& log_probs, const Tensor& target,
                  const Tensor& weight, int64_t ignore_index, Reduction reduction) {
  RTX_DISPATCH_FLOATS(log_probs.dtype(), "nll_loss", [&] {
    nll_loss_impl<scalar_t>(out, total_weight, log_probs, target, weight, ignore_index, reduction);
  });
}

void nll_loss_backward_cpu(const Tensor& grad, const Tensor& g, const Tensor& target, const Tensor& weight,
                           const Tensor& total_weight, int64_t ignore_index, Reduction reduction) {
  RTX_DISPATCH_FLOATS(grad.dtype(), "nll_loss_backward", [&] {
    nll_loss_backward_impl<scalar_t>(grad, g, target, weight, total_weight, ignore_index, reduction);
  });
}

}  // namespace

void register_nn_kernels() {
  using namespace kernels;
  softmax_kernel.set(kCPU, softmax_cpu);
  softmax_backward_kernel.set(kCPU, softmax_backward_cpu);
  layer_norm_kernel.set(kCPU, layer_norm_cpu);
  layer_norm_backward_kernel.set(kCPU, layer_norm_backward_cpu);
  batch_norm_stats_kernel.set(kCPU, batch_norm_stats_cpu);
  batch_norm_apply_kernel.set(kCPU, batch_norm_apply_cpu);
  batch_norm_backward_kernel.set(kCPU, batch_norm_backward_cpu);
  embedding_kernel.set(kCPU, embedding_cpu);
  embedding_backward_kernel.set(kCPU, embedding_backward_cpu);
  index_bounds_kernel.set(kCPU, index_bounds_cpu);
  one_hot_kernel.set(kCPU, one_hot_cpu);
  cross_entropy_kernel.set(kCPU, cross_entropy_cpu);
  cross_entropy_backward_kernel.set(kCPU, cross_entropy_backward_cpu);
  nll_loss_kernel.set(kCPU, nll_loss_cpu);
  nll_loss_backward_kernel.set(kCPU, nll_loss_backward_cpu);
}

}  // namespace rtx::cpu
