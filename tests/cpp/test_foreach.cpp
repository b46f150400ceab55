// Tests of the multi-tensor ops (foreach_norm, foreach_mul_) and of nn::utils::clip_grad_norm_ on
// them: norms against float64 loops for every order with a fast path and every float dtype, over
// more tensors than one CUDA launch takes, tensors larger than a chunk, odd sizes and empty ones;
// a tensor's norm independent of the rest of the list, of its layout and of the run; products
// against the compute type's rounding; autograd, versions and every error; clipping equal to the
// per-tensor formula.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class ForeachTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(ForeachTest);

constexpr double kInf = std::numeric_limits<double>::infinity();
const DType kFloatTypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16};

// 420 sizes (more tensors than one launch or one second-pass batch holds): odd sizes, empty tensors
// (unless the norm's order is infinite), one larger than two chunks of 65536 elements.
std::vector<int64_t> sizes(bool with_empty = true) {
  std::vector<int64_t> out;
  for (int i = 0; i < 420; ++i) out.push_back(i % 50 == 7 && with_empty ? 0 : 1 + (i * 53) % 611);
  out[101] = 2 * 65536 + 17;
  return out;
}

// The p-norm of v in float64.
double norm_of(const std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  double acc = std::isinf(p) && p < 0 ? kInf : 0.0;
  for (double x : v) {
    const double m = std::fabs(x);
    if (p == 0) acc += m != 0;
    else if (std::isinf(p)) acc = p > 0 ? std::max(acc, m) : std::min(acc, m);
    else acc += std::pow(m, p);
  }
  if (p == 0 || std::isinf(p)) return acc;
  return std::pow(acc, 1.0 / p);
}

// Tolerance of a norm accumulated in the compute type and rounded to dtype.
double norm_rtol(DType dtype) {
  switch (dtype) {
    case kFloat64: return 1e-10;
    case kFloat32: return 1e-5;
    case kFloat16: return 2e-3;
    default: return 1.6e-2;
  }
}

struct Data {
  TensorList tensors;
  std::vector<std::vector<double>> values;
};

// Tensors of `ns` sizes in dtype, with values in [-2, 2] exact in every dtype (scaled down for the
// 16-bit floats' range).
Data make_data(const std::vector<int64_t>& ns, DType dtype, Device dev, uint64_t seed = 1) {
  Data d;
  const double scale = dtype == kFloat16 ? 1.0 / 64 : 1.0;
  for (size_t i = 0; i < ns.size(); ++i) {
    d.values.push_back(quarters(ns[i], seed + i, scale));
    d.tensors.push_back(make(d.values.back(), {ns[i]}, dev, dtype));
  }
  return d;
}

TEST_P(ForeachTest, NormsMatchFloat64LoopsForEveryOrderAndDtype) {
  for (DType dtype : kFloatTypes) {
    for (double p : {2.0, 1.0, kInf, 0.0, 3.0, 0.5, -1.0}) {
      const Data d = make_data(sizes(!std::isinf(p)), dtype, dev());
      const TensorList norms = foreach_norm(d.tensors, p);
      ASSERT_EQ(norms.size(), d.tensors.size());
      std::vector<double> expected;
      for (size_t i = 0; i < norms.size(); ++i) {
        ASSERT_EQ(norms[i].dim(), 0);
        ASSERT_EQ(norms[i].dtype(), dtype);
        ASSERT_EQ(norms[i].device(), dev());
        expected.push_back(norm_of(d.values[i], p));
      }
      // The reference rounded to dtype: a 16-bit norm past the type's range is inf in both.
      const Tensor want = make(expected, {static_cast<int64_t>(expected.size())}, dev(), dtype);
      EXPECT_TRUE(all_close(stack(norms), want, norm_rtol(dtype), 0.0)) << dtype << " p=" << p;
    }
  }
}

TEST_P(ForeachTest, NegativeInfinityNormIsTheSmallestMagnitude) {
  const Data d = make_data({5, 70000, 3}, kFloat32, dev(), 9);
  const TensorList norms = foreach_norm(d.tensors, -kInf);
  for (size_t i = 0; i < norms.size(); ++i) EXPECT_EQ(norms[i].item<double>(), norm_of(d.values[i], -kInf)) << i;
}

