// Tests of matmul, mm, bmm and linear against naive float64 loops: every rank combination of numpy's
// matmul (1-d, 2-d, batched with broadcast batch dims), transposed, step-sliced and expanded operands,
// zero-size dims (K = 0 gives zeros), float16/bfloat16/integer dtypes (integers wrap), products large
// enough for BLAS threading and many small batched ones; first and second order gradients; every error;
// the layouts a library GEMM reads in place or copies (transposed, leading-dimension and broadcast
// batches), float32 precision switching (exact by default, TF32 when allowed) and deterministic mode.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class LinalgTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(LinalgTest);

// ---- data and references -----------------------------------------------------------------------

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
      const Tensor a = quarter_tensor(sa, seed++, dev(), dt), b = quarter_tensor(sb, seed++, dev(), dt);
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
    const Tensor at = quarter_tensor({4, 3}, 11, dev(), dt).t();                       // [3, 4], column-major
    const Tensor bt = quarter_tensor({5, 4}, 12, dev(), dt).t();                       // [4, 5], column-major
    const Tensor as = quarter_tensor({3, 8}, 13, dev(), dt).slice(1, 0, std::nullopt, 2);  // [3, 4], column step 2
    const Tensor bs = quarter_tensor({8, 10}, 14, dev(), dt).slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 2);
    const Tensor ae = quarter_tensor({1, 4}, 15, dev(), dt).expand({3, 4});            // row stride 0
    const Tensor a = quarter_tensor({3, 4}, 16, dev(), dt), b = quarter_tensor({4, 5}, 17, dev(), dt);
    for (const Tensor& x : {at, as, ae, a})
      for (const Tensor& y : {bt, bs, b}) EXPECT_TRUE(all_close(matmul(x, y), ref_matmul(x, y))) << dtype_name(dt);
    // Batched: transposed matrices, a permuted batch dim, an expanded (stride-0) batch.
    const Tensor bat = quarter_tensor({2, 5, 3}, 18, dev(), dt).mT();                  // [2, 3, 5]
    const Tensor bbt = quarter_tensor({4, 2, 5}, 19, dev(), dt).permute({1, 2, 0});    // [2, 5, 4]
    const Tensor bex = quarter_tensor({1, 5, 6}, 20, dev(), dt).expand({2, 5, 6});
    EXPECT_TRUE(all_close(matmul(bat, bbt), ref_matmul(bat, bbt)));
    EXPECT_TRUE(all_close(matmul(bat, bex), ref_matmul(bat, bex)));
    // A 3-d left operand whose batch dims cannot fold into rows, times a matrix.
    const Tensor a3 = quarter_tensor({3, 2, 4}, 21, dev(), dt).transpose(0, 1);        // [2, 3, 4]
    EXPECT_TRUE(all_close(matmul(a3, b), ref_matmul(a3, b)));
    EXPECT_TRUE(all_close(matmul(a3, bt), ref_matmul(a3, bt)));
  }
}

TEST_P(LinalgTest, MatmulZeroSizeDims) {
  const Tensor k0 = matmul(quarter_tensor({2, 0}, 1, dev()), quarter_tensor({0, 3}, 2, dev()));
  EXPECT_TRUE(all_close(k0, zeros({2, 3}, TensorOptions(kFloat64))));
  for (DType dt : {kFloat32, kFloat16, kInt64}) {
    const Tensor z = matmul(quarter_tensor({4, 2, 0}, 3, dev(), dt), quarter_tensor({0, 5}, 4, dev(), dt));
    EXPECT_TRUE(all_close(z, zeros({4, 2, 5}, TensorOptions(dt)))) << dtype_name(dt);
  }
  EXPECT_EQ(matmul(quarter_tensor({0, 3}, 5, dev()), quarter_tensor({3, 4}, 6, dev())).sizes(), (Shape{0, 4}));
  EXPECT_EQ(matmul(quarter_tensor({2, 3}, 7, dev()), quarter_tensor({3, 0}, 8, dev())).sizes(), (Shape{2, 0}));
  EXPECT_EQ(matmul(quarter_tensor({0, 2, 3}, 9, dev()), quarter_tensor({1, 3, 4}, 10, dev())).sizes(), (Shape{0, 2, 4}));
  const Tensor dot0 = matmul(quarter_tensor({0}, 11, dev()), quarter_tensor({0}, 12, dev()));
  EXPECT_EQ(dot0.dim(), 0);
  EXPECT_EQ(dot0.item<double>(), 0.0);
}

