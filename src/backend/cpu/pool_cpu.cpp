// CPU pooling kernels: direct loops over the output windows, parallel over the N * C planes (every
// backward writes only into its own plane), with a vectorized path (built for AVX2 or AVX-512 where
// the CPU has them) for max pooling's most common case, 2x2 windows at stride 2. Sums, divisions and
// comparisons run in opmath (float for the 16-bit floats); max pooling propagates NaN like PyTorch.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "dispatch/pool.h"
#include "kernels/common/pointwise_functors.h"

namespace rtx::cpu {
namespace {

using fn::select;  // take ? a : b through bit masks (a ?: on data-dependent conditions branches)
using kernels::Pool2dParams;

// Plane count and input/output plane sizes of [N, C, H, W] -> [N, C, OH, OW].
struct Planes {
  int64_t count, h, w, oh, ow;
  int64_t in_size() const { return h * w; }
  int64_t out_size() const { return oh * ow; }
};

Planes planes_of(const Tensor& in, const Tensor& out) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), out.size(2), out.size(3)};
}

// Runs f(plane) for every plane in parallel; work: element visits per plane.
template <typename F>
void for_each_plane(int64_t planes, int64_t work, const F& f) {
  parallel_for(planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// t's first element, typed.
template <typename T>
T* data(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// ---- max ----------------------------------------------------------------------------------------

// Window rows (or columns) [lo, hi) by step dilation of output position o, clipped to the input.
struct Span {
  int64_t lo, hi, step;
};
Span max_span(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dilation, int64_t in) {
  int64_t lo = o * stride - pad;
  const int64_t hi = std::min(lo + (k - 1) * dilation + 1, in);
  while (lo < 0) lo += dilation;
  return {lo, hi, dilation};
}

// Folds input columns ow * stride + off of one input row, whose first element is at flat plane
// offset base, into the running maxima (values bv, positions bi) of output columns [lo, hi). A
// compile-time stride lets the compiler vectorize the strided loads; the positions count in Pos
// (vector lanes of the values' width when Pos is 32-bit).
template <typename T, typename Acc, typename Pos, typename Stride>
void fold_column(const T* __restrict row, Acc* __restrict bv, Pos* __restrict bi, int64_t lo, int64_t hi, int64_t off,
                 int64_t base, Stride stride) {
  constexpr bool kFloat = !std::is_integral_v<Acc>;
  Pos pos = static_cast<Pos>(base + lo * stride + off);
  for (int64_t ow = lo; ow < hi; ++ow, pos = static_cast<Pos>(pos + stride)) {
    const Acc v = static_cast<Acc>(row[ow * stride + off]);
    const bool take = (v > bv[ow]) | (kFloat && v != v);
    bv[ow] = select(take, v, bv[ow]);
    bi[ow] = select(take, pos, bi[ow]);
  }
}

// Calls f(stride) with a compile-time stride for the common strides 1 and 2.
template <typename F>
void with_stride(int64_t stride, const F& f) {
  if (stride == 1)
    f(std::integral_constant<int64_t, 1>{});
  else if (stride == 2)
    f(std::integral_constant<int64_t, 2>{});
  else
    f(stride);
}

// out, indices = the max of every window and where it is, Pos holding positions within a plane. A
// plane's outputs keep running maxima in a buffer and take each window's offsets one after another,
// each as one pass over an output row written without data-dependent branches (on random data a
// compare-and-branch per element mispredicts half the time). The offsets go in the window's
// row-major order, so ties keep the first position and a NaN the last one, as a scan of each window
// would.
template <typename T, typename Pos>
void max_pool_planes(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  using Acc = detail::opmath_t<T>;
  constexpr bool kFloat = !std::is_integral_v<Acc>;
  const Acc lowest = kFloat ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::lowest();
  const Planes g = planes_of(x, out);
  const T* in = data<const T>(x);
  T* o = data<T>(out);
  int64_t* idx = data<int64_t>(indices);
  // Per output column, the first input column its window reads (-1: none); per window column j, the
  // output columns [lo, hi) whose column j lies inside the input.
  std::vector<int64_t> first_w(static_cast<size_t>(g.ow));
  for (int64_t ow = 0; ow < g.ow; ++ow) {
    const Span ws = max_span(ow, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], g.w);
    first_w[ow] = ws.lo < ws.hi ? ws.lo : -1;
  }
  std::vector<std::pair<int64_t, int64_t>> cols(static_cast<size_t>(p.kernel[1]));
  for (int64_t j = 0; j < p.kernel[1]; ++j) {
    const int64_t off = j * p.dilation[1] - p.padding[1];
    const int64_t lo = off >= 0 ? 0 : (-off + p.stride[1] - 1) / p.stride[1];
    const int64_t hi = off >= g.w ? 0 : std::min(g.ow, (g.w - 1 - off) / p.stride[1] + 1);
    cols[j] = {std::min(lo, hi), hi};
  }
  const int64_t w = g.w, ow_count = g.ow, in_size = g.in_size(), out_size = g.out_size();
  const int64_t work = out_size * p.kernel[0] * p.kernel[1];
  with_stride(p.stride[1], [&](auto sw) {
    parallel_for(g.count, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work)), [&](int64_t b, int64_t e) {
      std::vector<Acc> best_value(static_cast<size_t>(out_size));
      std::vector<Pos> best(static_cast<size_t>(out_size));
      for (int64_t plane = b; plane < e; ++plane) {
        const T* ip = in + plane * in_size;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const Span hs = max_span(oh, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], g.h);
          Acc* bv = best_value.data() + oh * ow_count;
          Pos* bi = best.data() + oh * ow_count;
          for (int64_t ow = 0; ow < ow_count; ++ow) {
            bv[ow] = lowest;
            bi[ow] = static_cast<Pos>(hs.lo < hs.hi && first_w[ow] >= 0 ? hs.lo * w + first_w[ow] : -1);
          }
          for (int64_t ih = hs.lo; ih < hs.hi; ih += hs.step)
            for (int64_t j = 0; j < p.kernel[1]; ++j)
              fold_column(ip + ih * w, bv, bi, cols[j].first, cols[j].second, j * p.dilation[1] - p.padding[1], ih * w,
                          sw);
        }
        T* op = o + plane * out_size;
        int64_t* xp = idx + plane * out_size;
        const Acc* bv = best_value.data();
        const Pos* bi = best.data();
        const int64_t n = out_size;  // a local: the int64 stores below cannot change it, so the loop vectorizes
        for (int64_t i = 0; i < n; ++i) {
          op[i] = static_cast<T>(bv[i]);
          xp[i] = bi[i];
        }
      }
    });
  });
}