TEST_P(ForeachTest, NanPropagatesThroughEveryOrder) {
  std::vector<double> v = quarters(70000, 3);
  v[65536 + 11] = std::nan("");
  const TensorList list = {make(v, {70000}, dev(), kFloat32), make({3.0, 4.0}, {2}, dev(), kFloat32)};
  for (double p : {2.0, 1.0, kInf, 3.0}) {
    const TensorList norms = foreach_norm(list, p);
    EXPECT_TRUE(std::isnan(norms[0].item<double>())) << p;
    EXPECT_FALSE(std::isnan(norms[1].item<double>())) << p;
  }
}

TEST_P(ForeachTest, ATensorsNormDependsOnNothingElse) {
  // Mixed dtypes in one list: each result has its tensor's dtype and equals the norm of the tensor
  // alone, bitwise; a run repeated gives the same bits.
  const std::vector<int64_t> ns = sizes(false);
  TensorList mixed;
  for (size_t i = 0; i < ns.size(); ++i)
    mixed.push_back(make(quarters(ns[i], 40 + i), {ns[i]}, dev(), kFloatTypes[i % 4]));
  for (double p : {2.0, 1.0, kInf, 0.5}) {
    const TensorList norms = foreach_norm(mixed, p);
    const TensorList again = foreach_norm(mixed, p);
    for (size_t i = 0; i < mixed.size(); i += 13) {
      EXPECT_EQ(norms[i].dtype(), mixed[i].dtype());
      EXPECT_TRUE(same_bytes(norms[i], foreach_norm({mixed[i]}, p)[0])) << "tensor " << i << " p=" << p;
    }
    for (size_t i = 0; i < mixed.size(); ++i) EXPECT_TRUE(same_bytes(norms[i], again[i])) << "tensor " << i;
  }
}

TEST_P(ForeachTest, NonContiguousTensorsGiveTheNormsOfTheirValues) {
  const Tensor base = make(quarters(300 * 257, 5), {300, 257}, dev(), kFloat32);
  const TensorList views = {base.t(), base.select(1, 3), base.narrow(0, 1, 299)};
  for (double p : {2.0, 1.0, kInf, 0.0}) {
    const TensorList norms = foreach_norm(views, p);
    for (size_t i = 0; i < views.size(); ++i)
      EXPECT_TRUE(same_bytes(norms[i], foreach_norm({views[i].contiguous()}, p)[0])) << i << " p=" << p;
  }
}

TEST_P(ForeachTest, EmptyTensorsHaveNormZero) {
  const TensorList list = {zeros({0}, TensorOptions(kFloat32, dev())), ones({3}, TensorOptions(kFloat32, dev())),
                           zeros({4, 0}, TensorOptions(kBFloat16, dev()))};
  for (double p : {2.0, 1.0, 0.0, 3.0, -1.0}) {
    const TensorList norms = foreach_norm(list, p);
    EXPECT_EQ(norms[0].item<double>(), 0.0) << p;
    EXPECT_EQ(norms[2].item<double>(), 0.0) << p;
    EXPECT_NEAR(norms[1].item<double>(), norm_of({1, 1, 1}, p), 1e-6) << p;
  }
  EXPECT_TRUE(throws<IndexError>([&] { foreach_norm(list, kInf); }, "[_foreach_norm] tensor 0 is empty"));
  EXPECT_TRUE(throws<IndexError>([&] { foreach_norm(list, -kInf); }, "tensor 0 is empty (shape [0])"));
}

TEST_P(ForeachTest, DtypeConvertsTheTensorsFirst) {
  const Data d = make_data({17, 70001, 0}, kBFloat16, dev(), 21);
  const TensorList norms = foreach_norm(d.tensors, 2.0, kFloat32);
  for (size_t i = 0; i < norms.size(); ++i) {
    EXPECT_EQ(norms[i].dtype(), kFloat32);
    EXPECT_TRUE(same_bytes(norms[i], foreach_norm({d.tensors[i].to(kFloat32)}, 2.0)[0])) << i;
  }
  EXPECT_TRUE(throws<DTypeError>([&] { foreach_norm({d.tensors[0].to(kFloat64)}, 2.0, kFloat32); },
                                 "[_foreach_norm] tensor 0 (shape [17]) has dtype float64, which does not convert"));
  EXPECT_TRUE(throws<DTypeError>([&] { foreach_norm(d.tensors, 2.0, kInt64); }, "dtype must be a floating point"));
}