TEST_P(LinalgTest, MatmulSixteenBitFloats) {
  for (DType dt : {kFloat16, kBFloat16}) {
    for (const auto& [sa, sb] : std::vector<ShapePair>{{{3, 4}, {4, 5}}, {{2, 3, 4}, {4}}, {{2, 3, 4}, {2, 4, 2}}}) {
      const Tensor a = quarter_tensor(sa, 31, dev(), dt), b = quarter_tensor(sb, 32, dev(), dt);
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
      const Tensor a = quarter_tensor(sa, 51, dev(), dt), b = quarter_tensor(sb, 52, dev(), dt).mT().contiguous().mT();
      EXPECT_TRUE(all_close(matmul(a, b), ref_matmul(a, b), 1e-5, 1e-4));
    }
  }
  // A change of thread count reaches both OpenMP and BLAS and leaves results alone.
  const int threads = get_num_threads();
  set_num_threads(1);
  const Tensor a = quarter_tensor({70, 80}, 53, dev()), b = quarter_tensor({80, 90}, 54, dev());
  EXPECT_TRUE(all_close(matmul(a, b), ref_matmul(a, b)));
  set_num_threads(threads);
  EXPECT_EQ(get_num_threads(), threads);
}

TEST_P(LinalgTest, MatmulFloat32SameBitsForEveryThreadCount) {
  // float32 products small and large (in a build with oneDNN: OpenBLAS's and oneDNN's sgemm), plain,
  // transposed and batched, on irregular data: the same bits with one thread as with two, within
  // float32's rounding bound of the float64 product.
  const std::vector<ShapePair> cases = {{{20, 20}, {20, 20}},     {{70, 80}, {80, 90}},   {{128, 256}, {256, 10}},
                                        {{16, 4096}, {4096, 24}}, {{3, 40, 64}, {64, 48}}, {{300, 64}, {64, 200}}};
  const int threads = get_num_threads();
  uint64_t seed = 91;
  for (const auto& [sa, sb] : cases) {
    for (bool transposed : {false, true}) {
      const Tensor a = make(smooth(numel(sa), seed++), sa, dev(), kFloat32);
      const Tensor b0 = make(smooth(numel(sb), seed++), sb, dev(), kFloat32);
      const Tensor b = transposed ? b0.mT().contiguous().mT() : b0;
      set_num_threads(2);
      const std::vector<double> two = values(matmul(a, b));
      set_num_threads(1);
      const std::vector<double> one = values(matmul(a, b));
      set_num_threads(threads);
      EXPECT_EQ(one, two) << ::testing::PrintToString(sa) << " x " << ::testing::PrintToString(sb);
      const auto ref = values(ref_matmul(a, b)), bound = values(ref_matmul(rtx::abs(a), rtx::abs(b)));
      const int64_t k = sa.back();
      for (size_t i = 0; i < two.size(); ++i)
        ASSERT_LE(std::fabs(two[i] - ref[i]), k * std::ldexp(1.0, -24) * bound[i]) << "element " << i;
    }
  }
}

TEST_P(LinalgTest, MmAndBmm) {
  const Tensor a = quarter_tensor({3, 4}, 61, dev()), b = quarter_tensor({4, 2}, 62, dev());
  EXPECT_TRUE(all_close(mm(a, b), ref_matmul(a, b)));
  EXPECT_TRUE(all_close(a.mm(b), ref_matmul(a, b)));
  const Tensor x = quarter_tensor({5, 3, 4}, 63, dev()), y = quarter_tensor({5, 2, 4}, 64, dev()).mT();
  EXPECT_TRUE(all_close(bmm(x, y), ref_matmul(x, y)));
  EXPECT_TRUE(all_close(x.bmm(y), ref_matmul(x, y)));
}

