// CPU convolution kernels, per image and per group: forward is im2col + GEMM, the input gradient GEMM +
// col2im, the weight gradient im2col + GEMM accumulated over images (a 1x1, stride-1, unpadded kernel
// uses the image itself as its column matrix). float16/bfloat16 run in float. Images run concurrently
// on OpenMP threads with single-threaded GEMMs when there are enough of them; otherwise one after
// another, each GEMM threaded by BLAS (never both thread pools at once). float32 first layers with
// few input channels go to the direct kernels of conv_narrow.cpp first; in a build with oneDNN,
// float32 and bfloat16 convolutions then go to oneDNN (conv_onednn.cpp), and these kernels compute
// the cases neither takes.
#include <algorithm>
#include <utility>
#include <vector>

#include "backend/cpu/blas.h"
#include "backend/cpu/conv_narrow.h"
#include "backend/cpu/copy.h"
#include "backend/cpu/parallel.h"
#include "dispatch/conv.h"
#include "core/tensor_impl.h"
#include "rtx/config.h"

#if RTX_WITH_ONEDNN
#include "backend/cpu/conv_onednn.h"
#endif

namespace rtx::cpu {

namespace {

using kernels::Conv2dParams;

// Sizes of one convolution and of its per-group GEMMs.
struct ConvGeometry {
  int64_t n, c, h, w;      // input
  int64_t o, kh, kw;       // weight
  int64_t oh, ow;          // output
  int64_t groups, cg, og;  // groups, input and output channels per group
  int64_t col_rows;        // cg * kh * kw: rows of one group's column matrix
  int64_t plane;           // oh * ow: columns of the column matrix
  Conv2dParams p;
  bool direct;  // the image itself is the column matrix (1x1 kernel, stride 1, no padding)
  // Multiply-adds of one group's GEMM for one image.
  int64_t gemm_work() const { return og * col_rows * plane; }
};

ConvGeometry geometry_of(const Shape& x, const Shape& w, const Shape& out, const Conv2dParams& p) {
  ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.oh = out[2], g.ow = out[3];
  g.groups = p.groups;
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  g.col_rows = g.cg * g.kh * g.kw;
  g.plane = g.oh * g.ow;
  g.p = p;
  g.direct = g.kh == 1 && g.kw == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
  return g;
}

// Output positions [lo, hi) of one dim whose input index o * stride + off lies in [0, in).
std::pair<int64_t, int64_t> valid_range(int64_t off, int64_t stride, int64_t in, int64_t out) {
  const int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  const int64_t hi = in - 1 - off < 0 ? 0 : std::min(out, (in - 1 - off) / stride + 1);
  return {std::min(lo, hi), hi};
}

// Visits every (column-matrix row, output row) pair of one image: f(row, oh, inside, first, w_lo, w_hi),
// where [w_lo, w_hi) are the output columns that read inside the image, first is the image offset
// output column w_lo reads (column ow reads first + (ow - w_lo) * sw), and inside is false when the
// window row reads only padding.
template <typename F>
void for_each_window_row(const ConvGeometry& g, const F& f) {
  const auto& p = g.p;
  for (int64_t c = 0; c < g.c; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t row = (c * g.kh + i) * g.kw + j;
        const int64_t off_h = i * p.dilation[0] - p.padding[0], off_w = j * p.dilation[1] - p.padding[1];
        const auto [h_lo, h_hi] = valid_range(off_h, p.stride[0], g.h, g.oh);
        const auto [w_lo, w_hi] = valid_range(off_w, p.stride[1], g.w, g.ow);
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const bool inside = oh >= h_lo && oh < h_hi && w_lo < w_hi;
          const int64_t first = (c * g.h + oh * p.stride[0] + off_h) * g.w + w_lo * p.stride[1] + off_w;
          f(row, oh, inside, first, w_lo, w_hi);
        }
      }
    }
  }
}

// col [c * kh * kw, oh * ow] = the windows of one image x [c, h, w] (zeros in the padding).
template <typename T>
void im2col(const T* x, const ConvGeometry& g, T* col) {
  const int64_t sw = g.p.stride[1];
  for_each_window_row(g, [&](int64_t row, int64_t oh, bool inside, int64_t first, int64_t w_lo, int64_t w_hi) {
    T* dst = col + row * g.plane + oh * g.ow;
    if (!inside) {
      std::fill(dst, dst + g.ow, T(0));
      return;
    }
    const T* in = x + first;
    std::fill(dst, dst + w_lo, T(0));
    if (sw == 1) {
      std::copy(in, in + (w_hi - w_lo), dst + w_lo);
    } else {
      for (int64_t ow = w_lo; ow < w_hi; ++ow) dst[ow] = in[(ow - w_lo) * sw];
    }
    std::fill(dst + w_hi, dst + g.ow, T(0));
  });
}

