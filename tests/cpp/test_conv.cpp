// Tests of conv2d, conv_transpose2d and the pools against naive float64 loops: stride, padding, dilation,
// groups (depthwise too), 1x1 kernels, batched and unbatched inputs, non-contiguous inputs, every float dtype,
// a convolution large enough for BLAS threading (forward and both gradients against loops); max pooling
// values, indices and NaN propagation, average pooling with ceil_mode and count_include_pad, adaptive
// pooling with uneven windows; first and second order gradients of all of them; every error; library
// convolutions in exact float32 by default and TF32 when allowed, 16-bit and deterministic mode; max
// pooling gradients over overlapping windows and average pools with large windows.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class ConvTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(ConvTest);

using Pair = std::array<int64_t, 2>;

// ---- data ---------------------------------------------------------------------------------------

// Element (n, c, h, w) of a row-major [N, C, H, W] buffer.
struct Nchw {
  int64_t n, c, h, w;
  int64_t at(int64_t i, int64_t j, int64_t k, int64_t l) const { return ((i * c + j) * h + k) * w + l; }
};

// ---- convolution reference ----------------------------------------------------------------------

struct ConvCase {
  Shape x, w;
  Pair stride, padding, dilation;
  int64_t groups;
  bool bias;
};

const std::vector<ConvCase> kConvCases = {
    {{2, 4, 7, 6}, {6, 2, 3, 2}, {2, 1}, {1, 2}, {2, 1}, 2, true},
    {{1, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{2, 3, 6, 6}, {3, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, false},  // depthwise
    {{2, 4, 5, 5}, {6, 4, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},   // 1x1: no im2col
    {{3, 2, 4, 5}, {2, 2, 2, 2}, {3, 2}, {0, 1}, {1, 2}, 1, false},
    {{2, 4, 5, 4}, {4, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 2, true},   // grouped 1x1
    {{1, 2, 3, 3}, {2, 2, 5, 5}, {1, 1}, {1, 1}, {1, 1}, 1, false},  // kernel as large as the padded input
};

Shape out_shape(const Shape& x, const Shape& w, const ConvCase& c) {
  auto size = [&](int i) {
    return (x[2 + i] + 2 * c.padding[i] - c.dilation[i] * (w[2 + i] - 1) - 1) / c.stride[i] + 1;
  };
  return {x[0], w[0], size(0), size(1)};
}

// Visits every (output, input, weight) index triple of the convolution that touches the input.
template <typename F>
void conv_loops(const Shape& xs, const Shape& ws, const ConvCase& c, const F& f) {
  const Shape os = out_shape(xs, ws, c);
  const int64_t cg = xs[1] / c.groups, og = ws[0] / c.groups;
  const Nchw X{xs[0], xs[1], xs[2], xs[3]}, W{ws[0], ws[1], ws[2], ws[3]}, O{os[0], os[1], os[2], os[3]};
  for (int64_t n = 0; n < O.n; ++n)
    for (int64_t o = 0; o < O.c; ++o)
      for (int64_t oh = 0; oh < O.h; ++oh)
        for (int64_t ow = 0; ow < O.w; ++ow)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < W.h; ++i)
              for (int64_t j = 0; j < W.w; ++j) {
                const int64_t ih = oh * c.stride[0] - c.padding[0] + i * c.dilation[0];
                const int64_t iw = ow * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (ih < 0 || ih >= X.h || iw < 0 || iw >= X.w) continue;
                f(O.at(n, o, oh, ow), X.at(n, (o / og) * cg + ci, ih, iw), W.at(o, ci, i, j));
              }
}

Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvCase& c) {
  const Shape xs = x.dim() == 3 ? Shape{1, x.size(0), x.size(1), x.size(2)} : x.sizes();
  const Shape os = out_shape(xs, w.sizes(), c);
  const auto xv = values(x), wv = values(w);
  std::vector<double> out(static_cast<size_t>(numel(os)), 0.0);
  if (bias.defined()) {
    const auto bv = values(bias);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bv[(i / static_cast<size_t>(os[2] * os[3])) % os[1]];
  }
  conv_loops(xs, w.sizes(), c, [&](int64_t o, int64_t xi, int64_t wi) { out[o] += xv[xi] * wv[wi]; });
  Tensor r = make(out, os);
  return x.dim() == 3 ? r.squeeze(0) : r;
}

Tensor run_conv(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvCase& c) {
  return conv2d(x, w, bias, {c.stride[0], c.stride[1]}, {c.padding[0], c.padding[1]}, {c.dilation[0], c.dilation[1]},
                c.groups);
}

TEST_P(ConvTest, Conv2dForward) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    uint64_t seed = 1;
    for (const ConvCase& c : kConvCases) {
      const Tensor x = quarter_tensor(c.x, seed++, dev(), dt), w = quarter_tensor(c.w, seed++, dev(), dt);
      const Tensor b = c.bias ? quarter_tensor({c.w[0]}, seed++, dev(), dt) : Tensor();
      const Tensor out = run_conv(x, w, b, c);
      EXPECT_EQ(out.dtype(), dt);
      const double rtol = dt == kBFloat16 ? 1e-2 : dt == kFloat16 ? 2e-3 : -1;
      EXPECT_TRUE(all_close(out, ref_conv(x, w, b, c), rtol, dt == kBFloat16 || dt == kFloat16 ? 5e-2 : -1))
          << dtype_name(dt) << " x " << ::testing::PrintToString(c.x) << " w " << ::testing::PrintToString(c.w);
    }
  }
}

TEST_P(ConvTest, Conv2dUnbatchedAndNonContiguous) {
  const ConvCase& c = kConvCases[0];
  const Tensor x = quarter_tensor({4, 7, 6}, 1, dev()), w = quarter_tensor(c.w, 2, dev()), b = quarter_tensor({6}, 3, dev());
  const Tensor out = run_conv(x, w, b, c);
  EXPECT_EQ(out.dim(), 3);
  EXPECT_TRUE(all_close(out, ref_conv(x, w, b, c)));
  // Channels-last memory and a transposed weight.
  const Tensor xc = quarter_tensor({2, 7, 6, 4}, 4, dev()).permute({0, 3, 1, 2});
  const Tensor wt = quarter_tensor({6, 2, 2, 3}, 5, dev()).transpose(2, 3);
  EXPECT_TRUE(all_close(run_conv(xc, wt, b, c), ref_conv(xc, wt, b, c)));
  // A 1-value stride/padding/dilation applies to both dims.
  const Tensor y = conv2d(quarter_tensor({1, 2, 6, 6}, 6, dev()), quarter_tensor({3, 2, 2, 2}, 7, dev()), {}, {2}, {1}, {2});
  const ConvCase same{{1, 2, 6, 6}, {3, 2, 2, 2}, {2, 2}, {1, 1}, {2, 2}, 1, false};
  EXPECT_TRUE(all_close(y, ref_conv(quarter_tensor({1, 2, 6, 6}, 6, dev()), quarter_tensor({3, 2, 2, 2}, 7, dev()), {}, same)));
  // No images: an empty output of the right shape.
  EXPECT_EQ(run_conv(quarter_tensor({0, 4, 7, 6}, 8, dev()), w, b, c).sizes(), (Shape{0, 6, 3, 9}));
}

