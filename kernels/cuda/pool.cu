// CUDA pooling kernels over contiguous [N, C, H, W] planes, with the CPU kernels' semantics
// (pool_cpu.cpp): max pooling with int64 flat h * W + w indices (-1 and -inf for a window that covers
// no input; NaN propagates), average pooling with or without the padding in the divisor, adaptive
// average pooling, and their backwards. Forwards give each output a thread, or a warp reducing with
// shuffles when average windows are large. The average backwards gather: each input sums the shares
// of the windows that cover it. The max backward scatters each plane's gradients in output order, a
// warp per plane, with the lowest of the lanes that hit one input adding their values in lane order.
// No atomics: results are bitwise reproducible. Sums and comparisons run in opmath (float for the
// 16-bit floats).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kernels/cuda/pointwise.cuh"
#include "dispatch/pool.h"

namespace rtx::cuda {
namespace {

using kernels::Pool2dParams;
using rtx::detail::opmath_t;

// Average windows of at least this many cells get a warp each.
constexpr int64_t kWarpWindow = 64;
// Planes (one warp each) per block of the max pooling backward.
constexpr int kPlanesPerBlock = 8;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

// Plane count and plane sizes of [N, C, H, W] -> [N, C, OH, OW].
struct Planes {
  int64_t count, h, w, oh, ow;
};

Planes planes_of(const Tensor& in, const Tensor& out) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), out.size(2), out.size(3)};
}

// Splits a linear index over [planes, rows, cols] into plane, row and column: multiply-shift
// division for 32-bit indices, plain division for 64-bit ones.
template <typename index_t>
struct Split {
  index_t plane, cols;
  IntDivider plane_div, cols_div;

  Split(int64_t rows, int64_t c) : plane(static_cast<index_t>(rows * c)), cols(static_cast<index_t>(c)) {
    if constexpr (sizeof(index_t) == 4) {
      plane_div = IntDivider(static_cast<uint32_t>(plane));
      cols_div = IntDivider(static_cast<uint32_t>(cols));
    }
  }
  __device__ __forceinline__ void operator()(index_t i, index_t& p, index_t& r, index_t& c) const {
    index_t rem;
    if constexpr (sizeof(index_t) == 4) {
      p = plane_div.div(i);
      rem = i - p * plane;
      r = cols_div.div(rem);
    } else {
      p = i / plane;
      rem = i - p * plane;
      r = rem / cols;
    }
    c = rem - r * cols;
  }
};

// Calls f(index_t{}) with 32-bit indices when n elements fit them, 64-bit otherwise.
template <typename F>
void with_index(int64_t n, const F& f) {
  if (n < (int64_t{1} << 31)) f(uint32_t{});
  else f(int64_t{});
}

template <typename index_t>
__device__ __forceinline__ index_t thread_index() {
  return static_cast<index_t>(blockIdx.x) * static_cast<index_t>(blockDim.x) + static_cast<index_t>(threadIdx.x);
}

// floor(a / b) for b > 0.
__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// ---- max ----------------------------------------------------------------------------------------

// Window positions [lo, hi) by step dilation of output o along one dim, clipped to the input.
__device__ __forceinline__ void max_span(int64_t o, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                                         int64_t in, int64_t& lo, int64_t& hi) {
  lo = o * stride - pad;
  hi = min(lo + (k - 1) * dilation + 1, in);
  if (lo < 0) lo += (-lo + dilation - 1) / dilation * dilation;
}

