// Tests of the loss functions against naive float64 loops: cross_entropy and nll_loss with every
// reduction, class weights, ignore_index, label smoothing, N-d and unbatched targets and
// non-contiguous logits; mse_loss with broadcasting; binary_cross_entropy_with_logits with weights
// and pos_weight at extreme logits; 16-bit float forwards; first and second order gradients; errors.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class LossTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(LossTest);

const Reduction kReductions[] = {Reduction::None, Reduction::Mean, Reduction::Sum};

// ---- data and references ----------------------------------------------------------------------

// Positive values in [0.5, 2] (class weights).
std::vector<double> positive(int64_t n, double seed) {
  std::vector<double> v = irregular(n, seed);
  for (double& x : v) x = 1.25 + x / 4;
  return v;
}

Tensor targets(const std::vector<int64_t>& v, const Shape& shape, Device dev) { return tensor(v).view(shape).to(dev); }

// A class-index loss case: input [C], [N, C] or [N, C, d...] and its targets.
struct ClassCase {
  Shape shape;
  std::vector<int64_t> target;
  Shape target_shape() const {
    if (shape.size() == 1) return {};
    Shape t{shape[0]};
    t.insert(t.end(), shape.begin() + 2, shape.end());
    return t;
  }
  int64_t n() const { return shape.size() == 1 ? 1 : shape[0]; }
  int64_t classes() const { return shape.size() == 1 ? shape[0] : shape[1]; }
  int64_t inner() const { return numel(shape) / (n() * classes()); }
};

// PyTorch's cross_entropy (log_probs = false) or nll_loss (log_probs = true) with class weights w
// (empty: none), ignore_index and label smoothing.
std::vector<double> ref_class_loss(const std::vector<double>& x, const ClassCase& k, const std::vector<double>& w,
                                   int64_t ignore, Reduction red, double ls, bool log_probs) {
  const int64_t n = k.n(), classes = k.classes(), inner = k.inner();
  auto wc = [&](int64_t c) { return w.empty() ? 1.0 : w[c]; };
  std::vector<double> losses;
  double total = 0, weights = 0;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t t = k.target[b * inner + i];
      if (t == ignore) {
        losses.push_back(0.0);
        continue;
      }
      std::vector<double> lp(classes);
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t c = 0; c < classes; ++c) m = std::max(m, x[(b * classes + c) * inner + i]);
      for (int64_t c = 0; c < classes; ++c) s += std::exp(x[(b * classes + c) * inner + i] - m);
      for (int64_t c = 0; c < classes; ++c) {
        const double v = x[(b * classes + c) * inner + i];
        lp[c] = log_probs ? v : v - m - std::log(s);
      }
      double smooth = 0;
      for (int64_t c = 0; c < classes; ++c) smooth -= wc(c) * lp[c];
      const double loss = (1 - ls) * -wc(t) * lp[t] + ls / static_cast<double>(classes) * smooth;
      losses.push_back(loss);
      total += loss;
      weights += wc(t);
    }
  }
  if (red == Reduction::Sum) return {total};
  if (red == Reduction::Mean) return {total / weights};
  return losses;
}

Shape reduced_shape(const ClassCase& k, Reduction red) { return red == Reduction::None ? k.target_shape() : Shape{}; }

const char* name(Reduction r) { return r == Reduction::None ? "none" : r == Reduction::Mean ? "mean" : "sum"; }

std::vector<ClassCase> class_cases() {
  return {
      {{4, 5}, {1, 0, 4, 2}},
      {{3, 4, 2}, {3, 0, 1, 1, 2, 3}},           // [N, C, d]
      {{2, 3, 2, 2}, {0, 2, 1, 1, 2, 0, 0, 1}},  // [N, C, d1, d2]
      {{6}, {4}},                                // unbatched
  };
}

// ---- cross_entropy ----------------------------------------------------------------------------

