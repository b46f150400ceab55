// Tests of the neural-network functions against naive float64 loops: softmax and log_softmax over
// every dim (contiguous and transposed, 0-d and zero-size, extreme magnitudes), layer_norm with and
// without affine parameters over one and several dims, batch_norm in training and evaluation mode with
// the running statistics checked numerically, embedding with padding_idx and repeated indices, dropout
// statistics and seeding, one_hot; 16-bit float forwards; first and second order gradients; errors.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class NnTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(NnTest);

// ---- data and references ----------------------------------------------------------------------

struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
};
AroundDim around(const Shape& shape, int64_t dim) {
  AroundDim a;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < dim)
      a.outer *= shape[i];
    else if (i == dim)
      a.n = shape[i];
    else
      a.inner *= shape[i];
  }
  return a;
}

std::vector<double> ref_softmax(const std::vector<double>& x, const Shape& shape, int64_t dim, bool log) {
  const AroundDim a = around(shape, dim);
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t i = 0; i < a.inner; ++i) {
      auto at = [&](int64_t j) { return o * a.n * a.inner + j * a.inner + i; };
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t j = 0; j < a.n; ++j) m = std::max(m, x[at(j)]);
      for (int64_t j = 0; j < a.n; ++j) s += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < a.n; ++j) out[at(j)] = log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  }
  return out;
}

// x normalized over its trailing `n` elements per row, then scaled and shifted (when given).
std::vector<double> ref_layer_norm(const std::vector<double>& x, int64_t n, const std::vector<double>& w,
                                   const std::vector<double>& b, double eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mu += x[r * n + j];
    mu /= n;
    for (int64_t j = 0; j < n; ++j) var += (x[r * n + j] - mu) * (x[r * n + j] - mu);
    var /= n;
    for (int64_t j = 0; j < n; ++j) {
      double y = (x[r * n + j] - mu) / std::sqrt(var + eps);
      if (!w.empty()) y *= w[j];
      if (!b.empty()) y += b[j];
      out[r * n + j] = y;
    }
  }
  return out;
}

// Per-channel mean and biased variance of x [batch, channels, spatial].
struct ChannelStats {
  std::vector<double> mean, var;
};
ChannelStats ref_channel_stats(const std::vector<double>& x, int64_t batch, int64_t channels, int64_t spatial) {
  ChannelStats st{std::vector<double>(channels, 0.0), std::vector<double>(channels, 0.0)};
  const double count = static_cast<double>(batch * spatial);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < spatial; ++s) st.mean[c] += x[(b * channels + c) * spatial + s] / count;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < spatial; ++s) {
        const double d = x[(b * channels + c) * spatial + s] - st.mean[c];
        st.var[c] += d * d / count;
      }
  }
  return st;
}

std::vector<double> ref_batch_norm(const std::vector<double>& x, int64_t batch, int64_t channels, int64_t spatial,
                                   const ChannelStats& st, const std::vector<double>& w, const std::vector<double>& b,
                                   double eps) {
  std::vector<double> out(x.size());
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t i = (n * channels + c) * spatial + s;
        out[i] = (x[i] - st.mean[c]) / std::sqrt(st.var[c] + eps) * w[c] + b[c];
      }
  return out;
}

// ---- softmax ----------------------------------------------------------------------------------

TEST_P(NnTest, SoftmaxMatchesReferenceOverEveryDim) {
  const Shape shape{2, 3, 4};
  const std::vector<double> v = irregular(24);
  const Tensor x = make(v, shape, dev());
  // The same logical values through a transposed (non-contiguous) layout.
  const Tensor xt = make(values(x.permute({2, 1, 0})), {4, 3, 2}, dev()).permute({2, 1, 0});
  ASSERT_FALSE(xt.is_contiguous());
  for (bool log : {false, true}) {
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const Tensor expected = make(ref_softmax(v, shape, d, log), shape);
      for (const Tensor& in : {x, xt}) {
        const Tensor y = log ? log_softmax(in, dim) : softmax(in, dim);
        EXPECT_TRUE(y.is_contiguous());
        EXPECT_TRUE(all_close(y, expected)) << "log " << log << " dim " << dim;
      }
    }
  }
  EXPECT_TRUE(all_close(x.softmax(1), softmax(x, 1), 0, 0));
}

TEST_P(NnTest, SoftmaxLowPrecisionMatchesFloat64) {
  const Shape shape{3, 5, 7};
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor x = make(irregular(105, 0.5), shape, dev(), dt);
    const std::vector<double> xv = values(x);  // the rounded inputs
    for (int64_t dim : {0, 1, 2}) {
      for (bool log : {false, true}) {
        const Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
        EXPECT_EQ(y.dtype(), dt);
        // log_softmax of values near 0 needs an absolute tolerance of one rounding of its magnitude.
        const double atol = log ? 8 * default_rtol(dt) : -1;
        EXPECT_TRUE(all_close(y, make(ref_softmax(xv, shape, dim, log), shape), -1, atol)) << dt << " dim " << dim;
      }
    }
  }
}