TEST_P(ConvTest, Conv2dLargeMatchesLoopsWithGradients) {
  // Every GEMM is large enough for BLAS threading (images one after another).
  const ConvCase c{{2, 16, 16, 16}, {32, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true};
  for (DType dt : {kFloat64, kFloat32}) {
    const Tensor x = quarter_tensor(c.x, 1, dev(), dt).requires_grad_(), w = quarter_tensor(c.w, 2, dev(), dt).requires_grad_();
    const Tensor b = quarter_tensor({32}, 3, dev(), dt).requires_grad_();
    const Tensor out = run_conv(x, w, b, c);
    EXPECT_TRUE(all_close(out, ref_conv(x, w, b, c), 1e-5, 1e-4));
    const Tensor g = quarter_tensor(out.sizes(), 4, dev(), dt);
    out.backward(g);
    const auto gv = values(g), xv = values(x), wv = values(w);
    std::vector<double> gx(xv.size(), 0.0), gw(wv.size(), 0.0), gb(32, 0.0);
    conv_loops(c.x, c.w, c, [&](int64_t o, int64_t xi, int64_t wi) {
      gx[xi] += gv[o] * wv[wi];
      gw[wi] += gv[o] * xv[xi];
    });
    for (size_t i = 0; i < gv.size(); ++i) gb[(i / 256) % 32] += gv[i];
    EXPECT_TRUE(all_close(x.grad(), make(gx, c.x), 1e-5, 1e-4)) << dtype_name(dt);
    EXPECT_TRUE(all_close(w.grad(), make(gw, c.w), 1e-5, 1e-4)) << dtype_name(dt);
    EXPECT_TRUE(all_close(b.grad(), make(gb, {32}), 1e-5, 1e-4)) << dtype_name(dt);
  }
}

TEST_P(ConvTest, Conv2dGradients) {
  uint64_t seed = 10;
  for (const ConvCase& c : kConvCases) {
    Shape xs = c.x;
    xs[0] = std::min<int64_t>(xs[0], 2);
    TensorList in{leaf(xs, dev(), seed++), leaf(c.w, dev(), seed++)};
    if (c.bias) in.push_back(leaf({c.w[0]}, dev(), seed++));
    EXPECT_TRUE(gradcheck([&](const TensorList& t) { return TensorList{run_conv(t[0], t[1], c.bias ? t[2] : Tensor(), c)}; }, in))
        << "x " << ::testing::PrintToString(c.x) << " w " << ::testing::PrintToString(c.w);
  }
  // Unbatched input; only the weight requiring grad.
  const ConvCase& c = kConvCases[0];
  EXPECT_TRUE(gradcheck([&](const TensorList& t) { return TensorList{run_conv(t[0], t[1], t[2], c)}; },
                        {leaf({4, 5, 4}, dev(), 1), leaf(c.w, dev(), 2), leaf({6}, dev(), 3)}));
  const Tensor x = make(smooth(2 * 4 * 7 * 6, 4), c.x, dev());
  EXPECT_TRUE(gradcheck([&](const TensorList& t) { return TensorList{run_conv(x, t[0], {}, c)}; }, {leaf(c.w, dev(), 5)}));
}

TEST_P(ConvTest, Conv2dBiasGradientEveryWay) {
  // The bias gradient is grad_out summed over images and positions, whether the weight gradient's
  // pass computes it (weight and bias both asked for, no graph of the backward), the front-end sums
  // it (the bias alone), or the backward is recorded (create_graph).
  for (DType dt : {kFloat64, kFloat32, kBFloat16}) {
    uint64_t seed = 40;
    for (const ConvCase& c : kConvCases) {
      if (!c.bias) continue;
      const Tensor x = quarter_tensor(c.x, seed++, dev(), dt), w0 = quarter_tensor(c.w, seed++, dev(), dt);
      const Tensor b0 = quarter_tensor({c.w[0]}, seed++, dev(), dt);
      const Tensor g = quarter_tensor(out_shape(c.x, c.w, c), seed++, dev(), dt);
      const std::vector<double> gv = values(g);
      const int64_t plane = g.size(2) * g.size(3);
      std::vector<double> expected(static_cast<size_t>(c.w[0]), 0.0);
      for (size_t i = 0; i < gv.size(); ++i) expected[(i / static_cast<size_t>(plane)) % expected.size()] += gv[i];
      std::vector<double> weight_grad(static_cast<size_t>(numel(c.w)), 0.0);
      const std::vector<double> xv = values(x);
      conv_loops(c.x, c.w, c, [&](int64_t o, int64_t xi, int64_t wi) { weight_grad[wi] += gv[o] * xv[xi]; });
      // Sums of quarter products are exact in float32; bfloat16 rounds them once.
      const Tensor sums = make(expected, {c.w[0]}).to(dt);
      const std::string what = std::string(dtype_name(dt)) + " w " + ::testing::PrintToString(c.w);
      const Tensor w = w0.detach().requires_grad_(), b = b0.detach().requires_grad_();
      const TensorList both = autograd::grad({run_conv(x, w, b, c)}, {w, b}, {g});
      EXPECT_TRUE(all_close(both[1], sums, 0, 0)) << what << " with the weight gradient";
      EXPECT_TRUE(all_close(both[0], make(weight_grad, c.w), dt == kBFloat16 ? 1e-2 : 1e-5, 1e-4)) << what << " weight";
      const TensorList alone = autograd::grad({run_conv(x, w0, b, c)}, {b}, {g});
      EXPECT_TRUE(all_close(alone[0], sums, 0, 0)) << what << " alone";
      const TensorList recorded = autograd::grad({run_conv(x, w, b, c)}, {w, b}, {g}, std::nullopt, true);
      EXPECT_TRUE(all_close(recorded[1], sums, 0, 0)) << what << " recorded";
      EXPECT_EQ(both[1].dtype(), dt);
    }
  }
}

TEST_P(ConvTest, Conv2dSecondOrderGradients) {
  const std::vector<ConvCase> cases = {
      {{2, 4, 5, 4}, {4, 2, 2, 2}, {2, 1}, {1, 0}, {1, 2}, 2, true},
      {{1, 2, 4, 4}, {3, 2, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},
  };
  uint64_t seed = 20;
  for (const ConvCase& c : cases) {
    TensorList in{leaf(c.x, dev(), seed++), leaf(c.w, dev(), seed++)};
    if (c.bias) in.push_back(leaf({c.w[0]}, dev(), seed++));
    EXPECT_TRUE(gradgradcheck([&](const TensorList& t) { return TensorList{run_conv(t[0], t[1], c.bias ? t[2] : Tensor(), c)}; }, in))
        << "w " << ::testing::PrintToString(c.w);
  }
  // Third order through the backward ops' own backward formulas.
  const ConvCase& c = cases[0];
  const Tensor x = leaf(c.x, dev(), 30), w = leaf(c.w, dev(), 31);
  const Tensor gx = autograd::grad({(run_conv(x, w, {}, c) * run_conv(x, w, {}, c)).sum()}, {x}, {}, std::nullopt, true)[0];
  const Tensor gxx = autograd::grad({(gx * gx).sum()}, {w}, {}, std::nullopt, true)[0];
  EXPECT_EQ(gxx.sizes(), c.w);
  EXPECT_TRUE(gxx.requires_grad());
}

// ---- transposed convolution ---------------------------------------------------------------------

struct ConvTransposeCase {
  Shape x, w;  // w [in_channels, out_channels / groups, kH, kW]
  Pair stride, padding, output_padding, dilation;
  int64_t groups;
  bool bias;
};

const std::vector<ConvTransposeCase> kConvTransposeCases = {
    {{2, 4, 3, 4}, {4, 3, 3, 2}, {2, 1}, {1, 0}, {1, 0}, {1, 2}, 2, true},
    {{1, 3, 4, 4}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, true},
    {{2, 2, 3, 3}, {2, 1, 4, 4}, {2, 2}, {1, 1}, {1, 0}, {1, 1}, 2, false},  // depthwise upsampling
    {{1, 4, 3, 2}, {4, 5, 1, 1}, {3, 2}, {0, 0}, {2, 1}, {1, 1}, 1, true},   // 1x1 with strides: scattered pixels
    {{1, 2, 2, 3}, {2, 2, 3, 3}, {1, 2}, {2, 1}, {0, 1}, {2, 1}, 1, false},  // padding cropping most of the output
};

Shape transpose_out_shape(const Shape& x, const ConvTransposeCase& c) {
  auto size = [&](int i) {
    return (x[2 + i] - 1) * c.stride[i] - 2 * c.padding[i] + c.dilation[i] * (c.w[2 + i] - 1) + c.output_padding[i] + 1;
  };
  return {x[0], c.w[1] * c.groups, size(0), size(1)};
}

// Visits every (output, input, weight) index triple of the transposed convolution: each input pixel
// scatters its weighted kernel, out[n, g * og + co, ih * s - p + i * d, ...] += x[n, ci, ih, iw] *
// w[ci, co, i, j] for the group g of ci.
template <typename F>
void conv_transpose_loops(const Shape& xs, const ConvTransposeCase& c, const F& f) {
  const Shape os = transpose_out_shape(xs, c);
  const int64_t cg = xs[1] / c.groups, og = c.w[1];
  const Nchw X{xs[0], xs[1], xs[2], xs[3]}, W{c.w[0], c.w[1], c.w[2], c.w[3]}, O{os[0], os[1], os[2], os[3]};
  for (int64_t n = 0; n < X.n; ++n)
    for (int64_t ci = 0; ci < X.c; ++ci)
      for (int64_t ih = 0; ih < X.h; ++ih)
        for (int64_t iw = 0; iw < X.w; ++iw)
          for (int64_t co = 0; co < og; ++co)
            for (int64_t i = 0; i < W.h; ++i)
              for (int64_t j = 0; j < W.w; ++j) {
                const int64_t oh = ih * c.stride[0] - c.padding[0] + i * c.dilation[0];
                const int64_t ow = iw * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (oh < 0 || oh >= O.h || ow < 0 || ow >= O.w) continue;
                f(O.at(n, (ci / cg) * og + co, oh, ow), X.at(n, ci, ih, iw), W.at(ci, co, i, j));
              }
}

Tensor ref_conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvTransposeCase& c) {
  const Shape xs = x.dim() == 3 ? Shape{1, x.size(0), x.size(1), x.size(2)} : x.sizes();
  const Shape os = transpose_out_shape(xs, c);
  const auto xv = values(x), wv = values(w);
  std::vector<double> out(static_cast<size_t>(numel(os)), 0.0);
  if (bias.defined()) {
    const auto bv = values(bias);
    for (size_t i = 0; i < out.size(); ++i) out[i] = bv[(i / static_cast<size_t>(os[2] * os[3])) % os[1]];
  }
  conv_transpose_loops(xs, c, [&](int64_t o, int64_t xi, int64_t wi) { out[o] += xv[xi] * wv[wi]; });
  Tensor r = make(out, os);
  return x.dim() == 3 ? r.squeeze(0) : r;
}

Tensor run_conv_transpose(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvTransposeCase& c) {
  return conv_transpose2d(x, w, bias, {c.stride[0], c.stride[1]}, {c.padding[0], c.padding[1]},
                          {c.output_padding[0], c.output_padding[1]}, c.groups, {c.dilation[0], c.dilation[1]});
}

TEST_P(ConvTest, ConvTranspose2dForward) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    uint64_t seed = 40;
    for (const ConvTransposeCase& c : kConvTransposeCases) {
      const Tensor x = quarter_tensor(c.x, seed++, dev(), dt), w = quarter_tensor(c.w, seed++, dev(), dt);
      const Tensor b = c.bias ? quarter_tensor({c.w[1] * c.groups}, seed++, dev(), dt) : Tensor();
      const Tensor out = run_conv_transpose(x, w, b, c);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.sizes(), transpose_out_shape(c.x, c));
      const double rtol = dt == kBFloat16 ? 1e-2 : dt == kFloat16 ? 2e-3 : -1;
      EXPECT_TRUE(all_close(out, ref_conv_transpose(x, w, b, c), rtol, dt == kBFloat16 || dt == kFloat16 ? 5e-2 : -1))
          << dtype_name(dt) << " x " << ::testing::PrintToString(c.x) << " w " << ::testing::PrintToString(c.w);
    }
  }
  // Unbatched, channels-last input; one value for both dims.
  const ConvTransposeCase& c = kConvTransposeCases[0];
  const Tensor x = quarter_tensor({3, 4, 4}, 1, dev()).permute({2, 0, 1}), w = quarter_tensor(c.w, 2, dev());
  const Tensor b = quarter_tensor({6}, 3, dev());
  const Tensor out = run_conv_transpose(x, w, b, c);
  EXPECT_EQ(out.dim(), 3);
  EXPECT_TRUE(all_close(out, ref_conv_transpose(x, w, b, c)));
  const ConvTransposeCase same{{1, 4, 3, 4}, c.w, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, false};
  const Tensor x4 = quarter_tensor(same.x, 4, dev());
  EXPECT_TRUE(all_close(conv_transpose2d(x4, w, {}, {2}, {1}, {1}, 2), ref_conv_transpose(x4, w, {}, same)));
  // No images: an empty output of the right shape.
  EXPECT_EQ(run_conv_transpose(quarter_tensor({0, 4, 3, 4}, 5, dev()), w, b, c).sizes(), (Shape{0, 6, 6, 6}));
}

