// Tests of matmul, mm, bmm and linear against naive float64 loops: every rank combination of numpy's
// matmul (1-d, 2-d, batched with broadcast batch dims), transposed, step-sliced and expanded operands,
// zero-size dims (K = 0 gives zeros), float16/bfloat16/integer dtypes (integers wrap), products large
// enough for BLAS threading and many small batched ones; first and second order gradients; every error.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "test_utils.h"

namespace rtx {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::gradgradcheck;
using testing::make;
using testing::throws;
using testing::values;

class LinalgTest : public testing::DeviceTest {};
INSTANTIATE_DEVICE_TESTS(LinalgTest);

// ---- data and references -----------------------------------------------------------------------

uint64_t lcg(uint64_t& state) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return state >> 33;
}

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

// Multiples of 0.25 in [-2, 2] (exact in every float type; small integers when scale is 4).
std::vector<double> quarters(int64_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = (static_cast<double>(lcg(seed) % 17) - 8.0) * 0.25 * scale;
  return v;
}

// Distinct smooth values in [-1.5, 1.5] for gradient checks.
std::vector<double> smooth(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = (static_cast<double>(lcg(seed) % 1000003) / 1000003.0 - 0.5) * 3.0;
  return v;
}

Tensor data(const Shape& shape, uint64_t seed, Device dev, DType dt = kFloat64) {
  return make(quarters(numel(shape), seed), shape, dev, dt);
}

Tensor leaf(const Shape& shape, uint64_t seed, Device dev) {
  return make(smooth(numel(shape), seed), shape, dev).requires_grad_();
}

// numpy's matmul in float64 loops (1-d operands get a unit dim that is dropped again).
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = values(a), bv = values(b);
  Shape sa = a.sizes(), sb = b.sizes();
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), 1);
  if (b1) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nd = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), nd - ba.size(), 1);
  bb.insert(bb.begin(), nd - bb.size(), 1);
  Shape batch(nd);
  for (size_t d = 0; d < nd; ++d) batch[d] = ba[d] == 1 ? bb[d] : ba[d];
  const int64_t batches = numel(batch);
  std::vector<double> out(static_cast<size_t>(batches * m * n), 0.0);
  for (int64_t t = 0; t < batches; ++t) {
    int64_t rem = t, ia = 0, ib = 0, step_a = 1, step_b = 1;
    for (int64_t d = static_cast<int64_t>(nd) - 1; d >= 0; --d) {
      const int64_t idx = rem % batch[d];
      rem /= batch[d];
      ia += (ba[d] == 1 ? 0 : idx) * step_a;
      ib += (bb[d] == 1 ? 0 : idx) * step_b;
      step_a *= ba[d];
      step_b *= bb[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk) s += av[(ia * m + i) * k + kk] * bv[(ib * k + kk) * n + j];
        out[(t * m + i) * n + j] = s;
      }
  }
  Shape shape = batch;
  if (!a1) shape.push_back(m);
  if (!b1) shape.push_back(n);
  return make(out, shape);
}

struct ShapePair {
  Shape a, b;
};

// Every rank combination of matmul, broadcast batches included.
const std::vector<ShapePair> kRankCombos = {
    {{3}, {3}},             {{3}, {3, 4}},          {{2, 3}, {3}},          {{2, 3}, {3, 4}},
    {{5, 2, 3}, {3}},       {{3}, {5, 3, 4}},       {{5, 2, 3}, {3, 4}},    {{2, 3}, {5, 3, 4}},
    {{5, 2, 3}, {5, 3, 4}}, {{2, 1, 2, 3}, {5, 3, 4}}, {{1, 2, 3}, {4, 3, 2}}, {{2, 1, 2, 3}, {3, 3, 2}},
};

// ---- forward ------------------------------------------------------------------------------------

TEST_P(LinalgTest, MatmulEveryRankCombination) {
  for (DType dt : {kFloat64, kFloat32}) {
    uint64_t seed = 1;
    for (const auto& [sa, sb] : kRankCombos) {
      const Tensor a = data(sa, seed++, dev(), dt), b = data(sb, seed++, dev(), dt);
      const Tensor out = matmul(a, b);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.device(), dev());
      EXPECT_TRUE(all_close(out, ref_matmul(a, b))) << ::testing::PrintToString(sa) << " @ " << ::testing::PrintToString(sb);
      EXPECT_TRUE(all_close(a.matmul(b), ref_matmul(a, b)));
    }
  }
}