TEST_P(NnTest, SoftmaxIsStableForExtremeLogits) {
  const Tensor x = make({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3}, dev(), kFloat32);
  const std::vector<double> p{0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  const Tensor expected = make({p[0], p[1], p[2], p[2], p[1], p[0]}, {2, 3});
  EXPECT_TRUE(all_close(softmax(x, 1), expected));
  const Tensor lexp =
      make({std::log(p[0]), std::log(p[1]), std::log(p[2]), std::log(p[2]), std::log(p[1]), std::log(p[0])}, {2, 3});
  EXPECT_TRUE(all_close(log_softmax(x, 1), lexp));
  // A NaN poisons its own slice only.
  const Tensor xn = make({1, std::nan(""), 2, 1, 2, 3}, {2, 3}, dev());
  const auto yn = values(softmax(xn, 1));
  EXPECT_TRUE(std::isnan(yn[0]) && std::isnan(yn[2]));
  EXPECT_NEAR(yn[3] + yn[4] + yn[5], 1.0, 1e-12);
}

TEST_P(NnTest, SoftmaxZeroDimAndZeroSize) {
  const Tensor s = scalar_tensor(3.5, TensorOptions(kFloat64, dev()));
  EXPECT_EQ(softmax(s, 0).dim(), 0);
  EXPECT_DOUBLE_EQ(softmax(s, -1).item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(log_softmax(s, 0).item<double>(), 0.0);
  const Tensor e = zeros({0, 3}, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(softmax(e, 1).sizes(), (Shape{0, 3}));
  EXPECT_EQ(log_softmax(e, 0).sizes(), (Shape{0, 3}));
  const Tensor e2 = zeros({2, 0}, TensorOptions(kFloat32, dev()));
  EXPECT_EQ(softmax(e2, 1).sizes(), (Shape{2, 0}));
  // Gradients through a 0-d softmax are zero (the output is constant).
  Tensor sg = scalar_tensor(0.3, TensorOptions(kFloat64, dev())).requires_grad_();
  softmax(sg, 0).backward();
  EXPECT_DOUBLE_EQ(sg.grad().item<double>(), 0.0);
}

TEST_P(NnTest, SoftmaxGradients) {
  for (int64_t dim : {0, 1, 2}) {
    for (bool log : {false, true}) {
      auto fn = [dim, log](const TensorList& in) {
        return TensorList{log ? log_softmax(in[0], dim) : softmax(in[0], dim)};
      };
      EXPECT_TRUE(gradcheck(fn, {leaf({2, 3, 4}, dev())})) << "log " << log << " dim " << dim;
      EXPECT_TRUE(gradgradcheck(fn, {leaf({2, 3, 4}, dev(), 1)})) << "log " << log << " dim " << dim;
    }
  }
  // Non-contiguous input.
  auto fn_t = [](const TensorList& in) { return TensorList{softmax(in[0].transpose(0, 1), 1)}; };
  EXPECT_TRUE(gradcheck(fn_t, {leaf({3, 4}, dev())}));
}

TEST_P(NnTest, SoftmaxBackwardMatchesFormula) {
  const Tensor x = leaf({3, 4}, dev());
  const Tensor g = make(irregular(12, 2.0), {3, 4}, dev());
  for (bool log : {false, true}) {
    const Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    const auto grads = autograd::grad({y}, {x}, {g});
    const auto yv = values(y), gv = values(g);
    std::vector<double> expected(12);
    for (int r = 0; r < 3; ++r) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += log ? gv[r * 4 + j] : gv[r * 4 + j] * yv[r * 4 + j];
      for (int j = 0; j < 4; ++j) {
        const int i = r * 4 + j;
        expected[i] = log ? gv[i] - std::exp(yv[i]) * s : yv[i] * (gv[i] - s);
      }
    }
    EXPECT_TRUE(all_close(grads[0], make(expected, {3, 4}))) << "log " << log;
  }
}

TEST_P(NnTest, SoftmaxErrors) {
  const Tensor xi = ones({2, 3}, TensorOptions(kInt64, dev()));
  EXPECT_TRUE(throws<DTypeError>([&] { softmax(xi, 1); }, "[softmax] input must be a float tensor, got dtype int64"));
  EXPECT_TRUE(throws<DTypeError>([&] { log_softmax(xi, 1); }, "[log_softmax] input must be a float tensor"));
  const Tensor x = ones({2, 3}, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(throws<IndexError>([&] { softmax(x, 2); }, "[softmax] dim 2 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { log_softmax(x, -3); }, "[log_softmax] dim -3 out of range"));
  EXPECT_TRUE(throws<ValueError>([&] { softmax(Tensor(), 0); }, "[softmax] input is an undefined tensor"));
}

// ---- layer_norm -------------------------------------------------------------------------------

TEST_P(NnTest, LayerNormMatchesReference) {
  const Shape shape{2, 3, 4};
  const std::vector<double> v = irregular(24);
  const Tensor x = make(v, shape, dev());
  const Tensor xt = make(values(x.transpose(0, 2)), {4, 3, 2}, dev()).transpose(0, 2);
  for (const Shape& ns : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
    const int64_t n = numel(ns);
    const std::vector<double> w = irregular(n, 5.0), b = irregular(n, 7.0);
    const Tensor wt = make(w, ns, dev()), bt = make(b, ns, dev());
    EXPECT_TRUE(all_close(layer_norm(x, ns), make(ref_layer_norm(v, n, {}, {}, 1e-5), shape)));
    EXPECT_TRUE(all_close(layer_norm(x, ns, wt, bt), make(ref_layer_norm(v, n, w, b, 1e-5), shape)));
    EXPECT_TRUE(all_close(layer_norm(xt, ns, wt, bt, 0.1), make(ref_layer_norm(v, n, w, b, 0.1), shape)));
    EXPECT_TRUE(all_close(layer_norm(x, ns, wt), make(ref_layer_norm(v, n, w, {}, 1e-5), shape)));
    EXPECT_TRUE(all_close(layer_norm(x, ns, Tensor(), bt), make(ref_layer_norm(v, n, {}, b, 1e-5), shape)));
  }
}

TEST_P(NnTest, LayerNormLowPrecisionMatchesFloat64) {
  const Shape shape{4, 64};
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor x = make(irregular(256, 0.3), shape, dev(), dt);
    const Tensor w = make(irregular(64, 1.0), {64}, dev(), dt), b = make(irregular(64, 2.0), {64}, dev(), dt);
    const Tensor y = layer_norm(x, {64}, w, b);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(all_close(y, make(ref_layer_norm(values(x), 64, values(w), values(b), 1e-5), shape))) << dt;
  }
  // A large offset does not spoil the variance (two-pass statistics).
  const Tensor big = make({1e4 + 1, 1e4 + 2, 1e4 + 3, 1e4 + 4}, {1, 4}, dev(), kFloat32);
  EXPECT_TRUE(all_close(layer_norm(big, {4}), make(ref_layer_norm({1, 2, 3, 4}, 4, {}, {}, 1e-5), {1, 4}), 1e-4, 1e-4));
}

TEST_P(NnTest, LayerNormGradients) {
  for (const Shape& ns : {Shape{4}, Shape{3, 4}}) {
    auto fn = [ns](const TensorList& in) { return TensorList{layer_norm(in[0], ns, in[1], in[2])}; };
    const TensorList in{leaf({2, 3, 4}, dev()), leaf(ns, dev(), 1), leaf(ns, dev(), 2)};
    EXPECT_TRUE(gradcheck(fn, in));
    EXPECT_TRUE(gradgradcheck(fn, in));
    auto plain = [ns](const TensorList& in) { return TensorList{layer_norm(in[0], ns)}; };
    EXPECT_TRUE(gradcheck(plain, {leaf({2, 3, 4}, dev(), 3)}));
    EXPECT_TRUE(gradgradcheck(plain, {leaf({2, 3, 4}, dev(), 3)}));
  }
  // Only some inputs requiring grad; a non-contiguous input.
  Tensor x = make(irregular(12), {3, 4}, dev());
  Tensor w = leaf({4}, dev(), 1);
  auto fw = [&x](const TensorList& in) { return TensorList{layer_norm(x.t(), {3}, in[0].narrow(0, 0, 3))}; };
  EXPECT_TRUE(gradcheck(fw, {w}));
  // The fused backward agrees with the reference formula in float32.
  Tensor xf = make(irregular(40), {5, 8}, dev(), kFloat32).requires_grad_();
  Tensor wf = make(irregular(8, 1.0), {8}, dev(), kFloat32).requires_grad_();
  Tensor bf = make(irregular(8, 2.0), {8}, dev(), kFloat32).requires_grad_();
  Tensor gf = make(irregular(40, 3.0), {5, 8}, dev(), kFloat32);
  layer_norm(xf, {8}, wf, bf).backward(gf);
  Tensor xd = make(values(xf), {5, 8}, dev()).requires_grad_();
  Tensor wd = make(values(wf), {8}, dev()).requires_grad_();
  Tensor bd = make(values(bf), {8}, dev()).requires_grad_();
  layer_norm(xd, {8}, wd, bd).backward(make(values(gf), {5, 8}, dev()));
  EXPECT_TRUE(all_close(xf.grad(), xd.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(wf.grad(), wd.grad(), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(bf.grad(), bd.grad(), 1e-5, 1e-5));
}

TEST_P(NnTest, LayerNormErrors) {
  const Tensor x = ones({2, 3}, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(throws<ShapeError>(
      [&] { layer_norm(x, {2}); },
      "[layer_norm] normalized_shape [2] does not match the trailing dims of the input of shape [2, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { layer_norm(x, {1, 2, 3}); }, "[layer_norm] normalized_shape [1, 2, 3]"));
  EXPECT_TRUE(
      throws<ShapeError>([&] { layer_norm(x, {}); }, "[layer_norm] normalized_shape must name at least one dim"));
  EXPECT_TRUE(throws<ShapeError>([&] { layer_norm(x, {3}, ones({2}, TensorOptions(kFloat32, dev()))); },
                                 "[layer_norm] weight must have shape [3], got [2]"));
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        layer_norm(x, {3}, Tensor(), ones({3, 1}, TensorOptions(kFloat32, dev())));
      },
      "[layer_norm] bias must have shape [3], got [3, 1]"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] {
        layer_norm(ones({2, 3}, TensorOptions(kInt32, dev())), {3});
      },
      "[layer_norm] input must be a float tensor, got dtype int32"));
  EXPECT_TRUE(throws<DTypeError>([&] { layer_norm(x, {3}, ones({3}, TensorOptions(kInt64, dev()))); },
                                 "[layer_norm] weight must be a float tensor"));
}

// ---- batch_norm -------------------------------------------------------------------------------

TEST_P(NnTest, BatchNormTrainingMatchesReferenceAndUpdatesRunningStats) {
  const int64_t batch = 4, channels = 3, spatial = 5;
  for (const Shape& shape : {Shape{batch, channels, spatial}, Shape{batch, channels}}) {
    const int64_t sp = shape.size() == 3 ? spatial : 1;
    const std::vector<double> v = irregular(batch * channels * sp);
    const std::vector<double> w = irregular(channels, 1.0), b = irregular(channels, 2.0);
    const std::vector<double> rm0{0.5, -0.25, 1.0}, rv0{2.0, 0.5, 1.5};
    for (DType dt : {kFloat64, kFloat32}) {
      Tensor rm = make(rm0, {channels}, dev(), dt), rv = make(rv0, {channels}, dev(), dt);
      const uint64_t vm = rm.version(), vv = rv.version();
      const Tensor x = make(v, shape, dev(), dt);
      const Tensor y =
          batch_norm(x, rm, rv, make(w, {channels}, dev(), dt), make(b, {channels}, dev(), dt), true, 0.2, 1e-3);
      const ChannelStats st = ref_channel_stats(v, batch, channels, sp);
      EXPECT_TRUE(all_close(y, make(ref_batch_norm(v, batch, channels, sp, st, w, b, 1e-3), shape))) << dt;
      std::vector<double> em(channels), ev(channels);
      const double count = static_cast<double>(batch * sp);
      for (int64_t c = 0; c < channels; ++c) {
        em[c] = 0.8 * rm0[c] + 0.2 * st.mean[c];
        ev[c] = 0.8 * rv0[c] + 0.2 * st.var[c] * count / (count - 1);  // unbiased
      }
      EXPECT_TRUE(all_close(rm, make(em, {channels}))) << dt;
      EXPECT_TRUE(all_close(rv, make(ev, {channels}))) << dt;
      EXPECT_GT(rm.version(), vm);
      EXPECT_GT(rv.version(), vv);
    }
  }
}

TEST_P(NnTest, BatchNormEvaluationUsesRunningStats) {
  const int64_t batch = 2, channels = 3, spatial = 4;
  const std::vector<double> v = irregular(batch * channels * spatial);
  const ChannelStats st{{0.5, -0.25, 1.0}, {2.0, 0.5, 1.5}};
  const std::vector<double> w = irregular(channels, 1.0), b = irregular(channels, 2.0);
  const Tensor rm = make(st.mean, {channels}, dev()), rv = make(st.var, {channels}, dev());
  const Shape shape{batch, channels, 2, 2};
  const Tensor y =
      batch_norm(make(v, shape, dev()), rm, rv, make(w, {channels}, dev()), make(b, {channels}, dev()), false);
  EXPECT_TRUE(all_close(y, make(ref_batch_norm(v, batch, channels, spatial, st, w, b, 1e-5), shape)));
  EXPECT_EQ(values(rm), st.mean);  // untouched
  // Without affine parameters, non-contiguous input, and float32 running stats with 16-bit inputs.
  const Tensor xt = make(values(make(v, {batch, channels, spatial}).transpose(1, 2)), {batch, spatial, channels}, dev())
                        .transpose(1, 2);
  const std::vector<double> ones3(channels, 1.0), zeros3(channels, 0.0);
  EXPECT_TRUE(all_close(
      batch_norm(xt, rm, rv, Tensor(), Tensor(), false),
      make(ref_batch_norm(v, batch, channels, spatial, st, ones3, zeros3, 1e-5), {batch, channels, spatial})));
  for (DType dt : {kFloat16, kBFloat16}) {
    const Tensor xh = make(v, {batch, channels, spatial}, dev(), dt);
    const Tensor yh = batch_norm(xh, rm.to(kFloat32), rv.to(kFloat32), Tensor(), Tensor(), false);
    EXPECT_EQ(yh.dtype(), dt);
    EXPECT_TRUE(all_close(yh, make(ref_batch_norm(values(xh), batch, channels, spatial, st, ones3, zeros3, 1e-5),
                                   {batch, channels, spatial})))
        << dt;
    Tensor rmh = rm.to(kFloat32), rvh = rv.to(kFloat32);
    const Tensor th = batch_norm(xh, rmh, rvh, Tensor(), Tensor(), true);
    const ChannelStats sh = ref_channel_stats(values(xh), batch, channels, spatial);
    EXPECT_TRUE(all_close(th, make(ref_batch_norm(values(xh), batch, channels, spatial, sh, ones3, zeros3, 1e-5),
                                   {batch, channels, spatial})))
        << dt;
    EXPECT_NEAR(values(rmh)[0], 0.9 * st.mean[0] + 0.1 * sh.mean[0], 1e-5);
  }
}

TEST_P(NnTest, BatchNormGradients) {
  for (bool training : {true, false}) {
    const Tensor rm = make({0.1, -0.2, 0.3}, {3}, dev()), rv = make({1.5, 0.7, 2.0}, {3}, dev());
    auto fn = [&, training](const TensorList& in) {
      // Training mode here keeps no running statistics (gradcheck runs the function many times).
      return TensorList{training ? batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true)
                                 : batch_norm(in[0], rm, rv, in[1], in[2], false)};
    };
    const TensorList in{leaf({4, 3, 2}, dev()), leaf({3}, dev(), 1), leaf({3}, dev(), 2)};
    EXPECT_TRUE(gradcheck(fn, in)) << "training " << training;
    EXPECT_TRUE(gradgradcheck(fn, in)) << "training " << training;
  }
  auto plain = [](const TensorList& in) {
    return TensorList{batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true)};
  };
  EXPECT_TRUE(gradcheck(plain, {leaf({5, 2}, dev())}));
  // Gradients with running statistics being updated (they do not take part in the graph).
  Tensor rm = zeros({3}, TensorOptions(kFloat64, dev())), rv = ones({3}, TensorOptions(kFloat64, dev()));
  Tensor x = leaf({4, 3}, dev());
  Tensor x2 = make(values(x), {4, 3}, dev()).requires_grad_();
  const Tensor g = make(irregular(12, 4.0), {4, 3}, dev());
  batch_norm(x, rm, rv, Tensor(), Tensor(), true).backward(g);
  batch_norm(x2, Tensor(), Tensor(), Tensor(), Tensor(), true).backward(g);
  EXPECT_TRUE(all_close(x.grad(), x2.grad(), 0, 1e-12));
  EXPECT_FALSE(rm.requires_grad());
}

TEST_P(NnTest, BatchNormErrors) {
  const TensorOptions f(kFloat32, dev());
  const Tensor x = ones({4, 3}, f);
  EXPECT_TRUE(throws<ValueError>([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); },
                                 "[batch_norm] evaluation mode (training=false) normalizes with running_mean"));
  EXPECT_TRUE(throws<ValueError>([&] { batch_norm(x, zeros({3}, f), Tensor(), Tensor(), Tensor(), true); },
                                 "[batch_norm] running_mean and running_var must be given together"));
  EXPECT_TRUE(throws<ValueError>(
      [&] {
        batch_norm(ones({1, 3}, f), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      "[batch_norm] expected more than 1 value per channel when training, got input of shape [1, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { batch_norm(ones({4}, f), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                                 "[batch_norm] expects an input of shape [N, C, ...] (at least 2-d), got [4]"));
  EXPECT_TRUE(throws<ShapeError>([&] { batch_norm(x, zeros({4}, f), ones({4}, f), Tensor(), Tensor(), true); },
                                 "[batch_norm] running_mean must have shape [3], got [4]"));
  EXPECT_TRUE(throws<ShapeError>([&] { batch_norm(x, Tensor(), Tensor(), ones({2}, f), Tensor(), true); },
                                 "[batch_norm] weight must have shape [3], got [2]"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] {
        batch_norm(ones({4, 3}, TensorOptions(kInt64, dev())), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      "[batch_norm] input must be a float tensor"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] { batch_norm(x, zeros({3}, TensorOptions(kInt64, dev())), ones({3}, f), Tensor(), Tensor(), true); },
      "[batch_norm] running_mean must be a float tensor"));
}

// ---- embedding --------------------------------------------------------------------------------

TEST_P(NnTest, EmbeddingForwardAndBackward) {
  const int64_t num = 5, dim = 3;
  const std::vector<double> wv = irregular(num * dim);
  const std::vector<int64_t> idx{4, 0, 2, 4, 4, 1};
  for (DType it : {kInt64, kInt32}) {
    const Tensor indices = tensor(idx).view({2, 3}).to(dev(), it);
    Tensor w = make(wv, {num, dim}, dev()).requires_grad_();
    const Tensor y = embedding(w, indices);
    EXPECT_EQ(y.sizes(), (Shape{2, 3, dim}));
    std::vector<double> expected;
    for (int64_t i : idx)
      for (int64_t d = 0; d < dim; ++d) expected.push_back(wv[i * dim + d]);
    EXPECT_TRUE(all_close(y, make(expected, {2, 3, dim}), 0, 0));
    const std::vector<double> gv = irregular(18, 3.0);
    y.backward(make(gv, {2, 3, dim}, dev()));
    std::vector<double> gexp(num * dim, 0.0);
    for (size_t k = 0; k < idx.size(); ++k)
      for (int64_t d = 0; d < dim; ++d) gexp[idx[k] * dim + d] += gv[k * dim + d];
    EXPECT_TRUE(all_close(w.grad(), make(gexp, {num, dim}))) << it;
  }
  // 0-d indices, and every dtype of weight for the forward (a row copy).
  const Tensor wi = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}).view({3, 2}).to(dev());
  EXPECT_EQ(values(embedding(wi, scalar_tensor(2, TensorOptions(kInt64, dev())))), (std::vector<double>{5, 6}));
  EXPECT_EQ(embedding(make(wv, {num, dim}, dev()), zeros({0}, TensorOptions(kInt64, dev()))).sizes(), (Shape{0, dim}));
}

TEST_P(NnTest, EmbeddingPaddingIdxAndLargeAccumulation) {
  const int64_t num = 6, dim = 4;
  const Tensor indices = tensor(std::vector<int64_t>{0, 5, 5, 2, 0}).to(dev());
  for (int64_t pad : {5, -1}) {
    Tensor w = make(irregular(num * dim), {num, dim}, dev()).requires_grad_();
    embedding(w, indices, pad).sum().backward();
    const auto g = values(w.grad());
    for (int64_t d = 0; d < dim; ++d) {
      EXPECT_EQ(g[0 * dim + d], 2.0);
      EXPECT_EQ(g[2 * dim + d], 1.0);
      EXPECT_EQ(g[5 * dim + d], 0.0) << "padding row";
      EXPECT_EQ(g[1 * dim + d], 0.0);
    }
  }
  // Many repeats of few rows (float32): deterministic and close to the float64 sum.
  const int64_t k = 20000, rows = 7;
  std::vector<int64_t> idx(k);
  for (int64_t i = 0; i < k; ++i) idx[i] = (i * 31) % rows;
  const Tensor big = tensor(idx).to(dev());
  const std::vector<double> gv = irregular(k * 2, 1.0);
  Tensor g32 = make(gv, {k, 2}, dev(), kFloat32);
  std::vector<double> expected(rows * 2, 0.0);
  const auto g32v = values(g32);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t d = 0; d < 2; ++d) expected[idx[i] * 2 + d] += g32v[i * 2 + d];
  Tensor first;
  for (int rep = 0; rep < 2; ++rep) {
    Tensor w = zeros({rows, 2}, TensorOptions(kFloat32, dev())).requires_grad_();
    embedding(w, big).backward(g32);
    EXPECT_TRUE(all_close(w.grad(), make(expected, {rows, 2}), 1e-4, 1e-3));
    if (rep == 0)
      first = w.grad();
    else
      EXPECT_EQ(values(first), values(w.grad()));
  }
}

TEST_P(NnTest, EmbeddingGradients) {
  const Tensor indices = tensor(std::vector<int64_t>{3, 1, 3, 0}).view({2, 2}).to(dev());
  // (A padding_idx that occurs gets no gradient on purpose, which is not the derivative.)
  for (std::optional<int64_t> pad : {std::optional<int64_t>(), std::optional<int64_t>(2)}) {
    auto fn = [&, pad](const TensorList& in) { return TensorList{embedding(in[0], indices, pad) * in[0].sum()}; };
    EXPECT_TRUE(gradcheck(fn, {leaf({4, 3}, dev())}));
    EXPECT_TRUE(gradgradcheck(fn, {leaf({4, 3}, dev())}));
  }
  // The weight gradient as a function of the output gradient: linear, with the padding positions cut.
  Tensor w = leaf({4, 3}, dev());
  Tensor v = make(irregular(12, 1.0), {2, 2, 3}, dev()).requires_grad_();
  const Tensor gw = autograd::grad({embedding(w, indices, 3)}, {w}, {v}, std::nullopt, true)[0];
  const auto vv = values(v);  // row 0 from position 3, row 1 from position 1, padding row 3 zero
  EXPECT_TRUE(all_close(gw, make({vv[9], vv[10], vv[11], vv[3], vv[4], vv[5], 0, 0, 0, 0, 0, 0}, {4, 3})));
  const Tensor u = make(irregular(12, 2.0), {4, 3}, dev());
  const Tensor gv = autograd::grad({gw}, {v}, {u})[0];
  const auto uv = values(u);
  std::vector<double> expected(12, 0.0);  // rows of u by index, zero where the index is the padding row 3
  const std::vector<int64_t> idx{3, 1, 3, 0};
  for (int k = 0; k < 4; ++k)
    for (int d = 0; d < 3; ++d) expected[k * 3 + d] = idx[k] == 3 ? 0.0 : uv[idx[k] * 3 + d];
  EXPECT_TRUE(all_close(gv, make(expected, {2, 2, 3})));
}

TEST_P(NnTest, EmbeddingErrors) {
  const Tensor w = ones({5, 2}, TensorOptions(kFloat32, dev()));
  auto idx = [&](std::vector<int64_t> v) { return tensor(v).to(dev()); };
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        embedding(w, idx({1, 7, 2})).cpu();
      },
      "[embedding] index 7 is out of range for 5 embeddings (valid indices: 0..4)"));
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        embedding(w, idx({1, -1})).cpu();
      },
      "[embedding] index -1 is out of range for 5 embeddings"));
  EXPECT_TRUE(throws<IndexError>([&] { embedding(w, idx({5}).to(kInt32)).cpu(); }, "[embedding] index 5 is out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { embedding(w, idx({1}), 5); },
                                 "[embedding] padding_idx 5 is out of range for 5 embeddings"));
  EXPECT_TRUE(throws<IndexError>([&] { embedding(w, idx({1}), -6); }, "[embedding] padding_idx -6"));
  EXPECT_TRUE(throws<DTypeError>([&] { embedding(w, ones({2}, TensorOptions(kFloat32, dev()))); },
                                 "[embedding] indices must be int64 or int32, got dtype float32"));
  EXPECT_TRUE(throws<ShapeError>([&] { embedding(ones({5}, TensorOptions(kFloat32, dev())), idx({1})); },
                                 "[embedding] weight must be 2-d [num_embeddings, embedding_dim], got shape [5]"));
}