TEST_P(LinalgTest, Linear) {
  const Tensor w = quarter_tensor({3, 4}, 71, dev()), bias = quarter_tensor({3}, 72, dev());
  for (const Shape& xs : {Shape{4}, Shape{5, 4}, Shape{2, 5, 4}}) {
    const Tensor x = quarter_tensor(xs, 73, dev());
    const Tensor plain = ref_matmul(x, w.t().contiguous());
    EXPECT_TRUE(all_close(linear(x, w), plain));
    EXPECT_TRUE(all_close(linear(x, w, bias), plain + bias.to(Device(kCPU))));
  }
  const Tensor w1 = quarter_tensor({4}, 74, dev());  // a 1-d weight gives one output per row
  EXPECT_TRUE(all_close(linear(quarter_tensor({5, 4}, 75, dev()), w1), ref_matmul(quarter_tensor({5, 4}, 75, dev()), w1)));
  EXPECT_TRUE(all_close(linear(quarter_tensor({2, 4}, 76, dev(), kFloat32), quarter_tensor({3, 4}, 77, dev(), kFloat32)),
                        ref_matmul(quarter_tensor({2, 4}, 76, dev()), quarter_tensor({3, 4}, 77, dev()).t().contiguous())));
}

// linear with a matrix weight is one product with the bias fused in (cuBLASLt's bias epilogue on CUDA,
// or a prefill of the bias rows where the epilogue cannot take the bias) and one node whose weight
// gradient has the weight's own layout.
TEST_P(LinalgTest, LinearOneProductWithBias) {
  for (DType dtype : {kFloat64, kFloat32, kBFloat16}) {
    const double tol = dtype == kBFloat16 ? 2e-2 : 1e-6;
    const Tensor x = quarter_tensor({2, 33, 96}, 81, dev(), dtype), w = quarter_tensor({80, 96}, 82, dev(), dtype);
    const Tensor bias = quarter_tensor({80}, 83, dev(), dtype);
    const Tensor ref = ref_matmul(x.to(kFloat64), w.to(kFloat64).t().contiguous()) + bias.to(Device(kCPU)).to(kFloat64);
    EXPECT_TRUE(all_close(linear(x, w, bias).to(kFloat64), ref, tol, tol)) << dtype;
    // A bias 4 bytes past an allocation's start: not aligned for the epilogue, added by the prefill.
    const Tensor storage = quarter_tensor({81}, 84, dev(), dtype);
    const Tensor shifted = storage.narrow(0, 1, 80);
    const Tensor ref_shifted = ref_matmul(x.to(kFloat64), w.to(kFloat64).t().contiguous()) +
                               shifted.to(Device(kCPU)).to(kFloat64);
    EXPECT_TRUE(all_close(linear(x, w, shifted).to(kFloat64), ref_shifted, tol, tol)) << dtype;
    // A transposed weight view and a non-contiguous input are read in place.
    const Tensor wt = quarter_tensor({96, 80}, 85, dev(), dtype).t(), xs = quarter_tensor({33, 2, 96}, 86, dev(), dtype).transpose(0, 1);
    const Tensor ref_views = ref_matmul(xs.to(kFloat64).contiguous(), wt.to(kFloat64).t().contiguous()) +
                             bias.to(Device(kCPU)).to(kFloat64);
    EXPECT_TRUE(all_close(linear(xs, wt, bias).to(kFloat64), ref_views, tol, tol)) << dtype;
  }
  // K = 0: every row is the bias; its gradient sums the rows.
  const Tensor x0 = make({}, {3, 0}, dev()).requires_grad_(), w0 = make({}, {2, 0}, dev()).requires_grad_();
  const Tensor b0 = make({1.5, -2.0}, {2}, dev()).requires_grad_();
  const Tensor y0 = linear(x0, w0, b0);
  EXPECT_TRUE(all_close(y0, make({1.5, -2.0, 1.5, -2.0, 1.5, -2.0}, {3, 2})));
  y0.sum().backward();
  EXPECT_TRUE(all_close(b0.grad(), make({3.0, 3.0}, {2})));
  EXPECT_EQ(w0.grad().sizes(), (Shape{2, 0}));
  EXPECT_EQ(x0.grad().sizes(), (Shape{3, 0}));
  // The gradients equal the composite's, and the weight's is contiguous like the weight.
  const Tensor x = leaf({4, 3, 5}, dev(), 87), w = leaf({6, 5}, dev(), 88), b = leaf({6}, dev(), 89);
  const Tensor g = quarter_tensor({4, 3, 6}, 90, dev());
  (linear(x, w, b) * g).sum().backward();
  EXPECT_TRUE(w.grad().is_contiguous());
  const Tensor gx = x.grad().clone(), gw = w.grad().clone(), gb = b.grad().clone();
  x.grad().zero_();
  w.grad().zero_();
  b.grad().zero_();
  ((matmul(x, w.t()) + b) * g).sum().backward();
  EXPECT_TRUE(all_close(gx, x.grad()));
  EXPECT_TRUE(all_close(gw, w.grad()));
  EXPECT_TRUE(all_close(gb, b.grad()));
  // In float32 and bfloat16 the weight and bias gradients come from one product where the backend fuses
  // the bias gradient (cuBLASLt's bias-gradient epilogue): the same values as the separate sum.
  for (DType dtype : {kFloat32, kBFloat16}) {
    const double tol = dtype == kBFloat16 ? 2e-2 : 1e-5;
    const Tensor xf = quarter_tensor({64, 48}, 91, dev(), dtype), gf = quarter_tensor({64, 40}, 92, dev(), dtype);
    const Tensor wf = quarter_tensor({40, 48}, 93, dev(), dtype).requires_grad_(),
                 bf = quarter_tensor({40}, 94, dev(), dtype).requires_grad_();
    (linear(xf, wf, bf) * gf).sum().backward();
    const Tensor g64 = gf.to(kFloat64);
    EXPECT_TRUE(all_close(wf.grad().to(kFloat64), ref_matmul(g64.t().contiguous(), xf.to(kFloat64)), tol, tol)) << dtype;
    EXPECT_TRUE(all_close(bf.grad().to(kFloat64), g64.sum({0}), tol, tol)) << dtype;
  }
}