TEST_P(LossTest, CrossEntropyMatchesReference) {
  for (const ClassCase& k : class_cases()) {
    const std::vector<double> xv = irregular(numel(k.shape));
    const Tensor x = make(xv, k.shape, dev());
    const Tensor t = targets(k.target, k.target_shape(), dev());
    const std::vector<double> w = positive(k.classes(), 1.0);
    for (Reduction red : kReductions) {
      for (double ls : {0.0, 0.2}) {
        for (bool weighted : {false, true}) {
          // ignore_index hits the second sample (when there is one).
          for (int64_t ignore : {int64_t{-100}, k.target.size() > 1 ? k.target[1] : int64_t{-100}}) {
            const Tensor y = cross_entropy(x, t, weighted ? make(w, {k.classes()}, dev()) : Tensor(), ignore, red, ls);
            const auto expected = ref_class_loss(xv, k, weighted ? w : std::vector<double>{}, ignore, red, ls, false);
            EXPECT_TRUE(all_close(y, make(expected, reduced_shape(k, red))))
                << ::testing::PrintToString(k.shape) << " " << name(red) << " ls " << ls << " w " << weighted
                << " ignore " << ignore;
          }
        }
      }
    }
  }
}

TEST_P(LossTest, CrossEntropyNonContiguousAndLowPrecision) {
  const ClassCase k{{4, 6}, {5, 0, 3, 3}};
  const std::vector<double> xv = irregular(24, 0.7);
  const Tensor t = targets(k.target, {4}, dev());
  const Tensor xt = make(values(make(xv, {4, 6}).t()), {6, 4}, dev()).t();
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_TRUE(all_close(cross_entropy(xt, t, Tensor(), -100, Reduction::None),
                        make(ref_class_loss(xv, k, {}, -100, Reduction::None, 0.0, false), {4})));
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor x = make(xv, {4, 6}, dev(), dt);
    const Tensor w = make(positive(6, 2.0), {6}, dev(), dt);
    for (Reduction red : kReductions) {
      const Tensor y = cross_entropy(x, t, w, -100, red, 0.1);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_TRUE(
          all_close(y, make(ref_class_loss(values(x), k, values(w), -100, red, 0.1, false), reduced_shape(k, red))))
          << dt << " " << name(red);
    }
  }
  // Extreme logits stay finite.
  const Tensor xe = make({1000, -1000, 0, -1000, 1000, 0}, {2, 3}, dev(), kFloat32);
  EXPECT_TRUE(
      all_close(cross_entropy(xe, targets({0, 0}, {2}, dev()), Tensor(), -100, Reduction::None), make({0, 2000}, {2})));
}

TEST_P(LossTest, CrossEntropyEdgeCases) {
  const Tensor x = make(irregular(6), {2, 3}, dev());
  // Every target ignored: the mean is 0 / 0, the sum 0.
  const Tensor t = targets({-100, -100}, {2}, dev());
  EXPECT_TRUE(std::isnan(cross_entropy(x, t).item<double>()));
  EXPECT_EQ(cross_entropy(x, t, Tensor(), -100, Reduction::Sum).item<double>(), 0.0);
  // ignore_index may name a valid class.
  const Tensor t2 = targets({1, 2}, {2}, dev());
  const auto xv = irregular(6);
  const double l1 = -(xv[5] - std::log(std::exp(xv[3]) + std::exp(xv[4]) + std::exp(xv[5])));
  EXPECT_NEAR(cross_entropy(x, t2, Tensor(), 1).item<double>(), l1, 1e-12);
  // Zero-size batch.
  const Tensor e = zeros({0, 3}, TensorOptions(kFloat32, dev()));
  const Tensor te = zeros({0}, TensorOptions(kInt64, dev()));
  EXPECT_EQ(cross_entropy(e, te, Tensor(), -100, Reduction::None).sizes(), (Shape{0}));
  EXPECT_EQ(cross_entropy(e, te, Tensor(), -100, Reduction::Sum).item<double>(), 0.0);
  // Gradients of ignored samples are zero.
  Tensor xg = leaf({2, 3}, dev());
  cross_entropy(xg, targets({-100, 2}, {2}, dev())).backward();
  const auto g = values(xg.grad());
  EXPECT_EQ(g[0], 0.0);
  EXPECT_EQ(g[1], 0.0);
  EXPECT_EQ(g[2], 0.0);
  EXPECT_LT(g[5], 0.0);
}