template <typename T, typename index_t>
__global__ void max_pool_kernel(T* __restrict__ out, int64_t* __restrict__ indices, const T* __restrict__ x,
                                Pool2dParams p, Split<index_t> split, index_t total, int64_t h, int64_t w) {
  using Acc = opmath_t<T>;
  constexpr bool kFloat = !std::is_integral<Acc>::value;
  const index_t i = thread_index<index_t>();
  if (i >= total) return;
  index_t plane, oh, ow;
  split(i, plane, oh, ow);
  const T* ip = x + static_cast<int64_t>(plane) * h * w;
  int64_t h_lo, h_hi, w_lo, w_hi;
  max_span(oh, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], h, h_lo, h_hi);
  max_span(ow, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], w, w_lo, w_hi);
  // A window that covers no input element (possible with dilation) keeps -inf and index -1.
  int64_t best = h_lo < h_hi && w_lo < w_hi ? h_lo * w + w_lo : -1;
  Acc best_value;
  if constexpr (kFloat) best_value = -std::numeric_limits<Acc>::infinity();
  else best_value = std::numeric_limits<Acc>::lowest();
  for (int64_t ih = h_lo; ih < h_hi; ih += p.dilation[0]) {
    for (int64_t iw = w_lo; iw < w_hi; iw += p.dilation[1]) {
      const Acc v = static_cast<Acc>(ip[ih * w + iw]);
      if (v > best_value || (kFloat && v != v)) {
        best_value = v;
        best = ih * w + iw;
      }
    }
  }
  out[i] = static_cast<T>(best_value);
  indices[i] = best;
}

// A warp per plane, planes in groups of kPlanesPerBlock: zero the plane's gradient, then add the output
// gradients in chunks of kWarpSize outputs. Within a chunk the lowest lane of those with one target adds
// their values in lane order, so every input receives its gradients in output order.
template <typename T>
__global__ void __launch_bounds__(kPlanesPerBlock* kWarpSize)
    max_pool_backward_kernel(T* __restrict__ grad_x, const T* __restrict__ grad_out,
                             const int64_t* __restrict__ indices, int64_t planes, int64_t in_size, int64_t out_size) {
  using Acc = opmath_t<T>;
  __shared__ int64_t targets[kPlanesPerBlock][kWarpSize];
  __shared__ Acc grads[kPlanesPerBlock][kWarpSize];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPlanesPerBlock;
  // Every thread runs every iteration (planes have one size), so the block-wide barriers are uniform.
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kPlanesPerBlock; first < planes; first += step) {
    const int64_t plane = first + warp;
    const bool active = plane < planes;
    const int64_t at = active ? plane : 0;
    T* gp = grad_x + at * in_size;
    const T* op = grad_out + at * out_size;
    const int64_t* xp = indices + at * out_size;
    if (active)
      for (int64_t j = lane; j < in_size; j += kWarpSize) gp[j] = T(0);
    // This lane's output of the chunk at base: its target (-1: none) and gradient.
    const auto load = [&](int64_t base, int64_t& target, Acc& grad) {
      const int64_t i = base + lane;
      const bool valid = active && i < out_size;
      target = valid ? xp[i] : -1;
      grad = valid ? static_cast<Acc>(op[i]) : Acc(0);
    };
    int64_t target;
    Acc grad;
    load(0, target, grad);
    for (int64_t base = 0; base < out_size; base += kWarpSize) {
      targets[warp][lane] = target;
      grads[warp][lane] = grad;
      int64_t next_target;  // the next chunk's loads overlap this chunk's additions
      Acc next_grad;
      load(base + kWarpSize, next_target, next_grad);
      __syncthreads();
      if (target >= 0) {
        bool lowest = true;
        for (int j = 0; j < lane && lowest; ++j) lowest = targets[warp][j] != target;
        if (lowest) {
          Acc sum = static_cast<Acc>(gp[target]) + grads[warp][lane];
          for (int j = lane + 1; j < kWarpSize; ++j)
            if (targets[warp][j] == target) sum += grads[warp][j];
          gp[target] = static_cast<T>(sum);
        }
      }
      __syncthreads();
      target = next_target;
      grad = next_grad;
    }
  }
}

// ---- average ------------------------------------------------------------------------------------