// ---- gradients ----------------------------------------------------------------------------------

TEST_P(LinalgTest, Gradients) {
  uint64_t seed = 100;
  for (const auto& [sa, sb] : kRankCombos) {
    const Tensor a = leaf(sa, dev(), seed++), b = leaf(sb, dev(), seed++);
    EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{matmul(in[0], in[1])}; }, {a, b}))
        << ::testing::PrintToString(sa) << " @ " << ::testing::PrintToString(sb);
  }
  const Tensor a = leaf({3, 4}, dev(), 1), b = leaf({4, 2}, dev(), 2);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{mm(in[0], in[1].t().contiguous().t())}; }, {a, b}));
  const Tensor x = leaf({2, 3, 4}, dev(), 3), y = leaf({2, 2, 4}, dev(), 4);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{bmm(in[0], in[1].mT())}; }, {x, y}));
  const Tensor lx = leaf({2, 3, 4}, dev(), 5), w = leaf({5, 4}, dev(), 6), bias = leaf({5}, dev(), 7);
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
  EXPECT_TRUE(gradgradcheck(mat, {leaf({3, 4}, dev(), 1), leaf({4, 2}, dev(), 2)}));
  EXPECT_TRUE(gradgradcheck(mat, {leaf({2, 1, 2, 3}, dev(), 3), leaf({2, 3, 2}, dev(), 4)}));
  EXPECT_TRUE(gradgradcheck(mat, {leaf({3}, dev(), 5), leaf({2, 3, 2}, dev(), 6)}));
  EXPECT_TRUE(gradgradcheck([](const TensorList& in) { return TensorList{linear(in[0], in[1], in[2])}; },
                            {leaf({2, 4}, dev(), 7), leaf({3, 4}, dev(), 8), leaf({3}, dev(), 9)}));
}

// ---- errors -------------------------------------------------------------------------------------