// ---- dropout ----------------------------------------------------------------------------------

TEST_P(NnTest, DropoutIdentityAndExtremes) {
  const Tensor x = make(irregular(10), {10}, dev(), kFloat32);
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  EXPECT_EQ(values(dropout(x, 1.0, true)), std::vector<double>(10, 0.0));
  Tensor xg = make(irregular(6), {6}, dev()).requires_grad_();
  dropout(xg, 1.0).sum().backward();
  EXPECT_EQ(values(xg.grad()), std::vector<double>(6, 0.0));
  EXPECT_EQ(dropout(zeros({0, 3}, TensorOptions(kFloat32, dev())), 0.5).sizes(), (Shape{0, 3}));
}

TEST_P(NnTest, DropoutStatisticsScalingAndGradient) {
  const int64_t n = 100000;
  for (double p : {0.3, 0.75}) {
    for (DType dt : {kFloat32, kFloat16}) {
      Tensor x = ones({n}, TensorOptions(dt, dev())).requires_grad_();
      const Tensor y = dropout(x, p);
      const auto yv = values(y);
      const double scale = static_cast<double>(static_cast<float>(1.0 / (1.0 - p)));
      int64_t zeros_count = 0, wrong_scale = 0;
      for (double v : yv) {
        if (v == 0.0)
          ++zeros_count;
        else if (std::fabs(v - scale) > scale * default_rtol(dt))
          ++wrong_scale;
      }
      EXPECT_EQ(wrong_scale, 0) << p << " " << dt;
      EXPECT_NEAR(static_cast<double>(zeros_count) / n, p, 0.01) << p << " " << dt;
      // backward: g * mask / (1 - p), the same elements kept
      const Tensor g = make(irregular(n), {n}, dev(), dt);
      const auto gx = values(autograd::grad({y}, {x}, {g})[0]);
      const auto gv = values(g);
      for (int64_t i = 0; i < n; i += 997) EXPECT_NEAR(gx[i], yv[i] * gv[i], 2e-2 * std::fabs(gv[i]) * scale + 1e-6);
    }
  }
  // Expectation is preserved.
  const Tensor big = make(irregular(n), {n}, dev());
  EXPECT_NEAR(values(dropout(big, 0.5).sum())[0] / n, values(big.sum())[0] / n, 0.03);
}