TEST_P(LossTest, CrossEntropyGradients) {
  for (const ClassCase& k : class_cases()) {
    const Tensor t = targets(k.target, k.target_shape(), dev());
    const Tensor w = make(positive(k.classes(), 1.0), {k.classes()}, dev());
    const int64_t ignore = k.target.size() > 1 ? k.target[1] : -100;
    for (Reduction red : kReductions) {
      for (double ls : {0.0, 0.3}) {
        auto fn = [&, red, ls](const TensorList& in) {
          return TensorList{cross_entropy(in[0], t, w, ignore, red, ls)};
        };
        EXPECT_TRUE(gradcheck(fn, {leaf(k.shape, dev())}))
            << ::testing::PrintToString(k.shape) << " " << name(red) << " " << ls;
      }
    }
    auto plain = [&](const TensorList& in) { return TensorList{cross_entropy(in[0], t)}; };
    EXPECT_TRUE(gradgradcheck(plain, {leaf(k.shape, dev(), 1)})) << ::testing::PrintToString(k.shape);
  }
  const ClassCase k{{3, 4}, {1, 3, 0}};
  const Tensor t = targets(k.target, {3}, dev());
  const Tensor w = make(positive(4, 1.0), {4}, dev());
  for (Reduction red : kReductions) {
    auto fn = [&, red](const TensorList& in) { return TensorList{cross_entropy(in[0], t, w, 3, red, 0.25)}; };
    EXPECT_TRUE(gradgradcheck(fn, {leaf(k.shape, dev(), 2)})) << name(red);
  }
  // A non-contiguous input, and float32 gradients against float64.
  auto ft = [&](const TensorList& in) {
    return TensorList{cross_entropy(in[0].t(), t, Tensor(), -100, Reduction::Sum, 0.1)};
  };
  EXPECT_TRUE(gradcheck(ft, {leaf({4, 3}, dev())}));
  Tensor xf = make(irregular(12), {3, 4}, dev(), kFloat32).requires_grad_();
  Tensor xd = make(irregular(12), {3, 4}, dev()).requires_grad_();
  cross_entropy(xf, t, w.to(kFloat32), 3, Reduction::Mean, 0.2).backward();
  cross_entropy(xd, t, w, 3, Reduction::Mean, 0.2).backward();
  EXPECT_TRUE(all_close(xf.grad(), xd.grad(), 1e-5, 1e-6));
}

TEST_P(LossTest, CrossEntropyErrors) {
  const TensorOptions f(kFloat32, dev());
  const Tensor x = ones({2, 3}, f);
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        cross_entropy(x, targets({0, 3}, {2}, dev())).cpu();
      },
      "[cross_entropy] target 3 is out of bounds for 3 classes (valid: 0..2, or ignore_index -100)"));
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        cross_entropy(x, targets({-1, 0}, {2}, dev())).cpu();
      },
      "[cross_entropy] target -1 is out of bounds"));
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        cross_entropy(x, targets({-100, 0}, {2}, dev()), Tensor(), 1).cpu();
      },
      "[cross_entropy] target -100 is out of bounds"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] {
        cross_entropy(x, targets({0, 1}, {2}, dev()).to(kInt32));
      },
      "[cross_entropy] target must hold int64 class indices, got dtype int32"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] {
        cross_entropy(ones({2, 3}, TensorOptions(kInt64, dev())), targets({0, 1}, {2}, dev()));
      },
      "[cross_entropy] logits must be a float tensor"));
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        cross_entropy(x, targets({0, 1, 1}, {3}, dev()));
      },
      "[cross_entropy] target of shape [3] does not fit logits of shape [2, 3] (expected [2])"));
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        cross_entropy(ones({2, 3, 4}, f), targets({0, 1}, {2}, dev()));
      },
      "(expected [2, 4])"));
  EXPECT_TRUE(throws<ShapeError>([&] { cross_entropy(ones({}, f), targets({0}, {}, dev())); },
                                 "[cross_entropy] logits must be [C], [N, C] or [N, C, d...], got a 0-d tensor"));
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        cross_entropy(x, targets({0, 1}, {2}, dev()), ones({2}, f));
      },
      "[cross_entropy] weight must have one entry per class (shape [3]), got shape [2]"));
  EXPECT_TRUE(throws<ValueError>(
      [&] {
        cross_entropy(x, targets({0, 1}, {2}, dev()), Tensor(), -100, Reduction::Mean, 1.5);
      },
      "[cross_entropy] label_smoothing must be in [0, 1], got 1.5"));
}