// Whether every window is 2x2, at stride 2 and inside the input (no padding or dilation reaches
// past it): each output then reads two adjacent elements of two adjacent input rows.
bool is_inner_2x2(const Pool2dParams& p, const Tensor& x, const Tensor& out) {
  for (int d = 0; d < 2; ++d)
    if (p.kernel[d] != 2 || p.stride[d] != 2 || p.padding[d] != 0 || p.dilation[d] != 1 ||
        2 * out.size(2 + d) > x.size(2 + d))
      return false;
  return true;
}

// Folds candidate v at offset `at` into a window's running max (value best, offset pos): a greater
// value or a NaN takes over, so ties keep the earlier offset and a NaN the last one.
template <typename Acc>
inline __attribute__((always_inline)) void fold_candidate(Acc v, int32_t at, Acc& best, int32_t& pos) {
  constexpr bool kFloat = !std::is_integral_v<Acc>;
  const bool take = (v > best) | (kFloat && v != v);
  best = select(take, v, best);
  pos = select(take, at, pos);
}

// Output ow of one output row of max_pool_2x2.
template <typename T>
inline __attribute__((always_inline)) void max_2x2_output(const T* __restrict top, const T* __restrict bottom,
                                                          T* __restrict orow, int64_t* __restrict irow, int64_t ow,
                                                          int32_t below, int32_t row_start) {
  using Acc = detail::opmath_t<T>;
  Acc best = static_cast<Acc>(top[2 * ow]);
  int32_t pos = 0;
  fold_candidate(static_cast<Acc>(top[2 * ow + 1]), 1, best, pos);
  fold_candidate(static_cast<Acc>(bottom[2 * ow]), below, best, pos);
  fold_candidate(static_cast<Acc>(bottom[2 * ow + 1]), below + 1, best, pos);
  orow[ow] = static_cast<T>(best);
  irow[ow] = row_start + 2 * static_cast<int32_t>(ow) + pos;
}