TEST_P(LinalgTest, Errors) {
  const Tensor a = quarter_tensor({2, 3}, 1, dev()), b = quarter_tensor({4, 5}, 2, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(a, b); }, "[matmul] shapes [2, 3] and [4, 5]: inner dimensions 3 != 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(quarter_tensor({3}, 3, dev()), quarter_tensor({4}, 4, dev())); },
                                 "[matmul] shapes [3] and [4]: inner dimensions 3 != 4"));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(quarter_tensor({2, 2, 3}, 3, dev()), quarter_tensor({3, 3, 4}, 4, dev())); },
                                 "batch dimensions [2] and [3] cannot be broadcast"));
  const Tensor s = scalar_tensor(2.0, TensorOptions(kFloat64, dev()));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(s, a); }, "[matmul] both operands must be at least 1-d, got shapes [] and [2, 3]"));
  EXPECT_TRUE(throws<ShapeError>([&] { matmul(a, s); }, "at least 1-d"));
  EXPECT_TRUE(throws<DTypeError>([&] { matmul(a, quarter_tensor({3, 2}, 5, dev(), kFloat32)); },
                                 "[matmul] expected both operands to have the same dtype, got float64 and float32"));
  EXPECT_TRUE(throws<DTypeError>([&] { matmul(a.to(kBool), a.t().to(kBool)); }, "[matmul] not supported for bool"));
  EXPECT_TRUE(throws<ValueError>([&] { matmul(Tensor(), a); }, "[matmul] first operand is an undefined tensor"));
  EXPECT_TRUE(throws<ShapeError>([&] { mm(quarter_tensor({2, 2, 3}, 6, dev()), b); }, "[mm] expected 2-d operands, got shapes [2, 2, 3] and [4, 5]"));
  EXPECT_TRUE(throws<ShapeError>([&] { mm(a, b); }, "[mm] shapes [2, 3] and [4, 5]: inner dimensions 3 != 4"));
  EXPECT_TRUE(throws<DTypeError>([&] { mm(a, quarter_tensor({3, 2}, 5, dev(), kInt64)); }, "[mm] expected both operands to have the same dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { bmm(a, b); }, "[bmm] expected 3-d operands, got shapes [2, 3] and [4, 5]"));
  EXPECT_TRUE(throws<ShapeError>([&] { bmm(quarter_tensor({2, 2, 3}, 7, dev()), quarter_tensor({3, 3, 4}, 8, dev())); },
                                 "[bmm] shapes [2, 2, 3] and [3, 3, 4]: batch sizes 2 != 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { bmm(quarter_tensor({2, 2, 3}, 7, dev()), quarter_tensor({2, 4, 4}, 8, dev())); },
                                 "[bmm] shapes [2, 2, 3] and [2, 4, 4]: inner dimensions 3 != 4"));
  const Tensor w = quarter_tensor({5, 3}, 9, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { linear(quarter_tensor({2, 4}, 10, dev()), w); },
                                 "[linear] input of shape [2, 4] has 4 features, but weight of shape [5, 3] expects in_features = 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { linear(a, quarter_tensor({1, 5, 3}, 11, dev())); }, "[linear] weight must be 2-d"));
  EXPECT_TRUE(throws<ShapeError>([&] { linear(a, w, quarter_tensor({4}, 12, dev())); },
                                 "[linear] bias of shape [4] does not match out_features = 5 of weight [5, 3]"));
  EXPECT_TRUE(throws<DTypeError>([&] { linear(a, w, quarter_tensor({5}, 13, dev(), kFloat32)); },
                                 "[linear] bias has dtype float32, but the input has float64"));
  EXPECT_TRUE(throws<DTypeError>([&] { linear(a, w.to(kFloat32)); }, "[linear] expected both operands to have the same dtype"));
  EXPECT_TRUE(throws<ShapeError>([&] { linear(s, w); }, "[linear] the input must be at least 1-d"));
}

// ---- layouts, precisions and determinism of the library GEMMs ----------------------------------

// ref_matmul's values wrapped into an integer dtype's range (int8/uint8 wrap modulo 256).
std::vector<double> wrapped(const std::vector<double>& v, DType dt) {
  std::vector<double> out = v;
  if (dt != kInt8 && dt != kUInt8) return out;
  for (double& e : out) {
    int64_t w = static_cast<int64_t>(e) & 0xff;
    if (dt == kInt8 && w >= 128) w -= 256;
    e = static_cast<double>(w);
  }
  return out;
}

// Operand pairs in layouts the library GEMM reads in place (transposed matrices, a leading dimension
// wider than the row, a stride-0 batch) and in layouts it must copy first (batch dims that do not
// collapse to one stride); gen(shape, seed) makes the data.
template <typename Gen>
std::vector<std::pair<Tensor, Tensor>> strided_batch_cases(const Gen& gen) {
  const Tensor a = gen({4, 33, 40}, 1);
  const Tensor a_t = gen({4, 40, 33}, 2).mT();                             // column-major
  const Tensor a_ld = gen({4, 33, 48}, 3).slice(2, 0, 40);                 // leading dim 48
  const Tensor a_bc = gen({1, 33, 40}, 4).expand({4, 33, 40});             // batch stride 0
  const Tensor a_step = gen({8, 33, 40}, 5).slice(0, 0, std::nullopt, 2);  // every other batch
  const Tensor b = gen({4, 40, 17}, 6);
  const Tensor b_t = gen({4, 17, 40}, 7).mT();
  const Tensor b_bc = gen({17, 40}, 8).t().expand({4, 40, 17});  // transposed, batch stride 0
  std::vector<std::pair<Tensor, Tensor>> pairs;
  for (const Tensor& x : {a, a_t, a_ld, a_bc, a_step})
    for (const Tensor& y : {b, b_t, b_bc}) pairs.emplace_back(x, y);
  // 4-d batches: one broadcast dim among others, and permuted batch dims.
  const Tensor c = gen({2, 1, 9, 40}, 9).expand({2, 3, 9, 40});
  const Tensor d = gen({3, 2, 40, 5}, 10).permute({1, 0, 2, 3});
  pairs.emplace_back(c, d);
  pairs.emplace_back(gen({3, 9, 40}, 11), d);
  return pairs;
}

TEST_P(LinalgTest, MatmulStridedAndBroadcastBatches) {
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const bool half = dt == kFloat16 || dt == kBFloat16;
    const double rtol = dt == kFloat16 ? 1e-3 : dt == kBFloat16 ? 8e-3 : -1, atol = half ? 1e-3 : -1;
    const auto gen = [&](const Shape& shape, uint64_t seed) { return quarter_tensor(shape, seed, dev(), dt); };
    for (const auto& [x, y] : strided_batch_cases(gen)) {
      const Tensor out = matmul(x, y);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_TRUE(all_close(out, ref_matmul(x, y), rtol, atol))
          << dtype_name(dt) << " strides " << ::testing::PrintToString(x.strides()) << " @ "
          << ::testing::PrintToString(y.strides());
    }
  }
  for (DType dt : {kInt32, kInt64, kInt8, kUInt8}) {
    // Integers in [-8, 8] ([0, 8] for uint8); sums of 40 products wrap in the 8-bit types.
    const auto gen = [&](const Shape& shape, uint64_t seed) {
      std::vector<double> v = quarters(numel(shape), seed, 4.0);
      if (dt == kUInt8) std::transform(v.begin(), v.end(), v.begin(), [](double x) { return x < 0 ? -x : x; });
      return make(v, shape, dev(), dt);
    };
    for (const auto& [x, y] : strided_batch_cases(gen)) {
      EXPECT_EQ(values(matmul(x, y)), wrapped(values(ref_matmul(x.to(kFloat64), y.to(kFloat64))), dt))
          << dtype_name(dt) << " strides " << ::testing::PrintToString(x.strides()) << " @ "
          << ::testing::PrintToString(y.strides());
    }
  }
}

TEST_P(LinalgTest, MatmulSixteenBitLarger) {
  // Products large enough for tensor-core kernels, with a transposed operand; inputs are exact in each
  // dtype and the float32 accumulation is exact, so only the final rounding differs from float64.
  for (DType dt : {kFloat16, kBFloat16}) {
    const Tensor a = quarter_tensor({3, 128, 192}, 21, dev(), dt), b = quarter_tensor({160, 192}, 22, dev(), dt).t();
    const Tensor out = matmul(a, b);
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_TRUE(all_close(out, ref_matmul(a, b), dt == kFloat16 ? 1e-3 : 8e-3, 1e-3)) << dtype_name(dt);
  }
}

TEST_P(LinalgTest, MatmulFloat32Precision) {
  // Every a is 1 + 2^-14: exact in float32, but TF32 keeps 10 mantissa bits and reads it as 1. Each
  // output is 256 + 2^-6, which float32 accumulation gets exactly in any order.
  const int64_t k = 256;
  const Tensor a = full({k, k}, 1.0 + std::ldexp(1.0, -14), TensorOptions(kFloat32, dev()));
  const Tensor b = ones({k, k}, TensorOptions(kFloat32, dev()));
  const double exact = static_cast<double>(k) * (1.0 + std::ldexp(1.0, -14));
  const Tensor expected = full({k, k}, exact, TensorOptions(kFloat64));
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  EXPECT_TRUE(all_close(matmul(a, b), expected, 0.0, 0.0)) << "float32 must be exact by default";
  for (const char* precision : {"high", "medium"}) {
    Float32PrecisionGuard guard(precision);
    const Tensor out = matmul(a, b);
    EXPECT_TRUE(all_close(out, expected, 1e-3, 0.0)) << precision;
    // On the GPU the product runs on TF32 tensor cores, which round a to 1.
    if (dev().is_cuda()) {
      EXPECT_FALSE(all_close(out, expected, 0.0, 0.0)) << precision << ": TF32 was not used";
    }
  }
  EXPECT_TRUE(all_close(matmul(a, b), expected, 0.0, 0.0)) << "back to exact float32";
  // Smooth data: float32 by default stays within float32's rounding bound of the float64 product,
  // |c - ref| <= k u sum |a| |b| (u = 2^-24).
  const Tensor x = make(smooth(64 * 300, 31), {64, 300}, dev(), kFloat32);
  const Tensor y = make(smooth(300 * 48, 32), {300, 48}, dev(), kFloat32);
  const auto c = values(matmul(x, y)), ref = values(ref_matmul(x, y));
  const auto bound = values(ref_matmul(rtx::abs(x), rtx::abs(y)));
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_LE(std::fabs(c[i] - ref[i]), 300 * std::ldexp(1.0, -24) * bound[i]) << "element " << i;
  }
}