TEST_P(ConvTest, ConvTranspose2dGradients) {
  uint64_t seed = 60;
  for (const ConvTransposeCase& c : kConvTransposeCases) {
    TensorList in{leaf(c.x, dev(), seed++), leaf(c.w, dev(), seed++)};
    if (c.bias) in.push_back(leaf({c.w[1] * c.groups}, dev(), seed++));
    const Fn f = [&](const TensorList& t) { return TensorList{run_conv_transpose(t[0], t[1], c.bias ? t[2] : Tensor(), c)}; };
    EXPECT_TRUE(gradcheck(f, in)) << "w " << ::testing::PrintToString(c.w);
    EXPECT_TRUE(gradgradcheck(f, in)) << "w " << ::testing::PrintToString(c.w);
  }
  // Both gradients against the loops, on an input large enough for the threaded kernels.
  const ConvTransposeCase c{{4, 8, 8, 8}, {8, 4, 3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, true};
  const Tensor x = quarter_tensor(c.x, 1, dev()).requires_grad_(), w = quarter_tensor(c.w, 2, dev()).requires_grad_();
  const Tensor b = quarter_tensor({8}, 3, dev()).requires_grad_();
  const Tensor out = run_conv_transpose(x, w, b, c);
  EXPECT_TRUE(all_close(out, ref_conv_transpose(x, w, b, c)));
  const Tensor g = quarter_tensor(out.sizes(), 4, dev());
  out.backward(g);
  const auto gv = values(g), xv = values(x), wv = values(w);
  std::vector<double> gx(xv.size(), 0.0), gw(wv.size(), 0.0), gb(8, 0.0);
  conv_transpose_loops(c.x, c, [&](int64_t o, int64_t xi, int64_t wi) {
    gx[xi] += gv[o] * wv[wi];
    gw[wi] += gv[o] * xv[xi];
  });
  const int64_t plane = out.size(2) * out.size(3);
  for (size_t i = 0; i < gv.size(); ++i) gb[(static_cast<int64_t>(i) / plane) % 8] += gv[i];
  EXPECT_TRUE(all_close(x.grad(), make(gx, c.x)));
  EXPECT_TRUE(all_close(w.grad(), make(gw, c.w)));
  EXPECT_TRUE(all_close(b.grad(), make(gb, {8})));
}

TEST_P(ConvTest, ConvTranspose2dErrors) {
  const Tensor x = quarter_tensor({1, 4, 3, 3}, 1, dev()), w = quarter_tensor({4, 3, 3, 3}, 2, dev());
  const auto convt = [&](const Tensor& a, const Tensor& b, const Tensor& bias = {}, const Shape& s = {2, 2},
                         const Shape& p = {0, 0}, const Shape& op = {0, 0}, int64_t g = 2, const Shape& d = {1, 1}) {
    return conv_transpose2d(a, b, bias, s, p, op, g, d);
  };
  EXPECT_TRUE(throws<ShapeError>([&] { convt(quarter_tensor({4, 3}, 3, dev()), w); },
                                 "[conv_transpose2d] expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape [4, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { convt(x, quarter_tensor({4, 3, 3}, 3, dev())); },
                                 "[conv_transpose2d] expected a 4-d weight (in_channels, out_channels / groups, kH, kW), got shape [4, 3, 3]"));
  EXPECT_TRUE(throws<DTypeError>([&] { convt(x, w.to(kFloat32)); },
                                 "[conv_transpose2d] input (float64) and weight (float32) must have the same dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { convt(x, quarter_tensor({3, 3, 3, 3}, 3, dev())); },
                                 "[conv_transpose2d] weight of shape [3, 3, 3, 3] expects 3 input channels, but the input of shape [1, 4, 3, 3] has 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { convt(x, w, {}, {2, 2}, {0, 0}, {0, 0}, 3); },
                                 "[conv_transpose2d] input channels 4 (input shape [1, 4, 3, 3]) are not divisible by groups 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { convt(x, w, quarter_tensor({3}, 3, dev())); },
                                 "[conv_transpose2d] expected a bias of shape [6] (out_channels), got [3]"));
  EXPECT_TRUE(throws<ValueError>([&] { convt(x, w, {}, {2, 0}); }, "[conv_transpose2d] stride must be positive, got [2, 0]"));
  EXPECT_TRUE(throws<ValueError>([&] { convt(x, w, {}, {2, 2}, {0, 0}, {2, 0}); },
                                 "[conv_transpose2d] output_padding [2, 0] must be nonnegative and smaller than stride [2, 2]"));
  EXPECT_TRUE(throws<ValueError>([&] { convt(x, w, {}, {2, 2}, {0, 0}, {0, 0, 0}); },
                                 "[conv_transpose2d] output_padding must have 1 or 2 values, got [0, 0, 0]"));
  EXPECT_TRUE(throws<ShapeError>([&] { convt(quarter_tensor({1, 4, 1, 1}, 3, dev()), w, {}, {1, 1}, {2, 2}); },
                                 "[conv_transpose2d] the output size [-1, -1] is too small: input shape [1, 4, 1, 1], weight shape [4, 3, 3, 3]"));
  EXPECT_TRUE(throws<ValueError>([&] { convt(x, Tensor()); }, "[conv_transpose2d] weight is an undefined tensor"));
}

// ---- pooling references -------------------------------------------------------------------------

// PyTorch's pooling output size.
int64_t pool_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = static_cast<int64_t>(std::floor(static_cast<double>(span) / static_cast<double>(s))) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct PoolCase {
  Shape x;
  Pair k, s, p, d;
  bool ceil_mode;
};

const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 6, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {{1, 2, 5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
    {{2, 2, 7, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 1}, false},
    {{1, 3, 5, 8}, {2, 3}, {3, 2}, {0, 1}, {1, 1}, true},
    {{1, 2, 9, 9}, {3, 3}, {2, 3}, {1, 0}, {2, 1}, true},  // dilation (max pooling only)
};

// Max pooling in loops: values and the first max's h * W + w index (NaN wins, like PyTorch).
std::pair<Tensor, Tensor> ref_max_pool(const Tensor& x, const PoolCase& c) {
  const Shape& xs = x.sizes();
  const Nchw X{xs[0], xs[1], xs[2], xs[3]};
  const int64_t oh = pool_size(X.h, c.k[0], c.s[0], c.p[0], c.d[0], c.ceil_mode);
  const int64_t ow = pool_size(X.w, c.k[1], c.s[1], c.p[1], c.d[1], c.ceil_mode);
  const auto xv = values(x);
  std::vector<double> out, idx;
  for (int64_t n = 0; n < X.n; ++n)
    for (int64_t ch = 0; ch < X.c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t at = -1;
          for (int64_t a = 0; a < c.k[0]; ++a)
            for (int64_t b = 0; b < c.k[1]; ++b) {
              const int64_t h = i * c.s[0] - c.p[0] + a * c.d[0], w = j * c.s[1] - c.p[1] + b * c.d[1];
              if (h < 0 || h >= X.h || w < 0 || w >= X.w) continue;
              const double v = xv[X.at(n, ch, h, w)];
              if (at < 0 || v > best || std::isnan(v)) {
                best = v;
                at = h * X.w + w;
              }
            }
          out.push_back(best);
          idx.push_back(static_cast<double>(at));
        }
  return {make(out, {X.n, X.c, oh, ow}), make(idx, {X.n, X.c, oh, ow})};
}

// Average pooling in loops with PyTorch's divisor rules.
Tensor ref_avg_pool(const Tensor& x, const PoolCase& c, bool count_include_pad) {
  const Shape& xs = x.sizes();
  const Nchw X{xs[0], xs[1], xs[2], xs[3]};
  const int64_t oh = pool_size(X.h, c.k[0], c.s[0], c.p[0], 1, c.ceil_mode);
  const int64_t ow = pool_size(X.w, c.k[1], c.s[1], c.p[1], 1, c.ceil_mode);
  const auto xv = values(x);
  std::vector<double> out;
  for (int64_t n = 0; n < X.n; ++n)
    for (int64_t ch = 0; ch < X.c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          // Window cells inside the padded input count for count_include_pad; cells inside the input hold values.
          double sum = 0;
          int64_t padded = 0, inside = 0;
          for (int64_t a = 0; a < c.k[0]; ++a)
            for (int64_t b = 0; b < c.k[1]; ++b) {
              const int64_t h = i * c.s[0] - c.p[0] + a, w = j * c.s[1] - c.p[1] + b;
              if (h >= X.h + c.p[0] || w >= X.w + c.p[1]) continue;
              ++padded;
              if (h < 0 || h >= X.h || w < 0 || w >= X.w) continue;
              ++inside;
              sum += xv[X.at(n, ch, h, w)];
            }
          out.push_back(inside == 0 ? 0.0 : sum / static_cast<double>(count_include_pad ? padded : inside));
        }
  return make(out, {X.n, X.c, oh, ow});
}

Tensor ref_adaptive(const Tensor& x, int64_t oh, int64_t ow) {
  const Shape& xs = x.sizes();
  const Nchw X{xs[0], xs[1], xs[2], xs[3]};
  const auto xv = values(x);
  std::vector<double> out;
  for (int64_t n = 0; n < X.n; ++n)
    for (int64_t ch = 0; ch < X.c; ++ch)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const auto h0 = static_cast<int64_t>(std::floor(static_cast<double>(i * X.h) / static_cast<double>(oh)));
          const auto h1 = static_cast<int64_t>(std::ceil(static_cast<double>((i + 1) * X.h) / static_cast<double>(oh)));
          const auto w0 = static_cast<int64_t>(std::floor(static_cast<double>(j * X.w) / static_cast<double>(ow)));
          const auto w1 = static_cast<int64_t>(std::ceil(static_cast<double>((j + 1) * X.w) / static_cast<double>(ow)));
          double sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += xv[X.at(n, ch, h, w)];
          out.push_back(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
  return make(out, {X.n, X.c, oh, ow});
}

Shape pair_shape(const Pair& p) { return {p[0], p[1]}; }

ValuesIndices run_max_pool(const Tensor& x, const PoolCase& c) {
  return max_pool2d_with_indices(x, pair_shape(c.k), pair_shape(c.s), pair_shape(c.p), pair_shape(c.d), c.ceil_mode);
}

Tensor run_avg_pool(const Tensor& x, const PoolCase& c, bool count_include_pad) {
  return avg_pool2d(x, pair_shape(c.k), pair_shape(c.s), pair_shape(c.p), c.ceil_mode, count_include_pad);
}

// ---- pooling forward ----------------------------------------------------------------------------

TEST_P(ConvTest, MaxPool2d) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64}) {
    uint64_t seed = 1;
    for (const PoolCase& c : kPoolCases) {
      const Tensor x = quarter_tensor(c.x, seed++, dev(), dt);
      const auto [ev, ei] = ref_max_pool(x, c);
      const auto [v, i] = run_max_pool(x, c);
      EXPECT_EQ(v.dtype(), dt);
      EXPECT_EQ(i.dtype(), kInt64);
      EXPECT_TRUE(all_close(v, ev)) << dtype_name(dt) << " " << ::testing::PrintToString(c.x);
      EXPECT_TRUE(all_close(i, ei)) << dtype_name(dt) << " " << ::testing::PrintToString(c.x);
      EXPECT_TRUE(all_close(max_pool2d(x, pair_shape(c.k), pair_shape(c.s), pair_shape(c.p), pair_shape(c.d), c.ceil_mode), ev));
    }
  }
  // Default stride (the kernel size), unbatched input, a channels-last input.
  const Tensor x = quarter_tensor({3, 6, 7}, 7, dev());
  const auto [v3, i3] = max_pool2d_with_indices(x, {2});
  EXPECT_EQ(v3.sizes(), (Shape{3, 3, 3}));
  EXPECT_EQ(i3.sizes(), (Shape{3, 3, 3}));
  const PoolCase c0{{1, 3, 6, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false};
  EXPECT_TRUE(all_close(v3, ref_max_pool(x.unsqueeze(0), c0).first.squeeze(0)));
  const Tensor xc = quarter_tensor({2, 6, 7, 3}, 8, dev()).permute({0, 3, 1, 2});
  EXPECT_TRUE(all_close(max_pool2d(xc, {2}), ref_max_pool(xc, {{2, 3, 6, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false}).first));
  // NaN propagates and its position is the index.
  std::vector<double> v(16, 1.0);
  v[5] = std::numeric_limits<double>::quiet_NaN();
  const auto [nv, ni] = max_pool2d_with_indices(make(v, {1, 1, 4, 4}, dev()), {2});
  EXPECT_TRUE(std::isnan(values(nv)[0]));
  EXPECT_EQ(values(ni)[0], 5.0);
  // Dilation can leave a window with no input element: -inf, index -1, no gradient.
  const Tensor e = make({1, 2, 3, 4}, {1, 1, 2, 2}, dev()).requires_grad_();
  const auto [empty_v, empty_i] = max_pool2d_with_indices(e, {2}, {1}, {1}, {3});
  EXPECT_EQ(values(empty_v), std::vector<double>{-std::numeric_limits<double>::infinity()});
  EXPECT_EQ(values(empty_i), std::vector<double>{-1.0});
  empty_v.sum().backward();
  EXPECT_EQ(values(e.grad()), std::vector<double>(4, 0.0));
  // ceil_mode: a 5-wide input with kernel 2 gives 3 windows instead of 2.
  EXPECT_EQ(max_pool2d(quarter_tensor({1, 1, 5, 5}, 9, dev()), {2}, {2}, {0}, {1}, true).sizes(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(max_pool2d(quarter_tensor({1, 1, 5, 5}, 9, dev()), {2}).sizes(), (Shape{1, 1, 2, 2}));
}

TEST_P(ConvTest, AvgPool2d) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    uint64_t seed = 1;
    for (const PoolCase& c : kPoolCases) {
      if (c.d[0] != 1 || c.d[1] != 1) continue;
      const Tensor x = quarter_tensor(c.x, seed++, dev(), dt);
      for (bool include : {true, false})
        EXPECT_TRUE(all_close(run_avg_pool(x, c, include), ref_avg_pool(x, c, include), dt == kBFloat16 ? 1e-2 : -1))
            << dtype_name(dt) << " " << ::testing::PrintToString(c.x) << " count_include_pad " << include;
    }
  }
  // Hand-computed: means of 2x2 blocks of 1..16; padding with and without counting the pad.
  std::vector<double> v(16);
  std::iota(v.begin(), v.end(), 1.0);
  EXPECT_TRUE(all_close(avg_pool2d(make(v, {1, 4, 4}, dev()), {2}), make({3.5, 5.5, 11.5, 13.5}, {1, 2, 2})));
  const Tensor ones9 = ones({1, 1, 3, 3}, TensorOptions(kFloat64, dev()));
  EXPECT_TRUE(all_close(avg_pool2d(ones9, {2}, {2}, {1}, false, true), make({0.25, 0.5, 0.5, 1.0}, {1, 1, 2, 2})));
  EXPECT_TRUE(all_close(avg_pool2d(ones9, {2}, {2}, {1}, false, false), make({1, 1, 1, 1}, {1, 1, 2, 2})));
  // ceil_mode windows that run past the input (and its padding) average what they cover.
  EXPECT_TRUE(all_close(avg_pool2d(ones({1, 1, 5, 5}, TensorOptions(kFloat64, dev())), {2}, {2}, {0}, true),
                        ones({1, 1, 3, 3}, TensorOptions(kFloat64))));
}

TEST_P(ConvTest, AdaptiveAvgPool2d) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    const Tensor x = quarter_tensor({2, 3, 5, 7}, 1, dev(), dt);
    for (const Pair& o : {Pair{3, 4}, Pair{1, 1}, Pair{5, 7}, Pair{2, 3}, Pair{7, 9}})
      EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, {o[0], o[1]}), ref_adaptive(x, o[0], o[1]), dt == kBFloat16 ? 1e-2 : -1))
          << dtype_name(dt) << " " << o[0] << "x" << o[1];
  }
  // Windows [0, 2), [1, 4), [3, 5) of 0..4; a single value means both sizes; unbatched input.
  const Tensor r = make({0, 1, 2, 3, 4}, {1, 1, 5}, dev());
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(r, {1, 3}), make({0.5, 2.0, 3.5}, {1, 1, 3})));
  EXPECT_EQ(adaptive_avg_pool2d(quarter_tensor({1, 2, 6, 6}, 2, dev()), {2}).sizes(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(adaptive_avg_pool2d(quarter_tensor({2, 6, 6}, 3, dev()), {0, 2}).sizes(), (Shape{2, 0, 2}));
}

// ---- pooling gradients --------------------------------------------------------------------------

TEST_P(ConvTest, PoolGradients) {
  uint64_t seed = 40;
  for (const PoolCase& c : kPoolCases) {
    const Tensor x = leaf(c.x, dev(), seed++);
    EXPECT_TRUE(gradcheck([&](const TensorList& t) { return TensorList{run_max_pool(t[0], c).values}; }, {x}))
        << "max " << ::testing::PrintToString(c.x);
    if (c.d[0] != 1 || c.d[1] != 1) continue;
    for (bool include : {true, false})
      EXPECT_TRUE(gradcheck([&](const TensorList& t) { return TensorList{run_avg_pool(t[0], c, include)}; }, {x}))
          << "avg " << ::testing::PrintToString(c.x);
  }
  // Overlapping max windows send one gradient to a shared maximum twice.
  const Tensor y = make({0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 1, 3, 3}, dev()).requires_grad_();
  max_pool2d(y, {2}, {1}).sum().backward();
  EXPECT_EQ(values(y.grad())[4], 4.0);
  const Tensor z = leaf({2, 2, 5, 7}, dev(), 50);
  for (const Pair& o : {Pair{3, 4}, Pair{2, 2}, Pair{7, 9}})
    EXPECT_TRUE(gradcheck([&](const TensorList& t) { return TensorList{adaptive_avg_pool2d(t[0], {o[0], o[1]})}; }, {z}));
  EXPECT_TRUE(gradcheck([](const TensorList& t) { return TensorList{avg_pool2d(t[0], {3}, {2}, {1}, true, false)}; },
                        {leaf({2, 5, 6}, dev(), 51)}));
}

TEST_P(ConvTest, PoolSecondOrderGradients) {
  const PoolCase& c = kPoolCases[1];
  // Pooling is piecewise linear: second derivatives vanish, and the backward ops are differentiable
  // in the incoming gradient (checked through a nonlinear use of the first gradient).
  const auto square = [](const Tensor& t) { return t * t; };
  EXPECT_TRUE(gradgradcheck([&](const TensorList& t) { return TensorList{square(run_max_pool(t[0], c).values)}; },
                            {leaf(c.x, dev(), 60)}));
  EXPECT_TRUE(gradgradcheck([&](const TensorList& t) { return TensorList{square(run_avg_pool(t[0], c, false))}; },
                            {leaf(c.x, dev(), 61)}));
  EXPECT_TRUE(gradgradcheck([&](const TensorList& t) { return TensorList{square(adaptive_avg_pool2d(t[0], {3, 2}))}; },
                            {leaf({1, 2, 5, 4}, dev(), 62)}));
}

TEST_P(ConvTest, SixteenBitGradients) {
  const ConvCase& c = kConvCases[0];
  const PoolCase& pc = kPoolCases[1];
  // Every op's gradients in dt against the same computation in float64 (inputs exact in dt).
  const auto grads = [&](DType dt) {
    const Tensor x = quarter_tensor(c.x, 1, dev(), dt).requires_grad_(), w = quarter_tensor(c.w, 2, dev(), dt).requires_grad_();
    const Tensor p = quarter_tensor(pc.x, 3, dev(), dt).requires_grad_();
    const Tensor loss = run_conv(x, w, {}, c).sum() + run_max_pool(p, pc).values.sum() + run_avg_pool(p, pc, false).sum() +
                        adaptive_avg_pool2d(p, {2, 3}).sum();
    loss.backward();
    return TensorList{x.grad(), w.grad(), p.grad()};
  };
  const TensorList expected = grads(kFloat64);
  for (DType dt : {kFloat16, kBFloat16}) {
    const TensorList actual = grads(dt);
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].dtype(), dt);
      EXPECT_TRUE(all_close(actual[i], expected[i], 1e-2, 1e-1)) << dtype_name(dt) << " gradient " << i;
    }
  }
}

