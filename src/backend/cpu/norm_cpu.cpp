// CPU kernels of the normalization family: layer norm and batch norm, forward and backward.
// Elementwise math runs in the opmath type (float for 16-bit floats); statistics and gradient sums
// accumulate in double, in fixed blocks combined in order, so results never depend on the thread
// count. Batch norm streams through memory in order; its loops and layer norm's are built for AVX2
// or AVX-512 where the CPU has them (vector_isa.h).
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
#include "dispatch/norm.h"

namespace rtx::cpu {
namespace {

using namespace rows;
using detail::opmath_t;

// ---- layer norm ---------------------------------------------------------------------------------

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
  with_affine(w, b, [&](const auto& scale, const auto& shift) {
    parallel_for(m, grain_for(n), [&](int64_t begin, int64_t end) {
      with_vector_isa([&] {
        for (int64_t i = begin; i < end; ++i) {
          const T* xr = xp + i * n;
          const auto [mu, var] =
              shifted_moments(n, [&](int64_t j) { return static_cast<double>(static_cast<acc_t>(xr[j])); });
          const double r = 1.0 / std::sqrt(var + eps);
          mp[i] = static_cast<acc_t>(mu);
          rp[i] = static_cast<acc_t>(r);
          const acc_t mu_a = static_cast<acc_t>(mu), r_a = static_cast<acc_t>(r);
          T* orow = o + i * n;
          for (int64_t j = 0; j < n; ++j)
            orow[j] = static_cast<T>(shift(j, scale(j, (static_cast<acc_t>(xr[j]) - mu_a) * r_a)));
        }
      });
    });
  });
}

// f(scale, shift) with scale(j, v) = v * w[j] and shift(j, v) = v + b[j], or v itself where w or b
// is null: one loop each way, neither loading conditionally, so that both vectorize.
template <typename T, typename F>
void with_affine(const T* w, const T* b, const F& f) {
  using acc_t = opmath_t<T>;
  const auto keep = [](int64_t, acc_t v) { return v; };
  const auto scale = [w](int64_t j, acc_t v) { return v * static_cast<acc_t>(w[j]); };
  const auto shift = [b](int64_t j, acc_t v) { return v + static_cast<acc_t>(b[j]); };
  if (w && b) f(scale, shift);
  else if (w) f(scale, keep);
  else if (b) f(keep, shift);
  else f(keep, keep);
}

// Sums f(row, col) over rows for every column into the defined outputs (a, b), parallel over blocks
// of 64 columns (two for 128, the narrowest common width), every column summed by one thread in row
// order.
template <typename T, typename F>
void column_sums(T* a, T* b, int64_t rows, int64_t cols, const F& f) {
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  parallel_for(blocks, grain_for(rows * kBlock), [&](int64_t begin, int64_t end) {
    with_vector_isa([&] {
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
    with_affine(w, static_cast<const T*>(nullptr), [&](const auto& scale, const auto&) {
      parallel_for(m, grain_for(n), [&](int64_t begin, int64_t end) {
        with_vector_isa([&] {
          for (int64_t i = begin; i < end; ++i) {
            const T* gr = gp + i * n;
            const T* xr = xp + i * n;
            const acc_t mu = mp[i], r = rp[i];
            // grad_x = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)), gxhat = g * weight
            PairSums sums;
            sums.add(n, [&](int64_t j) {
              const acc_t gh = scale(j, static_cast<acc_t>(gr[j]));
              return std::pair<double, double>{gh, gh * (static_cast<acc_t>(xr[j]) - mu) * r};
            });
            const acc_t c1 = static_cast<acc_t>(sums.a() / static_cast<double>(n));
            const acc_t c2 = static_cast<acc_t>(sums.b() / static_cast<double>(n));
            T* gxr = gx + i * n;
            for (int64_t j = 0; j < n; ++j) {
              const acc_t gh = scale(j, static_cast<acc_t>(gr[j]));
              const acc_t xh = (static_cast<acc_t>(xr[j]) - mu) * r;
              gxr[j] = static_cast<T>(r * (gh - c1 - xh * c2));
            }
          }
        });
      });
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

// x as [batch, channels, spatial]: batch * channels runs of spatial contiguous values, run r holding
// channel r % channels.
struct ChannelLayout {
  int64_t batch, channels, spatial;
  explicit ChannelLayout(const Tensor& x)
      : batch(x.size(0)), channels(x.size(1)), spatial(x.numel() == 0 ? 0 : x.numel() / (x.size(0) * x.size(1))) {}
  int64_t count() const { return batch * spatial; }
  int64_t runs() const { return batch * channels; }
};

// Double sums of pairs per channel in one pass over x in memory order. The work splits into tasks of
// a block of samples, a block of channels and a piece of the runs, which run in parallel;
// add(r, k0, k1, sums) adds the pairs of elements [k0, k1) of run r into the PairSums that a task keeps
// for the run's channel, and every channel then adds its tasks' totals in sample and piece order. The
// blocks depend on the shape only, so every sum has the same order for any thread count.
template <typename Add>
std::vector<std::pair<double, double>> channel_pair_sums(const ChannelLayout& l, const Add& add) {
  constexpr int64_t kChannelBlock = 16, kTaskSize = 16384, kPiece = kTaskSize;
  const int64_t pieces = std::max<int64_t>(1, (l.spatial + kPiece - 1) / kPiece);
  const int64_t piece_len = (l.spatial + pieces - 1) / pieces;
  const int64_t sample_block = std::max<int64_t>(1, kTaskSize / std::max<int64_t>(1, piece_len * kChannelBlock));
  const int64_t sample_blocks = (l.batch + sample_block - 1) / sample_block;
  const int64_t channel_blocks = (l.channels + kChannelBlock - 1) / kChannelBlock;
  // partial[(sb * pieces + p) * channels + c]: channel c's sums over sample block sb, piece p.
  std::vector<std::pair<double, double>> partial(static_cast<size_t>(sample_blocks * pieces * l.channels));
  parallel_for(sample_blocks * pieces * channel_blocks, grain_for(sample_block * kChannelBlock * piece_len),
               [&](int64_t begin, int64_t end) {
                 with_vector_isa([&] {
                   std::array<PairSums, kChannelBlock> sums;
                   for (int64_t task = begin; task < end; ++task) {
                     const int64_t slice = task / channel_blocks, c0 = (task % channel_blocks) * kChannelBlock;
                     const int64_t sb = slice / pieces, k0 = (slice % pieces) * piece_len;
                     const int64_t c1 = std::min(l.channels, c0 + kChannelBlock);
                     const int64_t b1 = std::min(l.batch, (sb + 1) * sample_block);
                     const int64_t k1 = std::min(l.spatial, k0 + piece_len);
                     std::fill(sums.begin(), sums.end(), PairSums());
                     for (int64_t b = sb * sample_block; b < b1; ++b)
                       for (int64_t c = c0; c < c1; ++c) add(b * l.channels + c, k0, k1, sums[c - c0]);
                     for (int64_t c = c0; c < c1; ++c)
                       partial[slice * l.channels + c] = {sums[c - c0].a(), sums[c - c0].b()};
                   }
                 });
               });
  std::vector<std::pair<double, double>> totals(static_cast<size_t>(l.channels), {0.0, 0.0});
  for (int64_t slice = 0; slice < sample_blocks * pieces; ++slice)
    for (int64_t c = 0; c < l.channels; ++c) {
      totals[c].first += partial[slice * l.channels + c].first;
      totals[c].second += partial[slice * l.channels + c].second;
    }
  return totals;
}

// f(r, c) for every run r (of channel c) in parallel, in memory order.
template <typename F>
void for_each_run(const ChannelLayout& l, const F& f) {
  parallel_for(l.runs(), grain_for(l.spatial), [&](int64_t begin, int64_t end) {
    with_vector_isa([&] {
      for (int64_t r = begin; r < end; ++r) f(r, r % l.channels);
    });
  });
}

// Biased moments per channel in one pass: sums of d = x - shift and d^2 with the channel's first value
// as its shift (see shifted_moments), accumulated in double.
template <typename T>
void batch_norm_stats_impl(const Tensor& mean, const Tensor& var, const Tensor& x) {
  using acc_t = opmath_t<T>;
  const ChannelLayout l(x);
  const T* xp = x.data_ptr<T>();
  acc_t* mp = mean.data_ptr<acc_t>();
  acc_t* vp = var.data_ptr<acc_t>();
  std::vector<double> shift(static_cast<size_t>(l.channels));
  for (int64_t c = 0; c < l.channels; ++c) shift[c] = static_cast<double>(static_cast<acc_t>(xp[c * l.spatial]));
  const auto sums = channel_pair_sums(l, [&](int64_t r, int64_t k0, int64_t k1, PairSums& s) {
    const T* xr = xp + r * l.spatial + k0;
    const double sh = shift[r % l.channels];
    s.add(k1 - k0, [&](int64_t k) {
      const double d = static_cast<double>(static_cast<acc_t>(xr[k])) - sh;
      return std::pair<double, double>{d, d * d};
    });
  });
  const double n = static_cast<double>(l.count());
  for (int64_t c = 0; c < l.channels; ++c) {
    const double s1 = sums[c].first;
    mp[c] = static_cast<acc_t>(shift[c] + s1 / n);
    vp[c] = static_cast<acc_t>(std::max(0.0, (sums[c].second - s1 * s1 / n) / n));
  }
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
  // out = x * scale + shift.
  for_each_run(l, [&](int64_t r, int64_t c) {
    const acc_t scale = ip[c] * (w ? static_cast<acc_t>(w[c]) : acc_t(1));
    const acc_t shift = (b ? static_cast<acc_t>(b[c]) : acc_t(0)) - mp[c] * scale;
    const T* __restrict xr = xp + r * l.spatial;
    T* __restrict orow = o + r * l.spatial;
    const int64_t n = l.spatial;
    for (int64_t k = 0; k < n; ++k) orow[k] = static_cast<T>(static_cast<acc_t>(xr[k]) * scale + shift);
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
  // Per channel: sum(g) and sum(g * xhat), unless only the evaluation-mode input gradient is wanted.
  std::vector<std::pair<double, double>> sums;
  if (gw || gb || batch_stats)
    sums = channel_pair_sums(l, [&](int64_t r, int64_t k0, int64_t k1, PairSums& s) {
      const int64_t c = r % l.channels;
      const acc_t mu = mp[c], is = ip[c];
      const T* gr = gp + r * l.spatial + k0;
      const T* xr = xp + r * l.spatial + k0;
      s.add(k1 - k0, [&](int64_t k) {
        const acc_t gv = static_cast<acc_t>(gr[k]);
        return std::pair<double, double>{gv, gv * (static_cast<acc_t>(xr[k]) - mu) * is};
      });
    });
  for (int64_t c = 0; c < l.channels; ++c) {
    if (gw) gw[c] = static_cast<T>(sums[c].second);
    if (gb) gb[c] = static_cast<T>(sums[c].first);
  }
  if (!gx) return;
  // grad_x = w * invstd * (g - mean(g) - xhat * mean(g * xhat)) with batch statistics; the running
  // statistics of evaluation mode are constants: grad_x = w * invstd * g.
  const double count = static_cast<double>(l.count());
  for_each_run(l, [&](int64_t r, int64_t c) {
    const acc_t mu = mp[c], is = ip[c];
    const acc_t scale = is * (w ? static_cast<acc_t>(w[c]) : acc_t(1));
    const acc_t c1 = batch_stats ? static_cast<acc_t>(sums[c].first / count) : acc_t(0);
    const acc_t c2 = batch_stats ? static_cast<acc_t>(sums[c].second / count) : acc_t(0);
    const T* __restrict gr = gp + r * l.spatial;
    const T* __restrict xr = xp + r * l.spatial;
    T* __restrict gxr = gx + r * l.spatial;
    const int64_t n = l.spatial;
    for (int64_t k = 0; k < n; ++k) {
      const acc_t xh = (static_cast<acc_t>(xr[k]) - mu) * is;
      gxr[k] = static_cast<T>(scale * (static_cast<acc_t>(gr[k]) - c1 - xh * c2));
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

}  // namespace

RTX_REGISTER_KERNELS(norm_cpu) { RTX_NORM_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