TEST_P(LinalgTest, MatmulOneDimensionalGivesZeroDim) {
  const Tensor out = matmul(make({1, 2, 3}, {3}, dev()), make({4, 5, 6}, {3}, dev()));
  EXPECT_EQ(out.dim(), 0);
  EXPECT_DOUBLE_EQ(out.item<double>(), 32.0);
}

TEST_P(LinalgTest, MatmulNonContiguousOperands) {
  for (DType dt : {kFloat64, kFloat32, kFloat16}) {
    const Tensor at = data({4, 3}, 11, dev(), dt).t();                       // [3, 4], column-major
    const Tensor bt = data({5, 4}, 12, dev(), dt).t();                       // [4, 5], column-major
    const Tensor as = data({3, 8}, 13, dev(), dt).slice(1, 0, std::nullopt, 2);  // [3, 4], column step 2
    const Tensor bs = data({8, 10}, 14, dev(), dt).slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2);
    const Tensor ae = data({1, 4}, 15, dev(), dt).expand({3, 4});            // row stride 0
    const Tensor a = data({3, 4}, 16, dev(), dt), b = data({4, 5}, 17, dev(), dt);
    for (const Tensor& x : {at, as, ae, a})
      for (const Tensor& y : {bt, bs, b}) EXPECT_TRUE(all_close(matmul(x, y), ref_matmul(x, y))) << dtype_name(dt);
    // Batched: transposed matrices, a permuted batch dim, an expanded (stride-0) batch.
    const Tensor bat = data({2, 5, 3}, 18, dev(), dt).mT();                  // [2, 3, 5]
    const Tensor bbt = data({4, 2, 5}, 19, dev(), dt).permute({1, 2, 0});    // [2, 5, 4]
    const Tensor bex = data({1, 5, 6}, 20, dev(), dt).expand({2, 5, 6});
    EXPECT_TRUE(all_close(matmul(bat, bbt), ref_matmul(bat, bbt)));
    EXPECT_TRUE(all_close(matmul(bat, bex), ref_matmul(bat, bex)));
    // A 3-d left operand whose batch dims cannot fold into rows, times a matrix.
    const Tensor a3 = data({3, 2, 4}, 21, dev(), dt).transpose(0, 1);        // [2, 3, 4]
    EXPECT_TRUE(all_close(matmul(a3, b), ref_matmul(a3, b)));
    EXPECT_TRUE(all_close(matmul(a3, bt), ref_matmul(a3, bt)));
  }
}

TEST_P(LinalgTest, MatmulZeroSizeDims) {
  const Tensor k0 = matmul(data({2, 0}, 1, dev()), data({0, 3}, 2, dev()));
  EXPECT_TRUE(all_close(k0, zeros({2, 3}, TensorOptions(kFloat64))));
  for (DType dt : {kFloat32, kFloat16, kInt64}) {
    const Tensor z = matmul(data({4, 2, 0}, 3, dev(), dt), data({0, 5}, 4, dev(), dt));
    EXPECT_TRUE(all_close(z, zeros({4, 2, 5}, TensorOptions(dt)))) << dtype_name(dt);
  }
  EXPECT_EQ(matmul(data({0, 3}, 5, dev()), data({3, 4}, 6, dev())).sizes(), (Shape{0, 4}));
  EXPECT_EQ(matmul(data({2, 3}, 7, dev()), data({3, 0}, 8, dev())).sizes(), (Shape{2, 0}));
  EXPECT_EQ(matmul(data({0, 2, 3}, 9, dev()), data({1, 3, 4}, 10, dev())).sizes(), (Shape{0, 2, 4}));
  const Tensor dot0 = matmul(data({0}, 11, dev()), data({0}, 12, dev()));
  EXPECT_EQ(dot0.dim(), 0);
  EXPECT_EQ(dot0.item<double>(), 0.0);
}