// ---- nll_loss ---------------------------------------------------------------------------------

TEST_P(LossTest, NllLossMatchesReference) {
  for (const ClassCase& k : class_cases()) {
    const std::vector<double> xv = irregular(numel(k.shape), 0.4);
    const Tensor x = make(xv, k.shape, dev());
    const Tensor t = targets(k.target, k.target_shape(), dev());
    const std::vector<double> w = positive(k.classes(), 3.0);
    for (Reduction red : kReductions) {
      for (bool weighted : {false, true}) {
        for (int64_t ignore : {int64_t{-100}, k.target[0]}) {
          const Tensor y = nll_loss(x, t, weighted ? make(w, {k.classes()}, dev()) : Tensor(), ignore, red);
          const auto expected = ref_class_loss(xv, k, weighted ? w : std::vector<double>{}, ignore, red, 0.0, true);
          EXPECT_TRUE(all_close(y, make(expected, reduced_shape(k, red))))
              << ::testing::PrintToString(k.shape) << " " << name(red) << " w " << weighted << " ignore " << ignore;
        }
      }
    }
  }
  // float16 and a non-contiguous input.
  const ClassCase k{{3, 4}, {0, 3, 2}};
  const Tensor t = targets(k.target, {3}, dev());
  const Tensor xh = make(irregular(12), {3, 4}, dev(), kFloat16);
  EXPECT_TRUE(all_close(nll_loss(xh, t), make(ref_class_loss(values(xh), k, {}, -100, Reduction::Mean, 0, true), {})));
  const Tensor xt = make(values(make(irregular(12), {3, 4}).t()), {4, 3}, dev()).t();
  EXPECT_TRUE(all_close(nll_loss(xt, t, Tensor(), -100, Reduction::Sum),
                        make(ref_class_loss(irregular(12), k, {}, -100, Reduction::Sum, 0, true), {})));
  // nll_loss of log_softmax is cross_entropy.
  const Tensor x = make(irregular(12, 1.0), {3, 4}, dev());
  EXPECT_TRUE(all_close(nll_loss(log_softmax(x, 1), t), cross_entropy(x, t)));
}

TEST_P(LossTest, NllLossGradients) {
  for (const ClassCase& k : class_cases()) {
    const Tensor t = targets(k.target, k.target_shape(), dev());
    const Tensor w = make(positive(k.classes(), 1.0), {k.classes()}, dev());
    for (Reduction red : kReductions) {
      const int64_t ignore = k.target.size() > 1 ? k.target.back() : -100;
      auto fn = [&, red](const TensorList& in) { return TensorList{nll_loss(in[0], t, w, ignore, red)}; };
      EXPECT_TRUE(gradcheck(fn, {leaf(k.shape, dev())})) << ::testing::PrintToString(k.shape) << " " << name(red);
    }
  }
  // Second order through log_softmax, and a gradient that is itself differentiated.
  const Tensor t = targets({2, 0, 1}, {3}, dev());
  auto fn = [&](const TensorList& in) { return TensorList{nll_loss(log_softmax(in[0], 1), t, Tensor(), 0)}; };
  EXPECT_TRUE(gradgradcheck(fn, {leaf({3, 3}, dev())}));
  auto fs = [&](const TensorList& in) {
    return TensorList{nll_loss(in[0] * in[0], t, Tensor(), -100, Reduction::Sum)};
  };
  EXPECT_TRUE(gradgradcheck(fs, {leaf({3, 3}, dev())}));
}