// x [c, h, w] = the sum of the windows in col (the adjoint of im2col).
template <typename T>
void col2im(const T* col, const ConvGeometry& g, T* x) {
  const int64_t sw = g.p.stride[1];
  std::fill(x, x + g.c * g.h * g.w, T(0));
  for_each_window_row(g, [&](int64_t row, int64_t oh, bool inside, int64_t first, int64_t w_lo, int64_t w_hi) {
    if (!inside) return;
    const T* in = col + row * g.plane + oh * g.ow;
    T* dst = x + first;
    for (int64_t ow = w_lo; ow < w_hi; ++ow) dst[(ow - w_lo) * sw] += in[ow];
  });
}

// One image's column matrix: the image itself for direct convolutions, else im2col into buf.
template <typename T>
const T* columns(const T* x, const ConvGeometry& g, std::vector<T>& buf) {
  if (g.direct) return x;
  buf.resize(static_cast<size_t>(g.c * g.kh * g.kw * g.plane));
  im2col(x, g, buf.data());
  return buf.data();
}

// Images per thread at least (see gemm_grain).
int64_t image_grain(const ConvGeometry& g) { return gemm_grain(g.n, g.gemm_work(), g.groups); }

// Runs body(image, scratch) for every image, one scratch buffer per thread.
template <typename T, typename Body>
void for_each_image(const ConvGeometry& g, const Body& body) {
  parallel_for(g.n, image_grain(g), [&](int64_t b, int64_t e) {
    std::vector<T> scratch;
    for (int64_t i = b; i < e; ++i) body(i, scratch);
  });
}

// out = W @ columns (+ bias) per image and group.
template <typename T>
void conv_forward(T* out, const T* x, const T* w, const T* bias, const ConvGeometry& g) {
  for_each_image<T>(g, [&](int64_t n, std::vector<T>& buf) {
    T* o = out + n * g.o * g.plane;
    if (bias != nullptr || g.col_rows == 0) {
      for (int64_t oc = 0; oc < g.o; ++oc) std::fill(o + oc * g.plane, o + (oc + 1) * g.plane, bias ? bias[oc] : T(0));
    }
    if (g.col_rows == 0) return;
    const T* col = columns(x + n * g.c * g.h * g.w, g, buf);
    for (int64_t grp = 0; grp < g.groups; ++grp)
      gemm(false, false, g.og, g.plane, g.col_rows, T(1), w + grp * g.og * g.col_rows, g.col_rows,
           col + grp * g.col_rows * g.plane, g.plane, bias ? T(1) : T(0), o + grp * g.og * g.plane, g.plane);
  });
}

// grad_x = col2im(W^T @ grad_out) per image and group.
template <typename T>
void conv_backward_input(T* grad_x, const T* grad_out, const T* w, const ConvGeometry& g) {
  const int64_t image = g.c * g.h * g.w;
  if (g.og == 0) {
    std::fill(grad_x, grad_x + g.n * image, T(0));
    return;
  }
  for_each_image<T>(g, [&](int64_t n, std::vector<T>& buf) {
    T* gx = grad_x + n * image;
    T* col = gx;
    if (!g.direct) {
      buf.resize(static_cast<size_t>(g.c * g.kh * g.kw * g.plane));
      col = buf.data();
    }
    const T* go = grad_out + n * g.o * g.plane;
    for (int64_t grp = 0; grp < g.groups; ++grp)
      gemm(true, false, g.col_rows, g.plane, g.og, T(1), w + grp * g.og * g.col_rows, g.col_rows,
           go + grp * g.og * g.plane, g.plane, T(0), col + grp * g.col_rows * g.plane, g.plane);
    if (!g.direct) col2im(col, g, gx);
  });
}

// grad_w (+)= the weight gradient of images [b, e); beta 0 overwrites, 1 accumulates.
template <typename T>
void weight_gradient_images(T* grad_w, const T* grad_out, const T* x, const ConvGeometry& g, int64_t b, int64_t e,
                            T beta, std::vector<T>& buf) {
  for (int64_t n = b; n < e; ++n, beta = T(1)) {
    const T* col = columns(x + n * g.c * g.h * g.w, g, buf);
    const T* go = grad_out + n * g.o * g.plane;
    for (int64_t grp = 0; grp < g.groups; ++grp)
      gemm(false, true, g.og, g.col_rows, g.plane, T(1), go + grp * g.og * g.plane, g.plane,
           col + grp * g.col_rows * g.plane, g.plane, beta, grad_w + grp * g.og * g.col_rows, g.col_rows);
  }
}