// ---- library convolutions: precision, determinism; pooling kernels at scale -------------------

TEST_P(ConvTest, Conv2dFloat32Precision) {
  // x is 1 + 2^-14 everywhere: exact in float32, read as 1 by TF32 (a relative error of 6e-5).
  const ConvCase c{{2, 16, 10, 10}, {8, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false};
  const Tensor x = full(c.x, 1.0 + std::ldexp(1.0, -14), TensorOptions(kFloat32, dev()));
  const Tensor w = ones(c.w, TensorOptions(kFloat32, dev()));
  const Tensor expected = ref_conv(x, w, {}, c);
  EXPECT_TRUE(all_close(run_conv(x, w, {}, c), expected, 2e-6, 0.0)) << "float32 must not use TF32 by default";
  Float32PrecisionGuard guard("high");
  EXPECT_TRUE(all_close(run_conv(x, w, {}, c), expected, 1e-3, 0.0));
}

TEST_P(ConvTest, Conv2dSixteenBitLarger) {
  const ConvCase c{{2, 32, 12, 12}, {32, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, true};
  for (DType dt : {kFloat16, kBFloat16}) {
    const Tensor x = quarter_tensor(c.x, 1, dev(), dt), w = quarter_tensor(c.w, 2, dev(), dt), b = quarter_tensor({32}, 3, dev(), dt);
    const Tensor out = run_conv(x, w, b, c);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_TRUE(all_close(out, ref_conv(x, w, b, c), dt == kBFloat16 ? 1e-2 : 2e-3, 5e-2)) << dtype_name(dt);
  }
}

TEST_P(ConvTest, Conv2dDeterministicMode) {
  DeterministicGuard deterministic;
  const ConvCase c{{4, 8, 12, 12}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    // Forward and both gradients, three times: bitwise equal every time.
    const auto run = [&] {
      const Tensor x = make(smooth(numel(c.x), 1), c.x, dev(), dt).requires_grad_();
      const Tensor w = make(smooth(numel(c.w), 2), c.w, dev(), dt).requires_grad_();
      const Tensor b = make(smooth(16, 3), {16}, dev(), dt).requires_grad_();
      const Tensor out = run_conv(x, w, b, c);
      out.backward(make(smooth(out.numel(), 4), out.sizes(), dev(), dt));
      return std::vector<std::vector<double>>{values(out), values(x.grad()), values(w.grad()), values(b.grad())};
    };
    const auto first = run();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(run(), first) << dtype_name(dt);
    }
  }
}

TEST_P(ConvTest, MaxPool2dBackwardOverlappingWindows) {
  // Many ties and heavily overlapping windows: the gradient of every input is the sum of the output
  // gradients whose max it is (exact here: sums of multiples of 0.25), the same on every run.
  const std::vector<PoolCase> cases = {{{3, 4, 17, 19}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
                                       {{2, 3, 20, 21}, {4, 3}, {2, 1}, {2, 1}, {2, 2}, true}};
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    uint64_t seed = 70;
    for (const PoolCase& c : cases) {
      const Tensor x = quarter_tensor(c.x, seed++, dev(), dt);
      const auto [ev, ei] = ref_max_pool(x, c);
      const Tensor g = quarter_tensor(ev.sizes(), seed++, dev(), dt);
      const auto gv = values(g), iv = values(ei);
      const int64_t plane_out = ev.size(2) * ev.size(3), plane_in = c.x[2] * c.x[3];
      std::vector<double> expected(static_cast<size_t>(numel(c.x)), 0.0);
      for (size_t i = 0; i < gv.size(); ++i)
        if (iv[i] >= 0) expected[static_cast<size_t>(static_cast<int64_t>(i) / plane_out * plane_in + static_cast<int64_t>(iv[i]))] += gv[i];
      std::vector<double> first;
      for (int run = 0; run < 2; ++run) {
        const Tensor leaf_x = x.detach().requires_grad_();
        run_max_pool(leaf_x, c).values.backward(g);
        EXPECT_TRUE(all_close(leaf_x.grad(), make(expected, c.x), 0.0, 0.0)) << dtype_name(dt);
        if (run == 0) {
          first = values(leaf_x.grad());
        } else {
          EXPECT_EQ(values(leaf_x.grad()), first) << dtype_name(dt);
        }
      }
    }
  }
}

TEST_P(ConvTest, AveragePoolsLargeWindows) {
  // Windows large enough for a warp per output; gradients checked as the adjoint of the forward:
  // <pool(x), g> = <x, pool_backward(g)>.
  const Tensor x = quarter_tensor({2, 3, 40, 70}, 80, dev(), kFloat32);
  for (const Pair& o : {Pair{1, 1}, Pair{3, 4}, Pair{2, 70}, Pair{41, 3}})
    EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, {o[0], o[1]}), ref_adaptive(x, o[0], o[1]))) << o[0] << "x" << o[1];
  const PoolCase c{{2, 3, 40, 70}, {9, 9}, {3, 4}, {4, 3}, {1, 1}, true};
  for (bool include : {true, false})
    EXPECT_TRUE(all_close(run_avg_pool(x, c, include), ref_avg_pool(x, c, include))) << include;
  const Tensor x64 = make(smooth(2 * 3 * 40 * 70, 81), {2, 3, 40, 70}, dev()).requires_grad_();
  const std::vector<std::function<Tensor(const Tensor&)>> pools = {
      [](const Tensor& t) { return adaptive_avg_pool2d(t, {1, 1}); },
      [](const Tensor& t) { return adaptive_avg_pool2d(t, {3, 4}); },
      [](const Tensor& t) { return adaptive_avg_pool2d(t, {41, 3}); },
      [&](const Tensor& t) { return run_avg_pool(t, c, true); },
      [&](const Tensor& t) { return run_avg_pool(t, c, false); },
  };
  for (size_t i = 0; i < pools.size(); ++i) {
    const Tensor y = pools[i](x64);
    const Tensor g = make(smooth(y.numel(), 90 + i), y.sizes(), dev());
    const Tensor gx = autograd::grad({(y * g).sum()}, {x64})[0];
    const double lhs = (y * g).sum().item<double>(), rhs = (x64 * gx).sum().item<double>();
    EXPECT_NEAR(lhs, rhs, 1e-9 * (1.0 + std::fabs(lhs))) << "pool " << i;
  }
}