TEST_P(LinalgTest, MatmulSixteenBitFloats) {
  for (DType dt : {kFloat16, kBFloat16}) {
    for (const auto& [sa, sb] : std::vector<ShapePair>{{{3, 4}, {4, 5}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {2, 4, 2}}}) {
      const Tensor a = data(sa, 31, dev(), dt), b = data(sb, 32, dev(), dt);
      const Tensor out = matmul(a, b);
      EXPECT_EQ(out.dtype(), dt);
      // Inputs are exact in dt; the float product rounds once to dt.
      EXPECT_TRUE(all_close(out, ref_matmul(a, b), dt == kFloat16 ? 1e-3 : 8e-3, 1e-3)) << dtype_name(dt);
    }
  }
}

TEST_P(LinalgTest, MatmulIntegers) {
  for (DType dt : {kInt32, kInt64, kInt8, kUInt8}) {
    // Integers in [-8, 8] ([0, 8] for uint8).
    auto ints = [dt](int64_t n, uint64_t seed) {
      std::vector<double> v = quarters(n, seed, 4.0);
      if (dt == kUInt8) std::transform(v.begin(), v.end(), v.begin(), [](double x) { return x < 0 ? -x : x; });
      return v;
    };
    const Tensor a = make(ints(2 * 3 * 4, 41), {2, 3, 4}, dev(), dt);
    const Tensor b = make(ints(4 * 5, 42), {4, 5}, dev(), dt).t().contiguous().t();  // column-major
    const Tensor out = matmul(a, b);
    EXPECT_EQ(out.dtype(), dt);
    std::vector<double> expected = values(ref_matmul(a.to(kFloat64), b.to(kFloat64)));
    if (dt == kInt8 || dt == kUInt8) {
      // Wraps modulo 256 like PyTorch.
      for (double& e : expected) {
        int64_t w = static_cast<int64_t>(e) & 0xff;
        if (dt == kInt8 && w >= 128) w -= 256;
        e = static_cast<double>(w);
      }
    }
    EXPECT_EQ(values(out), expected) << dtype_name(dt);
  }
  // Large enough for the parallel row split.
  const Tensor a = make(quarters(64 * 300, 43, 4.0), {64, 300}, dev(), kInt32);
  const Tensor b = make(quarters(300 * 70, 44, 4.0), {300, 70}, dev(), kInt32);
  EXPECT_EQ(values(matmul(a, b)), values(ref_matmul(a, b)));
}

TEST_P(LinalgTest, MatmulLargeAndManySmallProducts) {
  // Large enough that BLAS threads each product (folded and batched), and many small batched products.
  const std::vector<ShapePair> cases = {{{3, 70, 80}, {80, 90}}, {{2, 70, 80}, {2, 80, 90}}, {{64, 5, 6}, {64, 6, 7}},
                                        {{64, 5, 6}, {6, 7}}};
  for (DType dt : {kFloat64, kFloat32}) {
    for (const auto& [sa, sb] : cases) {
      const Tensor a = data(sa, 51, dev(), dt), b = data(sb, 52, dev(), dt).mT().contiguous().mT();
      EXPECT_TRUE(all_close(matmul(a, b), ref_matmul(a, b), 1e-5, 1e-4));
    }
  }
  // A change of thread count reaches both OpenMP and BLAS and leaves results alone.
  const int threads = get_num_threads();
  set_num_threads(1);
  const Tensor a = data({70, 80}, 53, dev()), b = data({80, 90}, 54, dev());
  EXPECT_TRUE(all_close(matmul(a, b), ref_matmul(a, b)));
  set_num_threads(threads);
  EXPECT_EQ(get_num_threads(), threads);
}

TEST_P(LinalgTest, MmAndBmm) {
  const Tensor a = data({3, 4}, 61, dev()), b = data({4, 2}, 62, dev());
  EXPECT_TRUE(all_close(mm(a, b), ref_matmul(a, b)));
  EXPECT_TRUE(all_close(a.mm(b), ref_matmul(a, b)));
  const Tensor x = data({5, 3, 4}, 63, dev()), y = data({5, 2, 4}, 64, dev()).mT();
  EXPECT_TRUE(all_close(bmm(x, y), ref_matmul(x, y)));
  EXPECT_TRUE(all_close(x.bmm(y), ref_matmul(x, y)));
}