TEST_P(NnTest, DropoutIsDeterministicUnderSeed) {
  const Tensor x = make(irregular(1000), {1000}, dev(), kFloat32);
  manual_seed(1234);
  const auto a = values(dropout(x, 0.4));
  const auto b = values(dropout(x, 0.4));
  manual_seed(1234);
  const auto c = values(dropout(x, 0.4));
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
}

TEST_P(NnTest, DropoutErrors) {
  const Tensor x = ones({3}, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(throws<ValueError>([&] { dropout(x, 1.5); }, "[dropout] p must be a probability in [0, 1], got 1.5"));
  EXPECT_TRUE(throws<ValueError>([&] { dropout(x, -0.1, false); }, "[dropout] p must be a probability in [0, 1]"));
  EXPECT_TRUE(throws<DTypeError>([&] { dropout(ones({3}, TensorOptions(kInt64, dev())), 0.5); },
                                 "[dropout] input must be a float tensor"));
}

// ---- one_hot ----------------------------------------------------------------------------------

TEST_P(NnTest, OneHot) {
  const Tensor idx = tensor(std::vector<int64_t>{2, 0, 1, 2}).view({2, 2}).to(dev());
  const Tensor y = one_hot(idx);
  EXPECT_EQ(y.dtype(), kInt64);
  EXPECT_EQ(y.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(values(one_hot(idx.transpose(0, 1), 4)),
            (std::vector<double>{0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(one_hot(zeros({0}, TensorOptions(kInt64, dev())), 3).sizes(), (Shape{0, 3}));
  EXPECT_EQ(values(one_hot(scalar_tensor(1, TensorOptions(kInt64, dev())), 2)), (std::vector<double>{0, 1}));
}

TEST_P(NnTest, OneHotErrors) {
  auto idx = [&](std::vector<int64_t> v) { return tensor(v).to(dev()); };
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        one_hot(idx({0, 3}), 3).cpu();
      },
      "[one_hot] class value 3 is out of range for num_classes = 3"));
  EXPECT_TRUE(throws<IndexError>([&] { one_hot(idx({0, -2})).cpu(); }, "[one_hot] class value -2 is negative"));
  EXPECT_TRUE(throws<ValueError>([&] { one_hot(zeros({0}, TensorOptions(kInt64, dev()))); },
                                 "[one_hot] cannot infer num_classes from an empty tensor"));
  EXPECT_TRUE(
      throws<ValueError>([&] { one_hot(idx({0}), -2); }, "[one_hot] num_classes must be -1 (inferred) or nonnegative"));
  EXPECT_TRUE(
      throws<DTypeError>([&] { one_hot(idx({0}).to(kInt32)); }, "[one_hot] indices must be int64, got dtype int32"));
}


// ---- long rows, 16-bit floats and strided layouts -----------------------------------------------

// (log_)softmax backward by the formula, in float64, from the outputs y and upstream gradients g.
std::vector<double> ref_softmax_backward(const std::vector<double>& y, const std::vector<double>& g, const Shape& shape,
                                         int64_t dim, bool log) {
  const AroundDim a = around(shape, dim);
  std::vector<double> gx(y.size());
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t i = 0; i < a.inner; ++i) {
      auto at = [&](int64_t j) { return o * a.n * a.inner + j * a.inner + i; };
      double s = 0;
      for (int64_t j = 0; j < a.n; ++j) s += log ? g[at(j)] : g[at(j)] * y[at(j)];
      for (int64_t j = 0; j < a.n; ++j)
        gx[at(j)] = log ? g[at(j)] - std::exp(y[at(j)]) * s : y[at(j)] * (g[at(j)] - s);
    }
  }
  return gx;
}