TEST_P(LinalgTest, MatmulDeterministicMode) {
  DeterministicGuard deterministic;
  // Shapes with a long K (split-K candidates), batched and plain, repeat bit for bit.
  const std::vector<ShapePair> shapes = {
      {{16, 4096}, {4096, 24}}, {{3, 96, 200}, {200, 80}}, {{2, 64, 1000}, {2, 1000, 8}}};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    uint64_t seed = 41;
    for (const auto& [sa, sb] : shapes) {
      const Tensor a = make(smooth(numel(sa), seed++), sa, dev(), dt), b = make(smooth(numel(sb), seed++), sb, dev(), dt);
      const std::vector<double> first = values(matmul(a, b));
      for (int run = 0; run < 3; ++run) {
        EXPECT_EQ(values(matmul(a, b)), first) << dtype_name(dt);
      }
      const double tol = dt == kFloat16 || dt == kBFloat16 ? 5e-2 : 1e-3;
      EXPECT_TRUE(all_close(matmul(a, b), ref_matmul(a, b), tol, tol)) << dtype_name(dt);
    }
  }
}

TEST_P(LinalgTest, DeviceMismatch) {
  if (dev().is_cpu()) GTEST_SKIP() << "needs a second device";
  const Tensor a = quarter_tensor({2, 3}, 1, dev()), b = quarter_tensor({3, 2}, 2, Device(kCPU));
  EXPECT_TRUE(throws<DeviceError>([&] { matmul(a, b); }, "[matmul] expected all tensors on one device"));
  EXPECT_TRUE(throws<DeviceError>([&] { linear(a, b.t(), quarter_tensor({2}, 3, dev())); }, "[linear] expected all tensors on one device"));
}

}  // namespace
}  // namespace rtx::testing