TEST_P(ForeachTest, NormsOfTensorsThatRequireGradAreDifferentiable) {
  const Tensor a = leaf({3, 4}, dev(), 1), b = leaf({5}, dev(), 2);
  const Tensor c = make({1.0, 2.0}, {2}, dev());  // no grad: the fused path, no history
  const TensorList norms = foreach_norm({a, c, b}, 3.0);
  EXPECT_TRUE(norms[0].requires_grad());
  EXPECT_FALSE(norms[1].requires_grad());
  for (double p : {2.0, 1.0, 3.0, kInf}) {
    EXPECT_TRUE(gradcheck([p, c](const TensorList& in) {
      const TensorList n = foreach_norm({in[0], c, in[1]}, p);
      return TensorList{n[0], n[2]};
    }, {a, b})) << p;
  }
  NoGradGuard no_grad;
  EXPECT_FALSE(foreach_norm({a}, 2.0)[0].requires_grad());
}

TEST_P(ForeachTest, NormErrorsNameTheTensor) {
  const Tensor f = ones({2}, TensorOptions(kFloat32, dev()));
  EXPECT_TRUE(throws<ValueError>([&] { foreach_norm({}, 2.0); }, "[_foreach_norm] expects a non-empty list"));
  EXPECT_TRUE(throws<ValueError>([&] { foreach_norm({f, Tensor()}, 2.0); },
                                 "[_foreach_norm] tensor 1 of the list is undefined"));
  EXPECT_TRUE(throws<DTypeError>([&] { foreach_norm({f, zeros({2, 3}, TensorOptions(kInt64, dev()))}, 2.0); },
                                 "[_foreach_norm] tensor 1 (shape [2, 3], on "));
  EXPECT_TRUE(throws<ValueError>([&] { foreach_norm({f}, std::nan("")); }, "[_foreach_norm] ord must be a number"));
}

// The product x * s as the kernels form it: in float for float32 and the 16-bit floats (s given as a
// float), rounded to dtype.
std::vector<double> products(const std::vector<double>& v, double s, DType dtype) {
  std::vector<double> out;
  for (double x : v)
    out.push_back(dtype == kFloat64 ? x * s : static_cast<double>(static_cast<float>(x) * static_cast<float>(s)));
  return out;
}

TEST_P(ForeachTest, MultipliesEveryTensorLikeTheComputeType) {
  const std::vector<int64_t> ns = sizes();
  for (const bool as_tensor : {true, false}) {
    TensorList tensors;
    std::vector<std::vector<double>> expected;
    const double s = 0.3;
    for (size_t i = 0; i < ns.size(); ++i) {
      const DType dtype = kFloatTypes[i % 4];
      const std::vector<double> v = quarters(ns[i], 60 + i);
      tensors.push_back(make(v, {ns[i]}, dev(), dtype));
      expected.push_back(values(make(products(v, s, dtype), {ns[i]}, Device(kCPU), dtype)));
    }
    if (as_tensor) foreach_mul_(tensors, full({}, s, TensorOptions(kFloat64, dev())));
    else foreach_mul_(tensors, s);
    for (size_t i = 0; i < tensors.size(); ++i) EXPECT_EQ(values(tensors[i]), expected[i]) << "tensor " << i;
  }
}

TEST_P(ForeachTest, AScalarOnTheCpuServesEveryDevice) {
  TensorList tensors = {make({1.0, -2.0, 3.0}, {3}, dev(), kFloat32), make({0.5}, {1}, dev(), kBFloat16)};
  foreach_mul_(tensors, full({}, 4.0, TensorOptions(kFloat32, Device(kCPU))));
  EXPECT_EQ(values(tensors[0]), (std::vector<double>{4.0, -8.0, 12.0}));
  EXPECT_EQ(values(tensors[1]), std::vector<double>{2.0});
}

TEST_P(ForeachTest, NonContiguousTensorsAreMultipliedInPlace) {
  Tensor base = make(quarters(24, 3), {4, 6}, dev(), kFloat32);
  const std::vector<double> before = values(base);
  TensorList list = {base.select(1, 2), base.t().narrow(0, 4, 1)};
  const uint64_t version = base.version();
  foreach_mul_(list, 2.0);
  EXPECT_GT(base.version(), version);
  const std::vector<double> after = values(base);
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(after[i], i % 6 == 2 || i % 6 == 4 ? 2 * before[i] : before[i]) << i;
}