// One plane of max_pool_2x2. Rows of 8 outputs or more go in blocks of 8, rows of 4 to 7 in two
// blocks of 4 (loops of a fixed length, which become vector instructions), a row's last block moved
// back to end with the row: it recomputes a few outputs, the same values, instead of leaving a tail
// of scalar steps (the CNN's rows are 14 and 7 outputs long).
template <typename T>
inline __attribute__((always_inline)) void max_pool_2x2_plane(const T* in, T* out, int64_t* idx, int64_t w,
                                                              int64_t oh_count, int64_t ow_count) {
  constexpr int64_t kBlock = 8;
  const int32_t below = static_cast<int32_t>(w);  // from a row to the one below it
  for (int64_t oh = 0; oh < oh_count; ++oh) {
    const T* top = in + 2 * oh * w;
    const T* bottom = top + w;
    T* orow = out + oh * ow_count;
    int64_t* irow = idx + oh * ow_count;
    const int32_t row_start = static_cast<int32_t>(2 * oh * w);
    if (ow_count >= kBlock) {
      for (int64_t b = 0; b < ow_count; b += kBlock) {
        const int64_t start = std::min(b, ow_count - kBlock);
#pragma omp simd
        for (int64_t l = 0; l < kBlock; ++l) max_2x2_output(top, bottom, orow, irow, start + l, below, row_start);
      }
    } else if (ow_count >= kBlock / 2) {
      for (const int64_t start : {int64_t{0}, ow_count - kBlock / 2}) {
#pragma omp simd simdlen(4)
        for (int64_t l = 0; l < kBlock / 2; ++l) max_2x2_output(top, bottom, orow, irow, start + l, below, row_start);
      }
    } else {
      for (int64_t ow = 0; ow < ow_count; ++ow) max_2x2_output(top, bottom, orow, irow, ow, below, row_start);
    }
  }
}

// max pooling of 2x2 windows at stride 2 inside the input: one branch-free pass over each output row,
// its four candidates read in the window's row-major order (planes under 2^31 elements).
template <typename T>
void max_pool_2x2(const Tensor& out, const Tensor& indices, const Tensor& x) {
  const Planes g = planes_of(x, out);
  const T* in = data<const T>(x);
  T* o = data<T>(out);
  int64_t* idx = data<int64_t>(indices);
  parallel_for(g.count, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, 4 * g.out_size())),
               [&](int64_t b, int64_t e) {
                 with_vector_isa([&] {
                   for (int64_t plane = b; plane < e; ++plane)
                     max_pool_2x2_plane(in + plane * g.in_size(), o + plane * g.out_size(), idx + plane * g.out_size(),
                                        g.w, g.oh, g.ow);
                 });
               });
}

// Positions within a plane are kept in 32 bits when a plane is small enough: half the index work.
template <typename T>
void max_pool(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  const bool small_planes = x.size(2) * x.size(3) <= std::numeric_limits<int32_t>::max();
  if (small_planes && is_inner_2x2(p, x, out))
    max_pool_2x2<T>(out, indices, x);
  else if (small_planes)
    max_pool_planes<T, int32_t>(out, indices, x, p);
  else
    max_pool_planes<T, int64_t>(out, indices, x, p);
}

// grad_x = grad_out summed into the max positions.
template <typename T>
void max_pool_backward(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices) {
  using Acc = detail::opmath_t<T>;
  const Planes g = planes_of(grad_x, grad_out);
  T* gx = data<T>(grad_x);
  const T* go = data<const T>(grad_out);
  const int64_t* idx = data<const int64_t>(indices);
  for_each_plane(g.count, g.in_size() + g.out_size(), [&](int64_t plane) {
    T* gp = gx + plane * g.in_size();
    const T* op = go + plane * g.out_size();
    const int64_t* xp = idx + plane * g.out_size();
    std::fill(gp, gp + g.in_size(), T(0));
    for (int64_t i = 0; i < g.out_size(); ++i) {
      if (xp[i] < 0) continue;  // an empty window
      gp[xp[i]] = static_cast<T>(static_cast<Acc>(gp[xp[i]]) + static_cast<Acc>(op[i]));
    }
  });
}

// ---- average ------------------------------------------------------------------------------------

// The input rectangle of one average window (clipped to the input) and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
  bool empty() const { return h0 >= h1 || w0 >= w1; }
};

