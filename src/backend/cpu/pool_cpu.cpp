// CPU pooling kernels: direct loops over the output windows, parallel over the N * C planes (every
// backward writes only into its own plane). Sums, divisions and comparisons run in opmath (float for
// the 16-bit floats); max pooling propagates NaN like PyTorch.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "backend/cpu/parallel.h"
#include "backend/cpu/register.h"
#include "core/dtype_dispatch.h"
#include "dispatch/pool.h"

namespace rtx::cpu {
namespace {

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

// out, indices = the max of every window and where it is.
template <typename T>
void max_pool(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  using Acc = detail::opmath_t<T>;
  constexpr bool kFloat = !std::is_integral_v<Acc>;
  const Planes g = planes_of(x, out);
  const T* in = data<const T>(x);
  T* o = data<T>(out);
  int64_t* idx = data<int64_t>(indices);
  for_each_plane(g.count, g.out_size() * p.kernel[0] * p.kernel[1], [&](int64_t plane) {
    const T* ip = in + plane * g.in_size();
    T* op = o + plane * g.out_size();
    int64_t* xp = idx + plane * g.out_size();
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const Span hs = max_span(oh, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], g.h);
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const Span ws = max_span(ow, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], g.w);
        // A window that covers no input element (possible with dilation) keeps -inf and index -1.
        int64_t best = hs.lo < hs.hi && ws.lo < ws.hi ? hs.lo * g.w + ws.lo : -1;
        Acc best_value = kFloat ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::lowest();
        for (int64_t ih = hs.lo; ih < hs.hi; ih += hs.step) {
          for (int64_t iw = ws.lo; iw < ws.hi; iw += ws.step) {
            const Acc v = static_cast<Acc>(ip[ih * g.w + iw]);
            if (v > best_value || (kFloat && v != v)) {
              best_value = v;
              best = ih * g.w + iw;
            }
          }
        }
        op[oh * g.ow + ow] = static_cast<T>(best_value);
        xp[oh * g.ow + ow] = best;
      }
    }
  });
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

void register_pool_kernels() {
  kernels::max_pool2d_kernel.set(kCPU, max_pool2d_cpu);
  kernels::max_pool2d_backward_kernel.set(kCPU, max_pool2d_backward_cpu);
  kernels::avg_pool2d_kernel.set(kCPU, avg_pool2d_cpu);
  kernels::avg_pool2d_backward_kernel.set(kCPU, avg_pool2d_backward_cpu);
  kernels::adaptive_avg_pool2d_kernel.set(kCPU, adaptive_avg_pool2d_cpu);
  kernels::adaptive_avg_pool2d_backward_kernel.set(kCPU, adaptive_avg_pool2d_backward_cpu);
}

}  // namespace rtx::cpu