TEST_P(LinalgTest, Linear) {
  const Tensor w = data({3, 4}, 71, dev()), bias = data({3}, 72, dev());
  for (const Shape& xs : {Shape{4}, Shape{5, 4}, Shape{2, 5, 4}}) {
    const Tensor x = data(xs, 73, dev());
    const Tensor plain = ref_matmul(x, w.t().contiguous());
    EXPECT_TRUE(all_close(linear(x, w), plain));
    EXPECT_TRUE(all_close(linear(x, w, bias), plain + bias.to(Device(kCPU))));
  }
  const Tensor w1 = data({4}, 74, dev());  // a 1-d weight gives one output per row
  EXPECT_TRUE(all_close(linear(data({5, 4}, 75, dev()), w1), ref_matmul(data({5, 4}, 75, dev()), w1)));
  EXPECT_TRUE(all_close(linear(data({2, 4}, 76, dev(), kFloat32), data({3, 4}, 77, dev(), kFloat32)),
                        ref_matmul(data({2, 4}, 76, dev()), data({3, 4}, 77, dev()).t().contiguous())));
}

// ---- gradients ----------------------------------------------------------------------------------

TEST_P(LinalgTest, Gradients) {
  uint64_t seed = 100;
  for (const auto& [sa, sb] : kRankCombos) {
    const Tensor a = leaf(sa, seed++, dev()), b = leaf(sb, seed++, dev());
    EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{matmul(in[0], in[1])}; }, {a, b}))
        << ::testing::PrintToString(sa) << " @ " << ::testing::PrintToString(sb);
  }
  const Tensor a = leaf({3, 4}, 1, dev()), b = leaf({4, 2}, 2, dev());
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{mm(in[0], in[1].t().contiguous().t())}; }, {a, b}));
  const Tensor x = leaf({2, 3, 4}, 3, dev()), y = leaf({2, 2, 4}, 4, dev());
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{bmm(in[0], in[1].mT())}; }, {x, y}));
  const Tensor lx = leaf({2, 3, 4}, 5, dev()), w = leaf({5, 4}, 6, dev()), bias = leaf({5}, 7, dev());
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{linear(in[0], in[1], in[2])}; }, {lx, w, bias}));
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{linear(in[0], in[1])}; }, {lx, w}));
  // Only one operand requires grad.
  const Tensor c = make(smooth(8, 8), {4, 2}, dev());
  EXPECT_TRUE(gradcheck([&](const TensorList& in) { return TensorList{matmul(in[0], c)}; }, {a}));
  // K = 0: the gradients are zero tensors of the operands' shapes.
  const Tensor e0 = make({}, {2, 0}, dev()).requires_grad_(), e1 = make({}, {0, 3}, dev()).requires_grad_();
  matmul(e0, e1).sum().backward();
  EXPECT_EQ(e0.grad().sizes(), (Shape{2, 0}));
  EXPECT_EQ(e1.grad().sizes(), (Shape{0, 3}));
}

TEST_P(LinalgTest, SecondOrderGradients) {
  const auto mat = [](const TensorList& in) { return TensorList{matmul(in[0], in[1])}; };
  EXPECT_TRUE(gradgradcheck(mat, {leaf({3, 4}, 1, dev()), leaf({4, 2}, 2, dev())}));
  EXPECT_TRUE(gradgradcheck(mat, {leaf({2, 1, 2, 3}, 3, dev()), leaf({2, 3, 2}, 4, dev())}));
  EXPECT_TRUE(gradgradcheck(mat, {leaf({3}, 5, dev()), leaf({2, 3, 2}, 6, dev())}));
  EXPECT_TRUE(gradgradcheck([](const TensorList& in) { return TensorList{linear(in[0], in[1], in[2])}; },
                            {leaf({2, 4}, 7, dev()), leaf({3, 4}, 8, dev()), leaf({3}, 9, dev())}));
}