// grad_w = the sum over images of grad_out @ columns^T, per group.
template <typename T>
void conv_backward_weight(T* grad_w, const T* grad_out, const T* x, const ConvGeometry& g) {
  const int64_t size = g.o * g.col_rows;
  std::fill(grad_w, grad_w + size, T(0));
  if (g.n == 0) return;
  const int64_t grain = image_grain(g);
  if (g.n <= grain) {
    std::vector<T> buf;
    weight_gradient_images(grad_w, grad_out, x, g, 0, g.n, T(0), buf);
    return;
  }
  // Concurrent images: one partial sum per thread, added up in image order (deterministic).
  std::vector<std::pair<int64_t, std::vector<T>>> partials;
  parallel_for(g.n, grain, [&](int64_t b, int64_t e) {
    std::vector<T> acc(static_cast<size_t>(size)), buf;
    weight_gradient_images(acc.data(), grad_out, x, g, b, e, T(0), buf);
#pragma omp critical(rtx_conv_weight_partials)
    partials.emplace_back(b, std::move(acc));
  });
  std::sort(partials.begin(), partials.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  for (const auto& part : partials)
    for (int64_t i = 0; i < size; ++i) grad_w[i] += part.second[i];
}

// ---- dtype plumbing -----------------------------------------------------------------------------

// Runs f(out, inputs) in a BLAS type: directly for float32/float64; float16/bfloat16 tensors are
// converted to float32 (undefined inputs stay undefined) and the result converted back into out.
template <typename F>
void in_blas_type(const Tensor& out, TensorList inputs, const F& f) {
  if (out.dtype() == kFloat32 || out.dtype() == kFloat64) {
    f(out, inputs);
    return;
  }
  for (Tensor& t : inputs) {
    if (!t.defined()) continue;
    Tensor wide = detail::make_tensor(t.sizes(), kFloat32, t.device());
    copy_cpu(wide, t);
    t = wide;
  }
  Tensor result = detail::make_tensor(out.sizes(), kFloat32, out.device());
  f(result, inputs);
  copy_cpu(out, result);
}

// t's first element, typed (nullptr for an undefined tensor).
template <typename T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// Calls f(T{}) with T = double for float64 tensors and float otherwise.
template <typename F>
void dispatch_blas(DType t, const F& f) {
  if (t == kFloat64) f(double{});
  else f(float{});
}

void conv2d_cpu(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dParams& p) {
  if (narrow_conv2d(out, x, weight, bias, p)) return;
#if RTX_WITH_ONEDNN
  if (onednn_conv2d(out, x, weight, bias, p)) return;
#endif
  const ConvGeometry g = geometry_of(x.sizes(), weight.sizes(), out.sizes(), p);
  in_blas_type(out, {x, weight, bias}, [&](const Tensor& o, const TensorList& in) {
    dispatch_blas(o.dtype(), [&](auto zero) {
      using T = decltype(zero);
      conv_forward(static_cast<T*>(o.data_ptr()), ptr<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]), g);
    });
  });
}

void conv2d_backward_input_cpu(const Tensor& grad_x, const Tensor& grad_out, const Tensor& weight,
                               const Conv2dParams& p) {
#if RTX_WITH_ONEDNN
  if (onednn_conv2d_backward_input(grad_x, grad_out, weight, p)) return;
#endif
  const ConvGeometry g = geometry_of(grad_x.sizes(), weight.sizes(), grad_out.sizes(), p);
  in_blas_type(grad_x, {grad_out, weight}, [&](const Tensor& gx, const TensorList& in) {
    dispatch_blas(gx.dtype(), [&](auto zero) {
      using T = decltype(zero);
      conv_backward_input(static_cast<T*>(gx.data_ptr()), ptr<T>(in[0]), ptr<T>(in[1]), g);
    });
  });
}

// The narrow kernels and oneDNN sum the bias gradient in their pass; the im2col kernels leave it to the
// caller.
bool conv2d_backward_weight_cpu(const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out, const Tensor& x,
                                const Conv2dParams& p) {
  if (narrow_conv2d_backward_weight(grad_w, grad_b, grad_out, x, p)) return grad_b.defined();
#if RTX_WITH_ONEDNN
  if (onednn_conv2d_backward_weight(grad_w, grad_b, grad_out, x, p)) return grad_b.defined();
#endif
  const ConvGeometry g = geometry_of(x.sizes(), grad_w.sizes(), grad_out.sizes(), p);
  in_blas_type(grad_w, {grad_out, x}, [&](const Tensor& gw, const TensorList& in) {
    dispatch_blas(gw.dtype(), [&](auto zero) {
      using T = decltype(zero);
      conv_backward_weight(static_cast<T*>(gw.data_ptr()), ptr<T>(in[0]), ptr<T>(in[1]), g);
    });
  });
  return false;
}

}  // namespace

RTX_REGISTER_KERNELS(conv_cpu) { RTX_CONV_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