// Softmax forward and backward of every float dtype against float64 loops on the rounded values, for
// rows that fit a warp, a block's registers or only a streamed block, and for strided slices.
TEST_P(NnTest, SoftmaxLongRowsAndStridedSlices) {
  struct Case {
    Shape shape;
    int64_t dim;
  };
  // {5000, 130} and {10000, 40} launch thousands of blocks (one row per block, and groups of rows per
  // block); rows of 4096 and 64 elements are whole 128-bit pieces for every lane of a block and of a
  // group (the last block with groups that have no row).
  const std::vector<Case> cases{{{37, 33}, 1},     {{4, 700}, 1},     {{3, 5000}, 1},     {{2, 20000}, 1},
                                {{2, 3000, 5}, 1}, {{3, 40, 33}, 1},  {{5000, 130}, 1},   {{10000, 40}, 1},
                                {{300, 4096}, 1},  {{1001, 64}, 1}};
  for (const Case& c : cases) {
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      const Tensor x = make(irregular(numel(c.shape), 0.3), c.shape, dev(), dt);
      const Tensor g = make(irregular(numel(c.shape), 1.7), c.shape, dev(), dt);
      for (bool log : {false, true}) {
        Tensor xg = x.detach().requires_grad_();
        const Tensor y = log ? log_softmax(xg, c.dim) : softmax(xg, c.dim);
        const double atol = log ? 8 * default_rtol(dt) : -1;
        EXPECT_TRUE(all_close(y, make(ref_softmax(values(x), c.shape, c.dim, log), c.shape), -1, atol))
            << ::testing::PrintToString(c.shape) << " " << dt << " log " << log;
        const Tensor gx = autograd::grad({y}, {xg}, {g})[0];
        EXPECT_TRUE(all_close(gx, make(ref_softmax_backward(values(y), values(g), c.shape, c.dim, log), c.shape),
                              dt == kFloat32 ? 1e-5 : -1, -1))
            << ::testing::PrintToString(c.shape) << " " << dt << " log " << log;
      }
    }
  }
  // A row whose first half is -inf (masked logits) and a row of only -inf, held and streamed.
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t n : {3000, 20000}) {
    std::vector<double> masked = irregular(2 * n);
    for (int64_t j = 0; j < 2 * n; ++j)
      if (j < n / 2 || j >= n) masked[j] = -inf;
    const auto y = values(softmax(make(masked, {2, n}, dev(), kFloat32), 1));
    const auto ref = ref_softmax(std::vector<double>(masked.begin() + n / 2, masked.begin() + n), {1, n - n / 2}, 1,
                                 false);
    for (int64_t j = 0; j < n / 2; ++j) EXPECT_EQ(y[j], 0.0) << n;
    for (int64_t j = n / 2; j < n; ++j) EXPECT_NEAR(y[j], ref[j - n / 2], 1e-6) << n;
    for (int64_t j = n; j < 2 * n; ++j) EXPECT_TRUE(std::isnan(y[j])) << n;
  }
}