AvgWindow avg_window(int64_t oh, int64_t ow, const Planes& g, const Pool2dParams& p) {
  AvgWindow win;
  win.h0 = oh * p.stride[0] - p.padding[0];
  win.w0 = ow * p.stride[1] - p.padding[1];
  win.h1 = std::min(win.h0 + p.kernel[0], g.h + p.padding[0]);
  win.w1 = std::min(win.w0 + p.kernel[1], g.w + p.padding[1]);
  const int64_t padded_size = (win.h1 - win.h0) * (win.w1 - win.w0);
  win.h0 = std::max<int64_t>(win.h0, 0);
  win.w0 = std::max<int64_t>(win.w0, 0);
  win.h1 = std::min(win.h1, g.h);
  win.w1 = std::min(win.w1, g.w);
  win.divisor = p.count_include_pad ? padded_size : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

// The adaptive window of output o of n over an input of size in: [floor(o * in / n), ceil((o + 1) * in / n)).
std::pair<int64_t, int64_t> adaptive_span(int64_t o, int64_t n, int64_t in) {
  return {o * in / n, ((o + 1) * in + n - 1) / n};
}

AvgWindow adaptive_window(int64_t oh, int64_t ow, const Planes& g) {
  const auto [h0, h1] = adaptive_span(oh, g.oh, g.h);
  const auto [w0, w1] = adaptive_span(ow, g.ow, g.w);
  return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
}

// out = the mean of every window of x that window_of(oh, ow) gives.
template <typename T, typename WindowOf>
void average(const Tensor& out, const Tensor& x, int64_t window_size, const WindowOf& window_of) {
  using Acc = detail::opmath_t<T>;
  const Planes g = planes_of(x, out);
  const T* in = data<const T>(x);
  T* o = data<T>(out);
  for_each_plane(g.count, g.out_size() * window_size, [&](int64_t plane) {
    const T* ip = in + plane * g.in_size();
    T* op = o + plane * g.out_size();
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const AvgWindow win = window_of(oh, ow, g);
        Acc sum = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += static_cast<Acc>(ip[ih * g.w + iw]);
        op[oh * g.ow + ow] = static_cast<T>(win.empty() ? Acc(0) : sum / static_cast<Acc>(win.divisor));
      }
    }
  });
}

// grad_x = every output gradient spread evenly over its window (the adjoint of average).
template <typename T, typename WindowOf>
void average_backward(const Tensor& grad_x, const Tensor& grad_out, int64_t window_size, const WindowOf& window_of) {
  using Acc = detail::opmath_t<T>;
  const Planes g = planes_of(grad_x, grad_out);
  T* gx = data<T>(grad_x);
  const T* go = data<const T>(grad_out);
  for_each_plane(g.count, g.in_size() + g.out_size() * window_size, [&](int64_t plane) {
    T* gp = gx + plane * g.in_size();
    const T* op = go + plane * g.out_size();
    std::fill(gp, gp + g.in_size(), T(0));
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const AvgWindow win = window_of(oh, ow, g);
        if (win.empty()) continue;
        const Acc share = static_cast<Acc>(op[oh * g.ow + ow]) / static_cast<Acc>(win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) {
            T& dst = gp[ih * g.w + iw];
            dst = static_cast<T>(static_cast<Acc>(dst) + share);
          }
      }
    }
  });
}

// Cells an adaptive window covers at most (for the parallel grain).
int64_t adaptive_window_size(const Tensor& in, const Tensor& out) {
  return (in.size(2) / std::max<int64_t>(1, out.size(2)) + 2) * (in.size(3) / std::max<int64_t>(1, out.size(3)) + 2);
}

void max_pool2d_cpu(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  RTX_DISPATCH_NUMERIC(x.dtype(), "max_pool2d", [&] { max_pool<scalar_t>(out, indices, x, p); });
}

void max_pool2d_backward_cpu(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices) {
  RTX_DISPATCH_FLOATS(grad_x.dtype(), "max_pool2d_backward",
                      [&] { max_pool_backward<scalar_t>(grad_x, grad_out, indices); });
}

void avg_pool2d_cpu(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  RTX_DISPATCH_FLOATS(x.dtype(), "avg_pool2d", [&] {
    average<scalar_t>(out, x, p.kernel[0] * p.kernel[1],
                      [&](int64_t oh, int64_t ow, const Planes& g) { return avg_window(oh, ow, g, p); });
  });
}

void avg_pool2d_backward_cpu(const Tensor& grad_x, const Tensor& grad_out, const Pool2dParams& p) {
  RTX_DISPATCH_FLOATS(grad_x.dtype(), "avg_pool2d_backward", [&] {
    average_backward<scalar_t>(grad_x, grad_out, p.kernel[0] * p.kernel[1],
                               [&](int64_t oh, int64_t ow, const Planes& g) { return avg_window(oh, ow, g, p); });
  });
}

void adaptive_avg_pool2d_cpu(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_FLOATS(x.dtype(), "adaptive_avg_pool2d", [&] {
    average<scalar_t>(out, x, adaptive_window_size(x, out), adaptive_window);
  });
}

void adaptive_avg_pool2d_backward_cpu(const Tensor& grad_x, const Tensor& grad_out) {
  RTX_DISPATCH_FLOATS(grad_x.dtype(), "adaptive_avg_pool2d_backward", [&] {
    average_backward<scalar_t>(grad_x, grad_out, adaptive_window_size(grad_x, grad_out), adaptive_window);
  });
}

}  // namespace

RTX_REGISTER_KERNELS(pool_cpu) { RTX_POOL_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