// ---- errors -------------------------------------------------------------------------------------

TEST_P(LinalgTest, Errors) {
  const Tensor a = data({2, 3}, 1, dev()), b = data({4, 5}, 2, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(a, b); }, "[matmul] shapes [2, 3] and [4, 5]: inner dimensions 3 != 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(data({3}, 3, dev()), data({4}, 4, dev())); },
                                 "[matmul] shapes [3] and [4]: inner dimensions 3 != 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(data({2, 2, 3}, 3, dev()), data({3, 3, 4}, 4, dev())); },
                                 "batch dimensions [2] and [3] cannot be broadcast"));
  const Tensor s = scalar_tensor(2.0, TensorOptions(kFloat64, dev()));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(s, a); }, "[matmul] both operands must be at least 1-d, got shapes [] and [2, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(a, s); }, "at least 1-d"));
  EXPECT_TRUE(throws<DTypeError>([&] { matmul(a, data({3, 2}, 5, dev(), kFloat32)); },
                                 "[matmul] expected both operands to have the same dtype, got float64 and float32"));
  EXPECT_TRUE(throws<DTypeError>([&] { matmul(a.to(kBool), a.t().to(kBool)); }, "[matmul] not supported for bool"));
  EXPECT_TRUE(throws<ValueError>([&] { matmul(Tensor(), a); }, "[matmul] first operand is an undefined tensor"));
  EXPECT_TRUE(throws<ShapeError>([&] { mm(data({2, 2, 3}, 6, dev()), b); }, "[mm] expected 2-d operands, got shapes [2, 2, 3] and [4, 5]"));
  EXPECT_TRUE(throws<ShapeError>([&] { mm(a, b); }, "[mm] shapes [2, 3] and [4, 5]: inner dimensions 3 != 4"));
  EXPECT_TRUE(throws<DTypeError>([&] { mm(a, data({3, 2}, 5, dev(), kInt64)); }, "[mm] expected both operands to have the same dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { bmm(a, b); }, "[bmm] expected 3-d operands, got shapes [2, 3] and [4, 5]"));
  EXPECT_TRUE(throws<ShapeError>([&] { bmm(data({2, 2, 3}, 7, dev()), data({3, 3, 4}, 8, dev())); },
                                 "[bmm] shapes [2, 2, 3] and [3, 3, 4]: batch sizes 2 != 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { bmm(data({2, 2, 3}, 7, dev()), data({2, 4, 4}, 8, dev())); },
                                 "[bmm] shapes [2, 2, 3] and [2, 4, 4]: inner dimensions 3 != 4"));
  const Tensor w = data({5, 3}, 9, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { linear(data({2, 4}, 10, dev()), w); },
                                 "[linear] input of shape [2, 4] has 4 features, but weight of shape [5, 3] expects in_features = 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { linear(a, data({1, 5, 3}, 11, dev())); }, "[linear] weight must be 2-d"));
  EXPECT_TRUE(throws<ShapeError>([&] { linear(a, w, data({4}, 12, dev())); },
                                 "[linear] bias of shape [4] does not match out_features = 5 of weight [5, 3]"));
  EXPECT_TRUE(throws<DTypeError>([&] { linear(a, w, data({5}, 13, dev(), kFloat32)); },
                                 "[linear] bias has dtype float32, but the input has float64"));
  EXPECT_TRUE(throws<DTypeError>([&] { linear(a, w.to(kFloat32)); }, "[linear] expected both operands to have the same dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { linear(s, w); }, "[linear] the input must be at least 1-d"));
}

TEST_P(LinalgTest, DeviceMismatch) {
  if (dev().is_cpu()) GTEST_SKIP() << "needs a second device";
  const Tensor a = data({2, 3}, 1, dev()), b = data({3, 2}, 2, Device(kCPU));
  EXPECT_TRUE(throws<DeviceError>([&] { matmul(a, b); }, "[matmul] expected all tensors on one device"));
  EXPECT_TRUE(throws<DeviceError>([&] { linear(a, b.t(), data({2}, 3, dev())); }, "[linear] expected all tensors on one device"));
}

}  // namespace
}  // namespace rtx