// layer_norm forward (every float dtype) and backward (float32 and 16-bit against float64) for rows
// that fit a warp, a block's registers or only a streamed block, and many rows for the weight and
// bias sums (in the row pass where a row has a block, else in a column pass).
TEST_P(NnTest, LayerNormLongRowsAndManyRows) {
  // {5000, 130} and {10000, 40} launch thousands of blocks (one row per block, and groups of rows per
  // block) and sum the weight and bias gradients over many chunks of rows; rows of 4096 and 64
  // elements are whole 128-bit pieces for every lane of a block and of a group (the last block with
  // groups that have no row).
  for (const Shape& shape : {Shape{3, 33}, Shape{3, 700}, Shape{2, 5000}, Shape{2, 20000}, Shape{300, 40},
                             Shape{5000, 130}, Shape{10000, 40}, Shape{300, 4096}, Shape{1001, 64}}) {
    const int64_t n = shape[1];
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
      const Tensor x = make(irregular(numel(shape), 0.3), shape, dev(), dt);
      const Tensor w = make(irregular(n, 1.0), {n}, dev(), dt), b = make(irregular(n, 2.0), {n}, dev(), dt);
      EXPECT_TRUE(all_close(layer_norm(x, {n}, w, b),
                            make(ref_layer_norm(values(x), n, values(w), values(b), 1e-5), shape)))
          << ::testing::PrintToString(shape) << " " << dt;
      EXPECT_TRUE(all_close(layer_norm(x, {n}), make(ref_layer_norm(values(x), n, {}, {}, 1e-5), shape)))
          << ::testing::PrintToString(shape) << " " << dt;
    }
    // Gradients in float32 and 16-bit (float sums, rounded once) against float64 on the CPU, from
    // the same rounded inputs.
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
      TensorList grads[2];
      for (bool reference : {false, true}) {
        const Device on = reference ? Device(kCPU) : dev();
        const DType to = reference ? kFloat64 : dt;
        Tensor x = make(irregular(numel(shape), 0.3), shape, on, dt).to(to).requires_grad_();
        Tensor w = make(irregular(n, 1.0), {n}, on, dt).to(to).requires_grad_();
        Tensor b = make(irregular(n, 2.0), {n}, on, dt).to(to).requires_grad_();
        const Tensor g = make(irregular(numel(shape), 3.0), shape, on, dt).to(to);
        grads[reference] = autograd::grad({layer_norm(x, {n}, w, b)}, {x, w, b}, {g});
      }
      const double tol = dt == kFloat32 ? 1e-4 : 1e-2;
      for (int k = 0; k < 3; ++k)
        EXPECT_TRUE(all_close(grads[0][k], grads[1][k], tol, tol)) << ::testing::PrintToString(shape) << " " << dt << " " << k;
    }
  }
}