TEST_P(ForeachTest, ProductsBumpVersionsAndRecordHistory) {
  Tensor x = make({1.0, 2.0}, {2}, dev());
  const uint64_t version = x.version();
  TensorList list = {x};
  foreach_mul_(list, full({}, 3.0, TensorOptions(kFloat64, dev())));
  EXPECT_EQ(x.version(), version + 1);
  // A tensor with history (and a scalar that requires grad) records the product.
  const Tensor a = leaf({3}, dev(), 4);
  const Tensor s = full({}, 2.5, TensorOptions(kFloat64, dev())).requires_grad_();
  TensorList recorded = {a * 1.0, ones({3}, TensorOptions(kFloat64, dev()))};
  foreach_mul_(recorded, s);
  (recorded[0].sum() + recorded[1].sum()).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2.5, 2.5, 2.5}));
  EXPECT_NEAR(s.grad().item<double>(), sum(a).item<double>() + 3.0, 1e-12);
  // A scalar held by one of the tensors is read before any of them changes (integers go one by one).
  Tensor t = make({1.0, 2.0, 3.0}, {3}, dev(), kInt64);
  TensorList self = {t, make({1.0, 1.0}, {2}, dev(), kInt64)};
  foreach_mul_(self, t.select(0, 2));
  EXPECT_EQ(values(self[0]), (std::vector<double>{3.0, 6.0, 9.0}));
  EXPECT_EQ(values(self[1]), (std::vector<double>{3.0, 3.0}));
}

TEST_P(ForeachTest, IntegerTensorsFollowMulRules) {
  TensorList ints = {make({1.0, -3.0}, {2}, dev(), kInt64), make({2.0}, {1}, dev(), kFloat32)};
  foreach_mul_(ints, 3);
  EXPECT_EQ(values(ints[0]), (std::vector<double>{3.0, -9.0}));
  EXPECT_EQ(values(ints[1]), std::vector<double>{6.0});
  EXPECT_TRUE(throws<DTypeError>([&] { foreach_mul_(ints, 0.5); },
                                 "[_foreach_mul_] tensor 0 (shape [2]) has dtype int64, but its product has dtype"));
  EXPECT_EQ(values(ints[1]), std::vector<double>{6.0});  // nothing was written
  TensorList bools = {ints[0], ones({2}, TensorOptions(kBool, dev()))};
  EXPECT_TRUE(
      throws<DTypeError>([&] { foreach_mul_(bools, true); }, "[_foreach_mul_] tensor 1 (shape [2]) has dtype bool"));
  EXPECT_EQ(values(ints[0]), (std::vector<double>{3.0, -9.0}));
}

TEST_P(ForeachTest, ProductErrorsNameTheTensor) {
  std::vector<float> storage(4);
  const Tensor f = ones({2}, TensorOptions(kFloat32, dev()));
  TensorList none;
  EXPECT_TRUE(throws<ValueError>([&] { foreach_mul_(none, 2.0); }, "[_foreach_mul_] expects a non-empty list"));
  TensorList list = {f, leaf({2}, dev())};
  EXPECT_TRUE(throws<Error>([&] { foreach_mul_(list, 2.0); }, "[_foreach_mul_] tensor 1 (shape [2]) is a leaf"));
  EXPECT_EQ(values(f), (std::vector<double>{1.0, 1.0}));  // checked before any write
  TensorList one = {f};
  EXPECT_TRUE(throws<ShapeError>([&] { foreach_mul_(one, ones({1}, TensorOptions(kFloat32, dev()))); },
                                 "the scalar must be a 0-d tensor, got one of shape [1]"));
  EXPECT_TRUE(throws<ValueError>([&] { foreach_mul_(one, Tensor()); }, "[_foreach_mul_] scalar is an undefined"));
  if (dev().is_cpu()) {
    const Tensor elsewhere = on_other_device(dev(), storage, {});
    EXPECT_TRUE(throws<DeviceError>([&] { foreach_mul_(one, elsewhere); },
                                    "[_foreach_mul_] tensor 0 (shape [2]) is on cpu"));
  }
  TensorList expanded = {ones({2}, TensorOptions(kFloat32, dev())).expand({3, 2})};
  EXPECT_TRUE(throws<Error>([&] { foreach_mul_(expanded, 2.0); }, "expanded"));
}