// The input rectangle of one window (clipped to the input) and its divisor.
struct Window {
  int64_t h0, h1, w0, w1, divisor;
  __device__ __forceinline__ bool empty() const { return h0 >= h1 || w0 >= w1; }
  __device__ __forceinline__ bool contains(int64_t ih, int64_t iw) const {
    return ih >= h0 && ih < h1 && iw >= w0 && iw < w1;
  }
};

// avg_pool2d's windows (pool_cpu.cpp's avg_window).
struct AvgWindows {
  Pool2dParams p;
  int64_t h, w;  // input size

  __device__ Window operator()(int64_t oh, int64_t ow) const {
    Window win;
    win.h0 = oh * p.stride[0] - p.padding[0];
    win.w0 = ow * p.stride[1] - p.padding[1];
    win.h1 = min(win.h0 + p.kernel[0], h + p.padding[0]);
    win.w1 = min(win.w0 + p.kernel[1], w + p.padding[1]);
    const int64_t padded_size = (win.h1 - win.h0) * (win.w1 - win.w0);
    win.h0 = max(win.h0, int64_t{0});
    win.w0 = max(win.w0, int64_t{0});
    win.h1 = min(win.h1, h);
    win.w1 = min(win.w1, w);
    win.divisor = p.count_include_pad ? padded_size : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  // Outputs [lo, hi) along dim whose windows may cover input position i (a superset).
  __device__ void covering(int dim, int64_t i, int64_t n_out, int64_t& lo, int64_t& hi) const {
    lo = max(int64_t{0}, floor_div(i + p.padding[dim] - p.kernel[dim], p.stride[dim]) + 1);
    hi = min(n_out, floor_div(i + p.padding[dim], p.stride[dim]) + 1);
  }
};

// adaptive_avg_pool2d's windows: output o of n covers [floor(o * in / n), ceil((o + 1) * in / n)).
struct AdaptiveWindows {
  int64_t h, w, oh, ow;  // input and output sizes