TEST_P(LossTest, NllLossErrors) {
  const TensorOptions f(kFloat32, dev());
  const Tensor x = ones({2, 3}, f);
  EXPECT_TRUE(throws<IndexError>(
      [&] {
        nll_loss(x, targets({0, 5}, {2}, dev())).cpu();
      },
      "[nll_loss] target 5 is out of bounds for 3 classes"));
  EXPECT_TRUE(
      throws<DTypeError>([&] { nll_loss(x, ones({2}, f)); }, "[nll_loss] target must hold int64 class indices"));
  EXPECT_TRUE(throws<ShapeError>([&] { nll_loss(x, targets({0}, {1}, dev())); },
                                 "[nll_loss] target of shape [1] does not fit log_probs of shape [2, 3]"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] {
        nll_loss(x, targets({0, 1}, {2}, dev()), ones({3}, TensorOptions(kInt64, dev())));
      },
      "[nll_loss] weight must be a float tensor"));
}

// ---- mse_loss ---------------------------------------------------------------------------------

TEST_P(LossTest, MseLossMatchesReference) {
  const std::vector<double> a = irregular(12), b = irregular(4, 2.0);
  const Tensor x = make(a, {3, 4}, dev());
  std::vector<double> sq(12);
  for (int i = 0; i < 12; ++i) sq[i] = (a[i] - b[i % 4]) * (a[i] - b[i % 4]);
  const double total = std::accumulate(sq.begin(), sq.end(), 0.0);
  for (DType dt : {kFloat64, kFloat32}) {
    const Tensor xd = x.to(dt), yd = make(b, {4}, dev(), dt);  // broadcast target
    EXPECT_TRUE(all_close(mse_loss(xd, yd, Reduction::None), make(sq, {3, 4})));
    EXPECT_TRUE(all_close(mse_loss(xd, yd), make({total / 12}, {})));
    EXPECT_TRUE(all_close(mse_loss(xd, yd, Reduction::Sum), make({total}, {})));
  }
  // Broadcasting both ways: [3, 1] against [1, 4] gives [3, 4].
  const Tensor c = make({1, 2, 3}, {3, 1}, dev()), d = make({0, 1, 2, 3}, {1, 4}, dev());
  EXPECT_EQ(mse_loss(c, d, Reduction::None).sizes(), (Shape{3, 4}));
  EXPECT_DOUBLE_EQ(mse_loss(c, d, Reduction::Sum).item<double>(), 1 + 0 + 1 + 4 + 4 + 1 + 0 + 1 + 9 + 4 + 1 + 0);
  const Tensor h = make(a, {3, 4}, dev(), kFloat16);
  EXPECT_EQ(mse_loss(h, make(b, {4}, dev(), kFloat16)).dtype(), kFloat16);
}

TEST_P(LossTest, MseLossGradients) {
  for (Reduction red : kReductions) {
    auto fn = [red](const TensorList& in) { return TensorList{mse_loss(in[0], in[1], red)}; };
    const TensorList in{leaf({3, 4}, dev()), leaf({4}, dev(), 1)};
    EXPECT_TRUE(gradcheck(fn, in)) << name(red);
    EXPECT_TRUE(gradgradcheck(fn, in)) << name(red);
  }
}

TEST_P(LossTest, MseLossErrors) {
  const TensorOptions f(kFloat32, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { mse_loss(ones({3, 4}, f), ones({3}, f)); }, "[mse_loss]"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] { mse_loss(ones({3}, TensorOptions(kInt64, dev())), ones({3}, TensorOptions(kInt64, dev()))); },
      "[mse_loss] input and target must be float tensors, got dtypes int64 and int64"));
}

// ---- binary_cross_entropy_with_logits ----------------------------------------------------------

double log_sigmoid(double x) { return x < 0 ? x - std::log1p(std::exp(x)) : -std::log1p(std::exp(-x)); }