// batch_norm with many values per channel (several partial sums per channel), forward and backward.
TEST_P(NnTest, BatchNormManyValuesPerChannel) {
  const int64_t batch = 8, channels = 3, spatial = 1000;
  const Shape shape{batch, channels, spatial};
  const std::vector<double> v = irregular(numel(shape), 0.9);
  const ChannelStats st = ref_channel_stats(v, batch, channels, spatial);
  const std::vector<double> w{0.5, 1.5, -1.0}, b{0.25, 0.0, -0.5};  // exact in bfloat16
  const Tensor expected = make(ref_batch_norm(v, batch, channels, spatial, st, w, b, 1e-5), shape);
  TensorList grads[2];
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = make(v, shape, dev(), dt).requires_grad_();
    Tensor wt = make(w, {channels}, dev(), dt).requires_grad_(), bt = make(b, {channels}, dev(), dt).requires_grad_();
    const Tensor y = batch_norm(x, Tensor(), Tensor(), wt, bt, true);
    EXPECT_TRUE(all_close(y, expected, dt == kFloat32 ? 1e-5 : -1, -1)) << dt;
    grads[dt == kFloat64] = autograd::grad({y}, {x, wt, bt}, {make(irregular(numel(shape), 2.0), shape, dev(), dt)});
  }
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(all_close(grads[0][k], grads[1][k], 1e-4, 1e-4)) << k;
  const Tensor xh = make(v, shape, dev(), kBFloat16);
  const ChannelStats sh = ref_channel_stats(values(xh), batch, channels, spatial);
  EXPECT_TRUE(all_close(batch_norm(xh, Tensor(), Tensor(), make(w, {channels}, dev(), kBFloat16),
                                   make(b, {channels}, dev(), kBFloat16), true),
                        make(ref_batch_norm(values(xh), batch, channels, spatial, sh, w, b, 1e-5), shape)));
}

