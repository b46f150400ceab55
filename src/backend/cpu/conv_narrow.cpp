// Direct convolution of inputs with few channels (conv_narrow.h). Per image, the taps' shifted input
// planes are laid out once as rows of a column matrix ([taps][output plane], zero where a tap reads
// padding, each row a whole number of 16-float vectors); an output plane is then the weighted sum of
// those rows, 16 positions at a time in vector registers, for four output channels at once (each
// column vector loaded once for the four), written straight into NCHW. The weight and bias gradients
// run the same rows against the output gradient's planes, nine taps' sums in vector registers at a
// time; each thread sums its own images and the threads' sums are added in image order. oneDNN
// computes such layers in its blocked layout and converts the output and the output gradient to and
// from it, which at these sizes costs more than the convolution. No multiply-add is fused and lanes
// are added in a fixed order, so every vector ISA gives the same bits.
#include "backend/cpu/conv_narrow.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/tensor_impl.h"

namespace rtx::cpu {

namespace {

using kernels::Conv2dParams;

constexpr int64_t kLanes = 16;
using Vec = Floats16;
constexpr int64_t kMaxChannels = 3;
constexpr int64_t kMaxTaps = 27;
constexpr int kChannelBlock = 4;  // output channels that share each column vector in the forward
constexpr int kTapGroup = 9;      // taps whose weight-gradient sums stay in registers at a time
constexpr int64_t kMaxTapGroups = kMaxTaps / kTapGroup;
static_assert(kMaxTaps % kTapGroup == 0, "whole tap groups");

std::atomic<bool> g_enabled{true};
std::atomic<int64_t> g_runs{0};

struct Geometry {
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // weight
  int64_t oh, ow;      // output
  int64_t ph, pw;      // padding
  int64_t taps() const { return c * kh * kw; }
  int64_t plane() const { return oh * ow; }
  int64_t chunks() const { return (plane() + kLanes - 1) / kLanes; }  // vectors per column row
  int64_t row_stride() const { return chunks() * kLanes; }
};

// The geometry of a case these kernels take; false otherwise. bias: the bias or its gradient (may be
// undefined).
bool takes(const Tensor& x, const Tensor& weight, const Tensor& out, const Conv2dParams& p, const Tensor& bias,
           Geometry& g) {
  if (!g_enabled.load(std::memory_order_relaxed) || p.groups != 1 || p.stride[0] != 1 || p.stride[1] != 1 ||
      p.dilation[0] != 1 || p.dilation[1] != 1)
    return false;
  for (const Tensor* t : {&x, &weight, &out})
    if (t->numel() == 0 || t->dtype() != kFloat32) return false;
  if (bias.defined() && bias.dtype() != kFloat32) return false;
  g = {x.size(0), x.size(1), x.size(2), x.size(3), weight.size(0), weight.size(2), weight.size(3),
       out.size(2), out.size(3), p.padding[0], p.padding[1]};
  return g.c <= kMaxChannels && g.taps() <= kMaxTaps;
}

// The column matrix of one image: row t = (channel, ky, kx) holds, at output position (i, j), the
// input value tap t reads there (zero in the padding and past the plane).
void columns(float* col, const float* image, const Geometry& g) {
  const int64_t stride = g.row_stride();
  int64_t t = 0;
  for (int64_t ci = 0; ci < g.c; ++ci)
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx, ++t) {
        float* row = col + t * stride;
        // Output columns [lo, hi) read inside the image, from input column j + kx - pw.
        const int64_t lo = std::clamp<int64_t>(g.pw - kx, 0, g.ow), hi = std::clamp<int64_t>(g.w + g.pw - kx, lo, g.ow);
        for (int64_t i = 0; i < g.oh; ++i) {
          float* dst = row + i * g.ow;
          const int64_t r = i + ky - g.ph;
          if (r < 0 || r >= g.h) {
            std::fill(dst, dst + g.ow, 0.f);
            continue;
          }
          const float* src = image + (ci * g.h + r) * g.w + kx - g.pw;
          std::fill(dst, dst + lo, 0.f);
          std::copy(src + lo, src + hi, dst + lo);
          std::fill(dst + hi, dst + g.ow, 0.f);
        }
        std::fill(row + g.plane(), row + stride, 0.f);
      }
}

// Output channels [o0, o0 + kBlock) of image n from its column matrix.
template <int kBlock>
void forward_block(float* out, const float* col, const float* weight, const float* bias, const Geometry& g,
                   int64_t n, int64_t o0) {
  const int64_t taps = g.taps(), stride = g.row_stride(), plane = g.plane();
  float wt[kBlock][kMaxTaps];
  for (int b = 0; b < kBlock; ++b)
    for (int64_t t = 0; t < taps; ++t) wt[b][t] = weight[(o0 + b) * taps + t];
  float* dst = out + (n * g.o + o0) * plane;
  for (int64_t ch = 0; ch < g.chunks(); ++ch) {
    const int64_t at = ch * kLanes;
    Vec acc[kBlock];
    for (int b = 0; b < kBlock; ++b) acc[b] = Vec{} + (bias != nullptr ? bias[o0 + b] : 0.f);
    for (int64_t t = 0; t < taps; ++t) {
      const Vec v = *reinterpret_cast<const Vec*>(col + t * stride + at);
      for (int b = 0; b < kBlock; ++b) acc[b] += wt[b][t] * v;
    }
    if (at + kLanes <= plane) {
      for (int b = 0; b < kBlock; ++b) *reinterpret_cast<Vec*>(dst + b * plane + at) = acc[b];
    } else {
      for (int b = 0; b < kBlock; ++b)
        for (int64_t l = 0; at + l < plane; ++l) dst[b * plane + at + l] = acc[b][l];
    }
  }
}

// Calls body(image, column matrix) for images [b, e) of x, the column matrix one buffer of this thread.
template <typename Body>
void for_each_column_matrix(const float* x, const Geometry& g, int64_t b, int64_t e, const Body& body) {
  std::vector<float> col(static_cast<size_t>(g.taps() * g.row_stride()));
  for (int64_t n = b; n < e; ++n) {
    columns(col.data(), x + n * g.c * g.h * g.w, g);
    body(n, col.data());
  }
}

// The lanes of the kLanes floats at v, added in order.
float lane_sum(const float* v) {
  float s = 0.f;
  for (int64_t l = 0; l < kLanes; ++l) s += v[l];
  return s;
}

}  // namespace