TEST_P(LossTest, BinaryCrossEntropyWithLogitsMatchesReference) {
  const Shape shape{3, 4};
  std::vector<double> x = irregular(12);
  x[0] = 100;  // extreme logits must not overflow
  x[1] = -100;
  x[2] = 0;
  std::vector<double> t(12);
  for (int i = 0; i < 12; ++i) t[i] = (i % 3) / 2.0;  // 0, 0.5, 1
  const std::vector<double> w = positive(12, 4.0), pw = positive(4, 5.0);
  for (bool weighted : {false, true}) {
    for (bool pos : {false, true}) {
      std::vector<double> l(12);
      for (int i = 0; i < 12; ++i) {
        const double p = pos ? pw[i % 4] : 1.0;
        l[i] = -(p * t[i] * log_sigmoid(x[i]) + (1 - t[i]) * log_sigmoid(-x[i])) * (weighted ? w[i] : 1.0);
      }
      const double total = std::accumulate(l.begin(), l.end(), 0.0);
      const Tensor wt = weighted ? make(w, shape, dev()) : Tensor();
      const Tensor pwt = pos ? make(pw, {4}, dev()) : Tensor();
      for (DType dt : {kFloat64, kFloat32}) {
        const Tensor xd = make(x, shape, dev(), dt), td = make(t, shape, dev(), dt);
        const Tensor wd = weighted ? wt.to(dt) : Tensor(), pd = pos ? pwt.to(dt) : Tensor();
        EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(xd, td, wd, pd, Reduction::None), make(l, shape)))
            << weighted << pos << dt;
        EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(xd, td, wd, pd), make({total / 12}, {})));
        EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(xd, td, wd, pd, Reduction::Sum), make({total}, {})));
      }
    }
  }
  // 16-bit floats.
  const Tensor xh = make(irregular(12), shape, dev(), kBFloat16), th = make(t, shape, dev(), kBFloat16);
  std::vector<double> lh(12);
  const auto xhv = values(xh);
  for (int i = 0; i < 12; ++i) lh[i] = -(t[i] * log_sigmoid(xhv[i]) + (1 - t[i]) * log_sigmoid(-xhv[i]));
  EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(xh, th, Tensor(), Tensor(), Reduction::None), make(lh, shape),
                        -1, 2e-2));
}

TEST_P(LossTest, BinaryCrossEntropyWithLogitsGradients) {
  std::vector<double> tv(12);
  for (int i = 0; i < 12; ++i) tv[i] = (i % 5) / 4.0;
  for (Reduction red : kReductions) {
    auto fn = [red](const TensorList& in) {
      return TensorList{binary_cross_entropy_with_logits(in[0], in[1], in[2], in[3], red)};
    };
    const TensorList in{leaf({3, 4}, dev()), make(tv, {3, 4}, dev()).requires_grad_(), leaf({3, 1}, dev(), 1),
                        make(positive(4, 2.0), {4}, dev()).requires_grad_()};
    EXPECT_TRUE(gradcheck(fn, in)) << name(red);
    EXPECT_TRUE(gradgradcheck(fn, in)) << name(red);
  }
  // d/dx at x = 0 is sigmoid(0) - t (no kink in the stable form).
  Tensor x = zeros({2}, TensorOptions(kFloat64, dev())).requires_grad_();
  binary_cross_entropy_with_logits(x, make({1, 0}, {2}, dev()), Tensor(), Tensor(), Reduction::Sum).backward();
  EXPECT_TRUE(all_close(x.grad(), make({-0.5, 0.5}, {2})));
}

TEST_P(LossTest, BinaryCrossEntropyWithLogitsErrors) {
  const TensorOptions f(kFloat32, dev());
  const char* op = "[binary_cross_entropy_with_logits]";
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        binary_cross_entropy_with_logits(ones({3, 4}, f), ones({4}, f));
      },
      std::string(op) + " target of shape [4] must have the logits' shape [3, 4]"));
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        binary_cross_entropy_with_logits(ones({3, 4}, f), ones({3, 4}, f), ones({2}, f));
      },
      "weight of shape [2] does not broadcast to the logits' shape [3, 4]"));
  EXPECT_TRUE(throws<ShapeError>(
      [&] {
        binary_cross_entropy_with_logits(ones({3, 4}, f), ones({3, 4}, f), Tensor(), ones({5, 4}, f));
      },
      "pos_weight of shape [5, 4] does not broadcast"));
  EXPECT_TRUE(throws<DTypeError>(
      [&] { binary_cross_entropy_with_logits(ones({3}, f), ones({3}, TensorOptions(kInt64, dev()))); },
      std::string(op) + " target must be a float tensor"));
}


// ---- many classes, 16-bit floats and strided layouts --------------------------------------------