// The embedding backward over many indices: 16-bit gradients, int32 indices, odd row sizes, a
// padding row; sums match float64 and repeat exactly.
TEST_P(NnTest, EmbeddingBackwardManyIndices) {
  const int64_t num = 300, dim = 17, k = 5000, pad = 7;
  std::vector<int64_t> idx(k);
  for (int64_t i = 0; i < k; ++i) idx[i] = (i * 37 + i / 11) % num;
  const Tensor indices = tensor(idx).to(dev(), kInt32);
  for (DType dt : {kFloat32, kBFloat16}) {
    const Tensor g = make(irregular(k * dim, 0.4), {k, dim}, dev(), dt);
    const std::vector<double> gv = values(g);
    std::vector<double> expected(num * dim, 0.0);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t d = 0; d < dim; ++d)
        if (idx[i] != pad) expected[idx[i] * dim + d] += gv[i * dim + d];
    Tensor first;
    for (int rep = 0; rep < 2; ++rep) {
      Tensor w = zeros({num, dim}, TensorOptions(dt, dev())).requires_grad_();
      embedding(w, indices, pad).backward(g);
      EXPECT_TRUE(all_close(w.grad(), make(expected, {num, dim}), dt == kFloat32 ? 1e-5 : -1, 1e-4)) << dt;
      if (rep == 0)
        first = w.grad();
      else
        EXPECT_EQ(values(first), values(w.grad())) << dt;
    }
    // The forward of odd-sized rows of 16-bit values.
    const Tensor wv = make(irregular(num * dim, 0.8), {num, dim}, dev(), dt);
    const auto wvals = values(wv);
    std::vector<double> rows;
    for (int64_t i = 0; i < 50; ++i)
      for (int64_t d = 0; d < dim; ++d) rows.push_back(wvals[idx[i] * dim + d]);
    EXPECT_TRUE(all_close(embedding(wv, indices.narrow(0, 0, 50)), make(rows, {50, dim}), 0, 0)) << dt;
  }
}

}  // namespace
}  // namespace rtx::testing