// ---- clip_grad_norm_ --------------------------------------------------------------------------

// Parameters with gradients: 160 of odd sizes, one larger than a chunk.
TensorList parameters_with_grads(Device dev, DType dtype, uint64_t seed) {
  TensorList params;
  for (int i = 0; i < 160; ++i) {
    const int64_t n = i == 37 ? 65536 + 99 : 1 + (i * 29) % 517;
    Tensor p = zeros({n}, TensorOptions(dtype, dev)).requires_grad_();
    p.set_grad(make(smooth(n, seed + i), {n}, dev, dtype));
    params.push_back(p);
  }
  return params;
}

TEST_P(ForeachTest, ClipGradNormEqualsThePerTensorFormula) {
  for (DType dtype : {kFloat32, kFloat64}) {
    for (double p : {2.0, 1.0, kInf}) {
      for (double fraction : {0.25, 4.0}) {  // clipped, and left alone (scale 1)
        SCOPED_TRACE(::testing::Message() << dtype << " p=" << p << " max_norm=total*" << fraction);
        const TensorList params = parameters_with_grads(dev(), dtype, 3);
        TensorList norms, before;
        for (const Tensor& q : params) {
          norms.push_back(q.grad().norm(p));
          before.push_back(q.grad().clone());
        }
        const Tensor want_total = stack(norms).norm(p);
        const double max_norm = want_total.item<double>() * fraction;
        const Tensor total = nn::utils::clip_grad_norm_(params, max_norm, p);
        const double rtol = dtype == kFloat64 ? 1e-12 : 1e-5;
        EXPECT_TRUE(all_close(total, want_total, rtol, 0.0));
        const Tensor scale = (max_norm / (want_total + 1e-6)).clamp(std::nullopt, 1.0);
        for (size_t i = 0; i < params.size(); ++i) {
          if (fraction > 1) EXPECT_TRUE(same_bytes(params[i].grad(), before[i])) << "gradient " << i;
          else EXPECT_TRUE(all_close(params[i].grad(), before[i] * scale, rtol, 0.0)) << "gradient " << i;
        }
      }
    }
  }
}

TEST_P(ForeachTest, ClipGradNormOfMixedDtypesAndEdgeCases) {
  TensorList params = parameters_with_grads(dev(), kFloat32, 8);
  const TensorList halves = parameters_with_grads(dev(), kBFloat16, 9);
  params.insert(params.end(), halves.begin(), halves.end());
  TensorList norms, before;
  for (const Tensor& q : params) {
    norms.push_back(q.grad().norm(2.0));
    before.push_back(q.grad().to(kFloat64));
  }
  const double want = stack(norms).norm(2.0).item<double>();
  const Tensor total = nn::utils::clip_grad_norm_(params, 1.0);
  EXPECT_EQ(total.dtype(), kFloat32);
  // A bfloat16 norm rounded the other way moves the total by a little.
  EXPECT_NEAR(total.item<double>(), want, want * 1e-4);
  for (size_t i = 0; i < params.size(); ++i) {
    const double rtol = params[i].dtype() == kBFloat16 ? 3.2e-2 : 1e-4;
    EXPECT_TRUE(all_close(params[i].grad(), before[i] / (want + 1e-6), rtol, 1e-6)) << i;
  }
  // No gradients: a zero total; a gradient of inf: an error only when asked for.
  EXPECT_EQ(nn::utils::clip_grad_norm_({zeros({2}, TensorOptions(kFloat32, dev()))}, 1.0).item<double>(), 0.0);
  Tensor p = zeros({3}, TensorOptions(kFloat32, dev())).requires_grad_();
  p.set_grad(make({kInf, 1.0, 1.0}, {3}, dev(), kFloat32));
  EXPECT_TRUE(throws<ValueError>([&] { nn::utils::clip_grad_norm_({p}, 1.0, 2.0, true); },
                                 "[clip_grad_norm_] the total norm of order 2 of the gradients is inf"));
  EXPECT_TRUE(std::isinf(nn::utils::clip_grad_norm_({p}, 1.0).item<double>()));
}

}  // namespace
}  // namespace rtx::testing