// cross_entropy of every float dtype against float64 loops on the rounded values, for rows of
// classes that fit a warp or span a block, and for classes strided by an inner dim; the
// low-precision gradients against the float64 gradients of the same values.
TEST_P(LossTest, CrossEntropyManyClassesAndStridedClasses) {
  for (const Shape& shape : {Shape{3, 37}, Shape{6, 5000}, Shape{2, 300, 7}}) {
    ClassCase k{shape, {}};
    for (int64_t i = 0; i < numel(k.target_shape()); ++i) k.target.push_back((i * 7919 + 3) % k.classes());
    const int64_t ignore = k.target[1];
    const Tensor t = targets(k.target, k.target_shape(), dev());
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
      const Tensor x = make(irregular(numel(shape), 0.6), shape, dev(), dt);
      const Tensor w = make(positive(k.classes(), 2.0), {k.classes()}, dev(), dt);
      for (Reduction red : kReductions) {
        for (double ls : {0.0, 0.1}) {
          for (bool weighted : {false, true}) {
            const Tensor wt = weighted ? w : Tensor();
            const Tensor y = cross_entropy(x, t, wt, ignore, red, ls);
            const auto expected =
                ref_class_loss(values(x), k, weighted ? values(w) : std::vector<double>{}, ignore, red, ls, false);
            EXPECT_TRUE(all_close(y, make(expected, reduced_shape(k, red))))
                << ::testing::PrintToString(shape) << " " << dt << " " << name(red) << " ls " << ls << " w "
                << weighted;
            const Tensor g = make(irregular(y.numel(), 1.1), y.sizes(), dev(), dt);
            TensorList grads;
            for (DType gt : {dt, kFloat64}) {
              Tensor xg = x.to(gt).detach().requires_grad_();
              const Tensor loss = cross_entropy(xg, t, weighted ? w.to(gt) : Tensor(), ignore, red, ls);
              grads.push_back(autograd::grad({loss}, {xg}, {g.to(gt)})[0]);
            }
            EXPECT_TRUE(all_close(grads[0], grads[1], dt == kFloat32 ? 1e-5 : -1, 1e-6))
                << ::testing::PrintToString(shape) << " " << dt << " " << name(red) << " ls " << ls << " w "
                << weighted;
          }
        }
      }
    }
  }
}

// nll_loss over many classes and a strided layout in 16-bit floats, forward and backward.
TEST_P(LossTest, NllLossManyClassesLowPrecision) {
  for (const Shape& shape : {Shape{6, 5000}, Shape{2, 300, 7}}) {
    ClassCase k{shape, {}};
    for (int64_t i = 0; i < numel(k.target_shape()); ++i) k.target.push_back((i * 7919 + 3) % k.classes());
    const Tensor t = targets(k.target, k.target_shape(), dev());
    for (DType dt : {kFloat32, kBFloat16}) {
      const Tensor x = make(irregular(numel(shape), 0.2), shape, dev(), dt);
      const Tensor w = make(positive(k.classes(), 1.0), {k.classes()}, dev(), dt);
      for (Reduction red : kReductions) {
        const Tensor y = nll_loss(x, t, w, k.target[0], red);
        EXPECT_TRUE(all_close(y, make(ref_class_loss(values(x), k, values(w), k.target[0], red, 0.0, true),
                                      reduced_shape(k, red))))
            << ::testing::PrintToString(shape) << " " << dt << " " << name(red);
        const Tensor g = make(irregular(y.numel(), 1.1), y.sizes(), dev(), dt);
        Tensor xg = x.detach().requires_grad_();
        const Tensor gx = autograd::grad({nll_loss(xg, t, w, k.target[0], red)}, {xg}, {g})[0];
        Tensor xd = x.to(kFloat64).requires_grad_();
        const Tensor gd =
            autograd::grad({nll_loss(xd, t, w.to(kFloat64), k.target[0], red)}, {xd}, {g.to(kFloat64)})[0];
        EXPECT_TRUE(all_close(gx, gd)) << ::testing::PrintToString(shape) << " " << dt << " " << name(red);
      }
    }
  }
}

}  // namespace
}  // namespace rtx::testing