// ---- errors -------------------------------------------------------------------------------------

TEST_P(ConvTest, Conv2dErrors) {
  const Tensor x = quarter_tensor({1, 4, 5, 5}, 1, dev()), w = quarter_tensor({6, 2, 3, 3}, 2, dev());
  const auto conv = [&](const Tensor& a, const Tensor& b, const Tensor& bias = {}, const Shape& s = {1, 1},
                        const Shape& p = {0, 0}, const Shape& d = {1, 1}, int64_t g = 2) {
    return conv2d(a, b, bias, s, p, d, g);
  };
  EXPECT_TRUE(throws<ShapeError>([&] { conv(quarter_tensor({4, 5}, 3, dev()), w); },
                                 "[conv2d] expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape [4, 5]"));
  EXPECT_TRUE(throws<ShapeError>([&] { conv(x, quarter_tensor({6, 2, 3}, 3, dev())); },
                                 "[conv2d] expected a 4-d weight (out_channels, in_channels / groups, kH, kW), got shape [6, 2, 3]"));
  EXPECT_TRUE(throws<DTypeError>([&] { conv(x.to(kInt64), w.to(kInt64)); }, "[conv2d] expected a floating point input, got int64"));
  EXPECT_TRUE(throws<DTypeError>([&] { conv(x, w.to(kFloat32)); }, "[conv2d] input (float64) and weight (float32) must have the same dtype"));
  EXPECT_TRUE(throws<DTypeError>([&] { conv(x, w, quarter_tensor({6}, 3, dev(), kFloat32)); },
                                 "[conv2d] input (float64) and bias (float32) must have the same dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { conv(x, w, quarter_tensor({5}, 3, dev())); }, "[conv2d] expected a bias of shape [6] (out_channels), got [5]"));
  EXPECT_TRUE(throws<ValueError>([&] { conv(x, w, {}, {0, 1}); }, "[conv2d] stride must be positive, got [0, 1]"));
  EXPECT_TRUE(throws<ValueError>([&] { conv(x, w, {}, {1, 1}, {0, 0}, {1, 0}); }, "[conv2d] dilation must be positive, got [1, 0]"));
  EXPECT_TRUE(throws<ValueError>([&] { conv(x, w, {}, {1, 1}, {-1, 0}); }, "[conv2d] padding must be nonnegative, got [-1, 0]"));
  EXPECT_TRUE(throws<ValueError>([&] { conv(x, w, {}, {1, 1, 1}); }, "[conv2d] stride must have 1 or 2 values, got [1, 1, 1]"));
  EXPECT_TRUE(throws<ValueError>([&] { conv(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 0); }, "[conv2d] groups must be positive, got 0"));
  EXPECT_TRUE(throws<ShapeError>([&] { conv(quarter_tensor({1, 5, 5, 5}, 3, dev()), w); },
                                 "[conv2d] input channels 5 (input shape [1, 5, 5, 5]) are not divisible by groups 2"));
  EXPECT_TRUE(throws<ShapeError>([&] { conv(x, quarter_tensor({5, 2, 3, 3}, 3, dev())); },
                                 "[conv2d] out_channels 5 (weight shape [5, 2, 3, 3]) are not divisible by groups 2"));
  EXPECT_TRUE(throws<ShapeError>([&] { conv(x, quarter_tensor({6, 3, 3, 3}, 3, dev()), {}, {1, 1}, {0, 0}, {1, 1}, 1); },
                                 "[conv2d] weight of shape [6, 3, 3, 3] expects 3 input channels (3 per group x 1 groups), "
                                 "but the input of shape [1, 4, 5, 5] has 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { conv(x, quarter_tensor({6, 2, 3, 3}, 3, dev()), {}, {1, 1}, {0, 0}, {3, 1}); },
                                 "[conv2d] the kernel of (dilated) size [7, 3] is larger than the padded input of size [5, 5]"));
  EXPECT_TRUE(throws<ValueError>([&] { conv(x, Tensor()); }, "[conv2d] weight is an undefined tensor"));
}

TEST_P(ConvTest, PoolErrors) {
  const Tensor x = quarter_tensor({1, 2, 5, 5}, 1, dev());
  EXPECT_TRUE(throws<ValueError>([&] { max_pool2d(x, {0, 2}); }, "[max_pool2d] kernel_size must be positive, got [0, 2]"));
  EXPECT_TRUE(throws<ValueError>([&] { max_pool2d(x, {2}, {2, 0}); }, "[max_pool2d] stride must be positive, got [2, 0]"));
  EXPECT_TRUE(throws<ValueError>([&] { max_pool2d(x, {2}, {}, {0}, {0}); }, "[max_pool2d] dilation must be positive, got [0, 0]"));
  EXPECT_TRUE(throws<ValueError>([&] { avg_pool2d(x, {2}, {}, {-1}); }, "[avg_pool2d] padding must be nonnegative, got [-1, -1]"));
  EXPECT_TRUE(throws<ValueError>([&] { max_pool2d(x, {3}, {1}, {2}); },
                                 "[max_pool2d] padding [2, 2] must be at most half of kernel_size [3, 3]"));
  EXPECT_TRUE(throws<ValueError>([&] { avg_pool2d(x, {2, 2, 2}); }, "[avg_pool2d] kernel_size must have 1 or 2 values, got [2, 2, 2]"));
  EXPECT_TRUE(throws<ShapeError>([&] { max_pool2d(quarter_tensor({1, 1, 2, 2}, 2, dev()), {3}); },
                                 "[max_pool2d] the output size [0, 0] is too small: input shape [1, 1, 2, 2], kernel_size [3, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { avg_pool2d(quarter_tensor({1, 6, 2}, 2, dev()), {3}); }, "[avg_pool2d] the output size [2, 0] is too small"));
  EXPECT_TRUE(throws<ShapeError>([&] { avg_pool2d(quarter_tensor({4}, 2, dev()), {2}); },
                                 "[avg_pool2d] expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape [4]"));
  EXPECT_TRUE(throws<ShapeError>([&] { max_pool2d(quarter_tensor({1, 2, 0, 4}, 2, dev()), {2}); },
                                 "[max_pool2d] expected nonzero channel and spatial sizes, got input shape [1, 2, 0, 4]"));
  EXPECT_TRUE(throws<DTypeError>([&] { avg_pool2d(x.to(kInt64), {2}); }, "[avg_pool2d] expected a floating point input, got int64"));
  EXPECT_TRUE(throws<DTypeError>([&] { max_pool2d(x.to(kBool), {2}); }, "[max_pool2d] not supported for bool tensors"));
  EXPECT_TRUE(throws<ValueError>([&] { adaptive_avg_pool2d(x, {-1, 2}); }, "[adaptive_avg_pool2d] output_size must be nonnegative, got [-1, 2]"));
  EXPECT_TRUE(throws<ValueError>([&] { adaptive_avg_pool2d(x, {1, 2, 3}); }, "[adaptive_avg_pool2d] output_size must have 1 or 2 values"));
  EXPECT_TRUE(throws<ShapeError>([&] { adaptive_avg_pool2d(quarter_tensor({1, 2, 0, 3}, 2, dev()), {2}); },
                                 "[adaptive_avg_pool2d] expected nonzero channel and spatial sizes, got input shape [1, 2, 0, 3]"));
  EXPECT_TRUE(throws<DTypeError>([&] { adaptive_avg_pool2d(x.to(kInt32), {2}); }, "[adaptive_avg_pool2d] expected a floating point input, got int32"));
  EXPECT_TRUE(throws<ValueError>([&] { max_pool2d(Tensor(), {2}); }, "[max_pool2d] input is an undefined tensor"));
}

TEST_P(ConvTest, DeviceMismatch) {
  if (dev().is_cpu()) GTEST_SKIP() << "needs a second device";
  EXPECT_TRUE(throws<DeviceError>([&] { conv2d(quarter_tensor({1, 2, 4, 4}, 1, dev()), quarter_tensor({2, 2, 3, 3}, 2, Device(kCPU))); },
                                  "[conv2d] expected all tensors on one device"));
}

}  // namespace
}  // namespace rtx::testing