  __device__ Window operator()(int64_t i, int64_t j) const {
    const int64_t h0 = i * h / oh, h1 = ((i + 1) * h + oh - 1) / oh;
    const int64_t w0 = j * w / ow, w1 = ((j + 1) * w + ow - 1) / ow;
    return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
  }
  __device__ void covering(int dim, int64_t i, int64_t n_out, int64_t& lo, int64_t& hi) const {
    const int64_t in = dim == 0 ? h : w;
    lo = i * n_out / in;
    hi = min(n_out, ((i + 1) * n_out + in - 1) / in);
  }
};

// One output per thread.
template <typename T, typename index_t, typename Windows>
__global__ void average_kernel(T* __restrict__ out, const T* __restrict__ x, Windows windows, Split<index_t> split,
                               index_t total, int64_t h, int64_t w) {
  using Acc = opmath_t<T>;
  const index_t i = thread_index<index_t>();
  if (i >= total) return;
  index_t plane, oh, ow;
  split(i, plane, oh, ow);
  const Window win = windows(oh, ow);
  const T* ip = x + static_cast<int64_t>(plane) * h * w;
  Acc sum = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += static_cast<Acc>(ip[ih * w + iw]);
  out[i] = static_cast<T>(win.empty() ? Acc(0) : sum / static_cast<Acc>(win.divisor));
}

// One output per warp: lanes stride over the window's cells, then a butterfly sum.
template <typename T, typename Windows>
__global__ void average_warp_kernel(T* __restrict__ out, const T* __restrict__ x, Windows windows, int64_t total,
                                    int64_t oh_count, int64_t ow_count, int64_t h, int64_t w) {
  using Acc = opmath_t<T>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (i >= total) return;  // uniform across the warp
  const int64_t plane = i / (oh_count * ow_count), rem = i - plane * oh_count * ow_count;
  const int64_t oh = rem / ow_count, ow = rem - oh * ow_count;
  const Window win = windows(oh, ow);
  const T* ip = x + plane * h * w;
  const int64_t width = max(win.w1 - win.w0, int64_t{0});
  const int64_t cells = win.empty() ? 0 : (win.h1 - win.h0) * width;
  Acc sum = 0;
  for (int64_t e = lane; e < cells; e += kWarpSize) {
    const int64_t r = e / width;
    sum += static_cast<Acc>(ip[(win.h0 + r) * w + win.w0 + (e - r * width)]);
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) sum += rtx_shfl_xor(sum, offset);
  if (lane == 0) out[i] = static_cast<T>(win.empty() ? Acc(0) : sum / static_cast<Acc>(win.divisor));
}

// One input per thread: the sum over the windows that contain it of their gradient share.
template <typename T, typename index_t, typename Windows>
__global__ void average_backward_kernel(T* __restrict__ grad_x, const T* __restrict__ grad_out, Windows windows,
                                        Split<index_t> split, index_t total, int64_t oh_count, int64_t ow_count) {
  using Acc = opmath_t<T>;
  const index_t i = thread_index<index_t>();
  if (i >= total) return;
  index_t plane, ih, iw;
  split(i, plane, ih, iw);
  int64_t h_lo, h_hi, w_lo, w_hi;
  windows.covering(0, ih, oh_count, h_lo, h_hi);
  windows.covering(1, iw, ow_count, w_lo, w_hi);
  const T* op = grad_out + static_cast<int64_t>(plane) * oh_count * ow_count;
  Acc sum = 0;
  for (int64_t oh = h_lo; oh < h_hi; ++oh) {
    for (int64_t ow = w_lo; ow < w_hi; ++ow) {
      const Window win = windows(oh, ow);
      if (win.contains(ih, iw)) sum += static_cast<Acc>(op[oh * ow_count + ow]) / static_cast<Acc>(win.divisor);
    }
  }
  grad_x[i] = static_cast<T>(sum);
}

// out = the mean of every window (max_cells: the most cells a window can have).
template <typename T, typename Windows>
void average(const Tensor& out, const Tensor& x, const Windows& windows, int64_t max_cells) {
  const Planes g = planes_of(x, out);
  const int64_t total = out.numel();
  detail::KernelScope scope(x.device());
  T* o = static_cast<T*>(out.data_ptr());
  const T* in = static_cast<const T*>(x.data_ptr());
  if (max_cells >= kWarpWindow) {
    constexpr int64_t kWarpsPerBlock = kBlockSize / kWarpSize;
    const auto blocks = static_cast<unsigned>((total + kWarpsPerBlock - 1) / kWarpsPerBlock);
    average_warp_kernel<T, Windows>
        <<<blocks, kBlockSize, 0, scope.stream()>>>(o, in, windows, total, g.oh, g.ow, g.h, g.w);
    RTX_CUDA_CHECK_LAUNCH();
    return;
  }
  with_index(total, [&](auto index) {
    using index_t = decltype(index);
    average_kernel<T, index_t, Windows><<<grid_for(total), kBlockSize, 0, scope.stream()>>>(
        o, in, windows, Split<index_t>(g.oh, g.ow), static_cast<index_t>(total), g.h, g.w);
    RTX_CUDA_CHECK_LAUNCH();
  });
}

// grad_x = every output gradient spread evenly over its window.
template <typename T, typename Windows>
void average_backward(const Tensor& grad_x, const Tensor& grad_out, const Windows& windows) {
  const Planes g = planes_of(grad_x, grad_out);
  const int64_t total = grad_x.numel();
  detail::KernelScope scope(grad_x.device());
  with_index(total, [&](auto index) {
    using index_t = decltype(index);
    average_backward_kernel<T, index_t, Windows><<<grid_for(total), kBlockSize, 0, scope.stream()>>>(
        static_cast<T*>(grad_x.data_ptr()), static_cast<const T*>(grad_out.data_ptr()), windows,
        Split<index_t>(g.h, g.w), static_cast<index_t>(total), g.oh, g.ow);
    RTX_CUDA_CHECK_LAUNCH();
  });
}

AvgWindows avg_windows(const Tensor& in, const Pool2dParams& p) { return {p, in.size(2), in.size(3)}; }
AdaptiveWindows adaptive_windows(const Tensor& in, const Tensor& out) {
  return {in.size(2), in.size(3), out.size(2), out.size(3)};
}

// Cells an adaptive window covers at most.
int64_t adaptive_cells(const Tensor& in, const Tensor& out) {
  const auto span = [](int64_t i, int64_t o) { return (i + o - 1) / o + 1; };
  return span(in.size(2), out.size(2)) * span(in.size(3), out.size(3));
}

// ---- entry points -------------------------------------------------------------------------------

void max_pool2d_cuda(const Tensor& out, const Tensor& indices, const Tensor& x, const Pool2dParams& p) {
  const Planes g = planes_of(x, out);
  const int64_t total = out.numel();
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_NUMERIC(x.dtype(), "max_pool2d", [&] {
    with_index(total, [&](auto index) {
      using index_t = decltype(index);
      max_pool_kernel<scalar_t, index_t><<<grid_for(total), kBlockSize, 0, scope.stream()>>>(
          static_cast<scalar_t*>(out.data_ptr()), static_cast<int64_t*>(indices.data_ptr()),
          static_cast<const scalar_t*>(x.data_ptr()), p, Split<index_t>(g.oh, g.ow), static_cast<index_t>(total), g.h,
          g.w);
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
}

void max_pool2d_backward_cuda(const Tensor& grad_x, const Tensor& grad_out, const Tensor& indices) {
  const Planes g = planes_of(grad_x, grad_out);
  detail::KernelScope scope(grad_x.device());
  const auto blocks = static_cast<unsigned>(std::min(kMaxBlocks, (g.count + kPlanesPerBlock - 1) / kPlanesPerBlock));
  RTX_DISPATCH_FLOATS(grad_x.dtype(), "max_pool2d_backward", [&] {
    max_pool_backward_kernel<scalar_t><<<blocks, kPlanesPerBlock * kWarpSize, 0, scope.stream()>>>(
        static_cast<scalar_t*>(grad_x.data_ptr()), static_cast<const scalar_t*>(grad_out.data_ptr()),
        static_cast<const int64_t*>(indices.data_ptr()), g.count, g.h * g.w, g.oh * g.ow);
    RTX_CUDA_CHECK_LAUNCH();
  });
}

void avg_pool2d_cuda(const Tensor& out, const Tensor& x, const Pool2dParams& p) {
  RTX_DISPATCH_FLOATS(x.dtype(), "avg_pool2d",
                      [&] { average<scalar_t>(out, x, avg_windows(x, p), p.kernel[0] * p.kernel[1]); });
}

void avg_pool2d_backward_cuda(const Tensor& grad_x, const Tensor& grad_out, const Pool2dParams& p) {
  RTX_DISPATCH_FLOATS(grad_x.dtype(), "avg_pool2d_backward",
                      [&] { average_backward<scalar_t>(grad_x, grad_out, avg_windows(grad_x, p)); });
}

void adaptive_avg_pool2d_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_FLOATS(x.dtype(), "adaptive_avg_pool2d", [&] {
    average<scalar_t>(out, x, adaptive_windows(x, out), adaptive_cells(x, out));
  });
}

void adaptive_avg_pool2d_backward_cuda(const Tensor& grad_x, const Tensor& grad_out) {
  RTX_DISPATCH_FLOATS(grad_x.dtype(), "adaptive_avg_pool2d_backward",
                      [&] { average_backward<scalar_t>(grad_x, grad_out, adaptive_windows(grad_x, grad_out)); });
}

}  // namespace

RTX_REGISTER_KERNELS(pool_cuda) { RTX_POOL_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