bool narrow_conv2d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& p) {
  Geometry g;
  if (!takes(x, weight, out, p, bias, g)) return false;
  const float* xp = static_cast<const float*>(x.data_ptr());
  const float* w = static_cast<const float*>(weight.data_ptr());
  const float* b = bias.defined() ? static_cast<const float*>(bias.data_ptr()) : nullptr;
  float* o = static_cast<float*>(out.data_ptr());
  const int64_t image_work = g.o * g.plane() * g.taps();
  parallel_for(g.n, std::max<int64_t>(1, kGrainSize / image_work), [&](int64_t b0, int64_t b1) {
    with_vector_isa([&] {
      for_each_column_matrix(xp, g, b0, b1, [&](int64_t n, const float* col) {
        int64_t o0 = 0;
        for (; o0 + kChannelBlock <= g.o; o0 += kChannelBlock) forward_block<kChannelBlock>(o, col, w, b, g, n, o0);
        for (; o0 < g.o; ++o0) forward_block<1>(o, col, w, b, g, n, o0);
      });
    });
  });
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool narrow_conv2d_backward_weight(const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                                   const Tensor& x, const Conv2dParams& p) {
  Geometry g;
  if (!takes(x, grad_w, grad_out, p, grad_b, g)) return false;
  const float* xp = static_cast<const float*>(x.data_ptr());
  const float* go = static_cast<const float*>(grad_out.data_ptr());
  const int64_t taps = g.taps(), stride = g.row_stride(), plane = g.plane(), chunks = g.chunks();
  const int64_t groups = (taps + kTapGroup - 1) / kTapGroup;
  // Per output channel: groups x kTapGroup tap sums, then the bias sum, each kLanes lanes' sums.
  const int64_t sums_per_channel = groups * kTapGroup + 1;
  std::vector<std::pair<int64_t, std::vector<float>>> partials;  // (first image, sums)
  const int64_t image_work = g.o * plane * taps;
  parallel_for(g.n, std::max<int64_t>(1, kGrainSize / image_work), [&](int64_t b0, int64_t b1) {
    std::vector<float> sums(static_cast<size_t>(g.o * sums_per_channel * kLanes), 0.f);
    std::vector<float> zeros(static_cast<size_t>(stride), 0.f);  // the rows of taps past the last
    with_vector_isa([&] {
      for_each_column_matrix(xp, g, b0, b1, [&](int64_t n, const float* col) {
        const float* rows[kMaxTapGroups * kTapGroup];
        for (int64_t t = 0; t < groups * kTapGroup; ++t) rows[t] = t < taps ? col + t * stride : zeros.data();
        for (int64_t oc = 0; oc < g.o; ++oc) {
          const float* gp = go + (n * g.o + oc) * plane;
          Vec last{};  // the plane's last partial vector, zero past its end
          for (int64_t l = 0; (chunks - 1) * kLanes + l < plane; ++l) last[l] = gp[(chunks - 1) * kLanes + l];
          Vec* s = reinterpret_cast<Vec*>(sums.data()) + oc * sums_per_channel;
          for (int64_t group = 0; group < groups; ++group) {
            const float* const* group_rows = rows + group * kTapGroup;
            Vec acc[kTapGroup], acc_b = s[groups * kTapGroup];
            for (int j = 0; j < kTapGroup; ++j) acc[j] = s[group * kTapGroup + j];
            for (int64_t ch = 0; ch < chunks; ++ch) {
              const Vec gv = ch + 1 < chunks ? *reinterpret_cast<const Vec*>(gp + ch * kLanes) : last;
              acc_b += gv;
              for (int j = 0; j < kTapGroup; ++j)
                acc[j] += gv * *reinterpret_cast<const Vec*>(group_rows[j] + ch * kLanes);
            }
            for (int j = 0; j < kTapGroup; ++j) s[group * kTapGroup + j] = acc[j];
            if (group == 0) s[groups * kTapGroup] = acc_b;
          }
        }
      });
    });
#pragma omp critical(rtx_narrow_conv_partials)
    partials.emplace_back(b0, std::move(sums));
  });
  std::sort(partials.begin(), partials.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  float* gw = static_cast<float*>(grad_w.data_ptr());
  float* gb = grad_b.defined() ? static_cast<float*>(grad_b.data_ptr()) : nullptr;
  for (int64_t oc = 0; oc < g.o; ++oc) {
    for (int64_t t = 0; t < taps; ++t) {
      float total = 0.f;
      for (const auto& part : partials) total += lane_sum(part.second.data() + (oc * sums_per_channel + t) * kLanes);
      gw[oc * taps + t] = total;
    }
    if (gb != nullptr) {
      float total = 0.f;
      for (const auto& part : partials) total += lane_sum(part.second.data() + (oc * sums_per_channel + groups * kTapGroup) * kLanes);
      gb[oc] = total;
    }
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool narrow_conv_enabled() { return g_enabled.load(); }
void set_narrow_conv_enabled(bool on) { g_enabled.store(on); }
int64_t narrow_conv_runs() { return g_runs.load(); }

}  // namespace rtx::cpu
