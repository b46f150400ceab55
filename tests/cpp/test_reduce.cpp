// Tests of the reduction family against naive float64 loops: every dim subset (negative dims too) of
// 1-d..4-d inputs, keepdim both ways, contiguous, transposed and step-sliced layouts, several dtypes;
// zero-size and 0-d inputs; the int/bool dtype rules; NaN propagation; large inputs that take the
// parallel paths; float32 accuracy on 1e7 elements; first and second order gradients; every error.
#include <algorithm>
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

class ReduceTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(ReduceTest);

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- data -------------------------------------------------------------------------------------------

// ---- layouts ----------------------------------------------------------------------------------------

enum class Layout { Contiguous, Transposed, Strided };
const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided};
const char* layout_name(Layout l) {
  return l == Layout::Contiguous ? "contiguous" : l == Layout::Transposed ? "transposed" : "strided";
}

// A tensor of shape holding v (row-major) in the given memory layout.
Tensor make_layout(const std::vector<double>& v, const Shape& shape, Layout layout, Device dev, DType dt) {
  const Tensor x = make(v, shape, dev, dt);
  if (layout == Layout::Contiguous || shape.empty()) return x;
  if (layout == Layout::Transposed) {
    Shape rev(shape.size());
    std::iota(rev.rbegin(), rev.rend(), 0);
    return x.permute(rev).contiguous().permute(rev);
  }
  // Every other element of a tensor twice as long in the last dim (the others hold garbage).
  Shape wide = shape;
  wide.back() *= 2;
  std::vector<double> w(static_cast<size_t>(numel(wide)), 99.0);
  for (size_t i = 0; i < v.size(); ++i) w[2 * i] = v[i];
  return make(w, wide, dev, dt).slice(-1, 0, std::nullopt, 2);
}

// ---- naive references -----------------------------------------------------------------------------

// The reduced dims (sorted) of dims for ndim (empty = all).
std::vector<bool> reduced_mask(const Shape& dims, int64_t ndim) {
  std::vector<bool> r(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) r[static_cast<size_t>(d < 0 ? d + ndim : d)] = true;
  return r;
}

Shape result_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// The elements of v (row-major, shape) grouped by the result element they reduce into, in order.
std::vector<std::vector<double>> groups(const std::vector<double>& v, const Shape& shape, const std::vector<bool>& reduced) {
  Shape keep = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d]) keep[d] = 1;
  std::vector<std::vector<double>> g(static_cast<size_t>(numel(keep)));
  for (int64_t i = 0; i < numel(shape); ++i) {
    int64_t rem = i, o = 0, mult = 1;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      const int64_t idx = rem % shape[d];
      rem /= shape[d];
      if (!reduced[d]) o += idx * mult;
      mult *= keep[d];
    }
    g[static_cast<size_t>(o)].push_back(v[static_cast<size_t>(i)]);
  }
  return g;
}

using Ref = std::function<double(const std::vector<double>&)>;

double ref_sum(const std::vector<double>& g) { return std::accumulate(g.begin(), g.end(), 0.0); }
double ref_mean(const std::vector<double>& g) { return g.empty() ? kNaN : ref_sum(g) / static_cast<double>(g.size()); }
double ref_prod(const std::vector<double>& g) { return std::accumulate(g.begin(), g.end(), 1.0, std::multiplies<>()); }
double ref_extreme(const std::vector<double>& g, bool largest) {
  double m = largest ? -kInf : kInf;
  for (double x : g) {
    if (std::isnan(x)) return x;
    m = largest ? std::max(m, x) : std::min(m, x);
  }
  return m;
}
double ref_var(const std::vector<double>& g, int64_t correction) {
  const double m = ref_mean(g);
  double ss = 0;
  for (double x : g) ss += (x - m) * (x - m);
  return ss / std::max(0.0, static_cast<double>(g.size()) - static_cast<double>(correction));
}
double ref_norm(const std::vector<double>& g, double p) {
  if (p == 0) return static_cast<double>(std::count_if(g.begin(), g.end(), [](double x) { return x != 0; }));
  if (std::isinf(p)) {
    double m = p > 0 ? 0.0 : kInf;
    for (double x : g) m = p > 0 ? std::max(m, std::fabs(x)) : std::min(m, std::fabs(x));
    return m;
  }
  double s = 0;
  for (double x : g) s += std::pow(std::fabs(x), p);
  return std::pow(s, 1.0 / p);
}
double ref_logsumexp(const std::vector<double>& g) {
  const double m = ref_extreme(g, true);
  double s = 0;
  for (double x : g) s += std::exp(x - m);
  return m + std::log(s);
}
double ref_any(const std::vector<double>& g) { return std::any_of(g.begin(), g.end(), [](double x) { return x != 0; }); }
double ref_all(const std::vector<double>& g) { return std::all_of(g.begin(), g.end(), [](double x) { return x != 0; }); }
// Index of the first max/min (the first NaN when there is one).
int64_t ref_arg(const std::vector<double>& g, bool largest) {
  int64_t best = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i])) return static_cast<int64_t>(i);
    if (largest ? g[i] > g[best] : g[i] < g[best]) best = static_cast<int64_t>(i);
  }
  return best;
}

std::vector<double> reduce_groups(const std::vector<std::vector<double>>& gs, const Ref& f) {
  std::vector<double> out;
  for (const auto& g : gs) out.push_back(f(g));
  return out;
}

// ---- the sweep ----------------------------------------------------------------------------------------

using ReduceOp = std::function<Tensor(const Tensor& x, const Shape& dims, bool keepdim)>;

const std::vector<Shape> kShapes = {{5}, {3, 4}, {2, 3, 4}, {2, 3, 2, 3}};

// Integers -8..8 (quarters times 4): exact in every dtype but bool and uint8.
std::vector<double> integers(int64_t n, uint64_t seed) {
  std::vector<double> v = quarters(n, seed);
  for (auto& x : v) x *= 4;
  return v;
}

using Transform = std::function<double(double)>;

// Checks op against ref on every dim subset (alternately given as negative dims), keepdim both ways and
// every layout; the result must have dtype out_dtype. The data are quarters for float dtypes and
// integers otherwise, passed through transform when given.
void sweep(Device dev, const ReduceOp& op, const Ref& ref, DType in_dtype, DType out_dtype,
           const Transform& transform = nullptr) {
  uint64_t seed = 1;
  for (const Shape& shape : kShapes) {
    const int64_t nd = static_cast<int64_t>(shape.size());
    std::vector<double> v = is_floating(in_dtype) ? quarters(numel(shape), seed++) : integers(numel(shape), seed++);
    if (transform)
      for (auto& x : v) x = transform(x);
    for (int64_t mask = 0; mask < (int64_t{1} << nd); ++mask) {
      Shape dims;
      for (int64_t d = 0; d < nd; ++d)
        if (mask >> d & 1) dims.push_back(d % 2 ? d - nd : d);
      const std::vector<bool> reduced = reduced_mask(dims, nd);
      const std::vector<double> expected = reduce_groups(groups(v, shape, reduced), ref);
      for (bool keepdim : {false, true}) {
        for (Layout layout : kLayouts) {
          SCOPED_TRACE(::testing::Message() << "shape " << ::testing::PrintToString(shape) << " dims "
                                            << ::testing::PrintToString(dims) << " keepdim " << keepdim << " "
                                            << layout_name(layout) << " " << dtype_name(in_dtype));
          const Tensor got = op(make_layout(v, shape, layout, dev, in_dtype), dims, keepdim);
          EXPECT_EQ(got.dtype(), out_dtype);
          EXPECT_EQ(got.device(), dev);
          ASSERT_TRUE(all_close(got, make(expected, result_shape(shape, reduced, keepdim))));
        }
      }
    }
  }
}

const DType kFloatTypes[] = {kFloat64, kFloat32, kFloat16, kBFloat16};
const DType kIntTypes[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64};

// ---- forward: every dim subset -------------------------------------------------------------------

TEST_P(ReduceTest, SumEveryDimSubsetLayoutAndDType) {
  auto op = [](const Tensor& x, const Shape& d, bool k) { return sum(x, d, k); };
  for (DType dt : kFloatTypes) sweep(dev(), op, ref_sum, dt, dt);
  sweep(dev(), [](const Tensor& x, const Shape& d, bool k) { return x.sum(d, k); }, ref_sum, kFloat64, kFloat64);
}

TEST_P(ReduceTest, SumOfIntegersAndBoolIsInt64) {
  auto op = [](const Tensor& x, const Shape& d, bool k) { return sum(x, d, k); };
  sweep(dev(), op, ref_sum, kInt32, kInt64);
  sweep(dev(), op, ref_sum, kInt64, kInt64);
  // Nonnegative data for the unsigned and bool types.
  for (DType dt : {kUInt8, kBool}) {
    const Tensor x = make({0, 1, 1, 0, 1, 1}, {2, 3}, dev(), dt);
    EXPECT_EQ(sum(x).dtype(), kInt64);
    EXPECT_EQ(values(sum(x)), std::vector<double>{4});
    EXPECT_EQ(values(sum(x, {0})), (std::vector<double>{0, 2, 2}));
  }
  const Tensor i8 = make({100, 100, 100}, {3}, dev(), kInt8);
  EXPECT_EQ(values(sum(i8)), std::vector<double>{300});  // no int8 overflow
}

TEST_P(ReduceTest, MeanEveryDimSubset) {
  auto op = [](const Tensor& x, const Shape& d, bool k) { return mean(x, d, k); };
  for (DType dt : kFloatTypes) sweep(dev(), op, ref_mean, dt, dt);
}

TEST_P(ReduceTest, ProdEveryDimSubset) {
  auto op = [](const Tensor& x, const Shape& d, bool k) { return prod(x, d, k); };
  auto nonzero = [](double x) { return x == 0 ? 1.25 : x; };
  sweep(dev(), op, ref_prod, kFloat64, kFloat64, nonzero);
  sweep(dev(), op, ref_prod, kFloat32, kFloat32, nonzero);
  sweep(dev(), op, ref_prod, kFloat64, kFloat64);
  // Factors -1, 1 and 2 keep the products of 36 integers exact.
  sweep(dev(), op, ref_prod, kInt32, kInt64, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 2.0; });
  const Tensor b = make({1, 1, 0, 1}, {2, 2}, dev(), kBool);
  EXPECT_EQ(prod(b, {1}).dtype(), kInt64);
  EXPECT_EQ(values(prod(b, {1})), (std::vector<double>{1, 0}));
}

TEST_P(ReduceTest, AmaxAminEveryDimSubsetKeepDType) {
  auto mx = [](const Tensor& x, const Shape& d, bool k) { return amax(x, d, k); };
  auto mn = [](const Tensor& x, const Shape& d, bool k) { return amin(x, d, k); };
  auto rmax = [](const std::vector<double>& g) { return ref_extreme(g, true); };
  auto rmin = [](const std::vector<double>& g) { return ref_extreme(g, false); };
  for (DType dt : kFloatTypes) {
    sweep(dev(), mx, rmax, dt, dt);
    sweep(dev(), mn, rmin, dt, dt);
  }
  for (DType dt : {kInt8, kInt32, kInt64}) {
    sweep(dev(), mx, rmax, dt, dt);
    sweep(dev(), mn, rmin, dt, dt);
  }
  const Tensor u = make({3, 0, 255, 7}, {2, 2}, dev(), kUInt8);
  EXPECT_EQ(values(amax(u, {1})), (std::vector<double>{3, 255}));
  EXPECT_EQ(values(amin(u, {0})), (std::vector<double>{3, 0}));
  const Tensor b = make({0, 0, 1, 0}, {2, 2}, dev(), kBool);
  EXPECT_EQ(amax(b, {1}).dtype(), kBool);
  EXPECT_EQ(values(amax(b, {1})), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(amin(b, {1})), (std::vector<double>{0, 0}));
}

TEST_P(ReduceTest, VarStdEveryDimSubsetAndCorrection) {
  for (int64_t c : {0, 1, 2}) {
    SCOPED_TRACE(c);
    auto v = [c](const Tensor& x, const Shape& d, bool k) { return var(x, d, c, k); };
    auto s = [c](const Tensor& x, const Shape& d, bool k) { return x.std(d, c, k); };
    auto rv = [c](const std::vector<double>& g) { return ref_var(g, c); };
    auto rs = [c](const std::vector<double>& g) { return std::sqrt(ref_var(g, c)); };
    sweep(dev(), v, rv, kFloat64, kFloat64);
    sweep(dev(), s, rs, kFloat64, kFloat64);
    sweep(dev(), v, rv, kFloat32, kFloat32);
  }
  auto v = [](const Tensor& x, const Shape& d, bool k) { return var(x, d, 1, k); };
  auto rv = [](const std::vector<double>& g) { return ref_var(g, 1); };
  sweep(dev(), v, rv, kFloat16, kFloat16);
  sweep(dev(), v, rv, kBFloat16, kBFloat16);
}

TEST_P(ReduceTest, NormEveryDimSubsetAndP) {
  for (double p : {2.0, 1.0, 0.0, kInf, -kInf, 3.0, 0.5, -1.5}) {
    SCOPED_TRACE(p);
    auto op = [p](const Tensor& x, const Shape& d, bool k) { return norm(x, p, d, k); };
    auto ref = [p](const std::vector<double>& g) { return ref_norm(g, p); };
    sweep(dev(), op, ref, kFloat64, kFloat64);
    sweep(dev(), op, ref, kFloat32, kFloat32);
  }
  sweep(dev(), [](const Tensor& x, const Shape& d, bool k) { return x.norm(2.0, d, k); },
        [](const std::vector<double>& g) { return ref_norm(g, 2); }, kFloat16, kFloat16);
}

TEST_P(ReduceTest, LogsumexpEveryDimSubset) {
  auto op = [](const Tensor& x, const Shape& d, bool k) { return logsumexp(x, d, k); };
  for (DType dt : kFloatTypes) sweep(dev(), op, ref_logsumexp, dt, dt);
}

TEST_P(ReduceTest, AnyAllEveryDimSubsetAnyDType) {
  auto an = [](const Tensor& x, const Shape& d, bool k) { return any(x, d, k); };
  auto al = [](const Tensor& x, const Shape& d, bool k) { return x.all(d, k); };
  for (DType dt : {kFloat64, kFloat32, kFloat16, kInt32, kInt8}) {
    sweep(dev(), an, ref_any, dt, kBool);
    sweep(dev(), al, ref_all, dt, kBool);
  }
  const Tensor b = make({0, 0, 1, 1, 0, 1}, {2, 3}, dev(), kBool);
  EXPECT_EQ(values(any(b, {1})), (std::vector<double>{1, 1}));
  EXPECT_EQ(values(all(b, {0})), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(values(any(make({kNaN, 0}, {2}, dev()))), std::vector<double>{1});  // NaN is nonzero
}

// ---- max/min along a dim and arg reductions ---------------------------------------------------------

TEST_P(ReduceTest, MaxMinAlongDimValuesAndFirstIndices) {
  uint64_t seed = 7;
  for (const Shape& shape : kShapes) {
    const int64_t nd = static_cast<int64_t>(shape.size());
    const std::vector<double> v = integers(numel(shape), seed++);  // many ties
    for (int64_t d = -nd; d < nd; ++d) {
      std::vector<bool> reduced(static_cast<size_t>(nd), false);
      reduced[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
      const auto gs = groups(v, shape, reduced);
      for (bool largest : {true, false}) {
        std::vector<double> ev, ei;
        for (const auto& g : gs) {
          ei.push_back(static_cast<double>(ref_arg(g, largest)));
          ev.push_back(g[static_cast<size_t>(ref_arg(g, largest))]);
        }
        for (bool keepdim : {false, true}) {
          for (Layout layout : kLayouts) {
            for (DType dt : {kFloat64, kFloat32, kBFloat16, kInt32}) {
              SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(shape) << " dim " << d << " largest "
                                                << largest << " keepdim " << keepdim << " " << layout_name(layout)
                                                << " " << dtype_name(dt));
              const Tensor x = make_layout(v, shape, layout, dev(), dt);
              const Shape rs = result_shape(shape, reduced, keepdim);
              const auto [vals, idx] = largest ? max(x, d, keepdim) : x.min(d, keepdim);
              EXPECT_EQ(vals.dtype(), dt);
              EXPECT_EQ(idx.dtype(), kInt64);
              ASSERT_TRUE(all_close(vals, make(ev, rs)));
              ASSERT_TRUE(all_close(idx, make(ei, rs)));
              const Tensor a = largest ? argmax(x, d, keepdim) : x.argmin(d, keepdim);
              EXPECT_EQ(a.dtype(), kInt64);
              ASSERT_TRUE(all_close(a, make(ei, rs)));
            }
          }
        }
      }
    }
  }
}

TEST_P(ReduceTest, ArgmaxFlattenedAndFullMaxMin) {
  const std::vector<double> v = {1, 5, -2, 5, 0, -2};
  for (Layout layout : kLayouts) {
    SCOPED_TRACE(layout_name(layout));
    const Tensor x = make_layout(v, {2, 3}, layout, dev(), kFloat32);
    EXPECT_EQ(argmax(x).dim(), 0);
    EXPECT_EQ(argmax(x).item<int64_t>(), 1);
    EXPECT_EQ(argmin(x).item<int64_t>(), 2);
    EXPECT_EQ(x.argmax(std::nullopt, true).sizes(), (Shape{1, 1}));
    EXPECT_EQ(x.argmax(std::nullopt, true).item<int64_t>(), 1);
    EXPECT_EQ(max(x).dim(), 0);
    EXPECT_EQ(max(x).item<double>(), 5);
    EXPECT_EQ(x.min().item<double>(), -2);
    EXPECT_EQ(max(x).dtype(), kFloat32);
  }
  // The flattened index follows the logical (row-major) order, also for a transposed input.
  const Tensor t = make({1, 2, 9, 4}, {2, 2}, dev()).t();  // logical [[1, 9], [2, 4]]
  EXPECT_EQ(argmax(t).item<int64_t>(), 1);
  EXPECT_EQ(argmin(make({3, 1, 1}, {3}, dev(), kInt64)).item<int64_t>(), 1);
  EXPECT_EQ(max(make({0, 1, 0}, {3}, dev(), kBool)).item<bool>(), true);
}

// ---- NaN ---------------------------------------------------------------------------------------------

TEST_P(ReduceTest, NaNPropagatesAndWinsArgmax) {
  for (DType dt : {kFloat64, kFloat32, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = make({1, kNaN, 3, kNaN, 5, -1, 2, 0}, {2, 4}, dev(), dt);  // [[1, nan, 3, nan], [5, -1, 2, 0]]
    EXPECT_TRUE(all_close(amax(x, {1}), make({kNaN, 5}, {2})));
    EXPECT_TRUE(all_close(amin(x, {1}), make({kNaN, -1}, {2})));
    EXPECT_TRUE(all_close(amax(x, {0}), make({5, kNaN, 3, kNaN}, {4})));
    EXPECT_TRUE(std::isnan(max(x).item<double>()));
    EXPECT_TRUE(std::isnan(min(x).item<double>()));
    const auto [vals, idx] = max(x, 1);
    EXPECT_TRUE(all_close(vals, make({kNaN, 5}, {2})));
    EXPECT_EQ(values(idx), (std::vector<double>{1, 0}));  // the first NaN
    EXPECT_EQ(values(min(x, 1).indices), (std::vector<double>{1, 1}));
    EXPECT_EQ(argmax(x).item<int64_t>(), 1);
    EXPECT_EQ(argmin(x).item<int64_t>(), 1);
    EXPECT_TRUE(all_close(sum(x, {1}), make({kNaN, 6}, {2})));
    EXPECT_TRUE(all_close(logsumexp(x, {1}).isnan(), make({1, 0}, {2}, Device(kCPU), kBool)));
    EXPECT_TRUE(std::isnan(norm(x, kInf).item<double>()));
    EXPECT_TRUE(std::isnan(var(x).item<double>()));
  }
}

// ---- zero-size and 0-d ---------------------------------------------------------------------------------

TEST_P(ReduceTest, ZeroSizeInputsGiveIdentities) {
  const Tensor e = zeros({0, 3}, dev());
  EXPECT_TRUE(all_close(sum(e, {0}), make({0, 0, 0}, {3})));
  EXPECT_EQ(sum(e, {1}).sizes(), (Shape{0}));
  EXPECT_EQ(sum(e, {1}, true).sizes(), (Shape{0, 1}));
  EXPECT_EQ(sum(e).item<double>(), 0);
  EXPECT_TRUE(all_close(prod(e, {0}), make({1, 1, 1}, {3})));
  EXPECT_TRUE(all_close(mean(e, {0}), make({kNaN, kNaN, kNaN}, {3})));
  EXPECT_TRUE(std::isnan(mean(e).item<double>()));
  EXPECT_TRUE(std::isnan(var(e).item<double>()));
  EXPECT_TRUE(std::isnan(e.std({0}, 1, true).to(kFloat64).tolist<double>()[0]));
  EXPECT_EQ(logsumexp(e, {0}).tolist<float>(), std::vector<float>(3, -INFINITY));
  EXPECT_TRUE(all_close(norm(e, 2.0, {0}), make({0, 0, 0}, {3})));
  EXPECT_EQ(values(any(e, {0})), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(values(all(e, {0})), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(sum(zeros({0}, TensorOptions(kInt32, dev()))).dtype(), kInt64);
  EXPECT_EQ(sum(zeros({0}, TensorOptions(kInt32, dev()))).item<int64_t>(), 0);
  // Reducing a nonzero dim of an empty tensor is fine for ops without identity.
  EXPECT_EQ(amax(e, {1}).sizes(), (Shape{0}));
  EXPECT_EQ(max(e, 1).indices.sizes(), (Shape{0}));
  EXPECT_EQ(argmin(e, -1, true).sizes(), (Shape{0, 1}));
  EXPECT_EQ(cumsum(e, 0).sizes(), (Shape{0, 3}));
  EXPECT_EQ(cumsum(e, 1).sizes(), (Shape{0, 3}));
}

TEST_P(ReduceTest, ZeroDimInputs) {
  const Tensor s = scalar_tensor(2.5, TensorOptions(kFloat64, dev()));
  for (const Shape& dims : {Shape{}, Shape{0}, Shape{-1}}) {
    for (bool keepdim : {false, true}) {
      EXPECT_EQ(sum(s, dims, keepdim).dim(), 0);
      EXPECT_EQ(sum(s, dims, keepdim).item<double>(), 2.5);
      EXPECT_EQ(mean(s, dims, keepdim).item<double>(), 2.5);
      EXPECT_EQ(prod(s, dims, keepdim).item<double>(), 2.5);
      EXPECT_EQ(amax(s, dims, keepdim).item<double>(), 2.5);
      EXPECT_EQ(norm(s, 2.0, dims, keepdim).item<double>(), 2.5);
      EXPECT_EQ(logsumexp(s, dims, keepdim).item<double>(), 2.5);
      EXPECT_EQ(var(s, dims, 0, keepdim).item<double>(), 0);
      EXPECT_TRUE(std::isnan(var(s, dims, 1, keepdim).item<double>()));
      EXPECT_EQ(any(s, dims, keepdim).item<bool>(), true);
    }
  }
  EXPECT_EQ(max(s).item<double>(), 2.5);
  const auto [v, i] = max(s, 0);
  EXPECT_EQ(v.dim(), 0);
  EXPECT_EQ(v.item<double>(), 2.5);
  EXPECT_EQ(i.item<int64_t>(), 0);
  EXPECT_EQ(argmax(s).item<int64_t>(), 0);
  EXPECT_EQ(argmin(s, -1).item<int64_t>(), 0);
  EXPECT_EQ(cumsum(s, 0).dim(), 0);
  EXPECT_EQ(cumsum(s, -1).item<double>(), 2.5);
  EXPECT_EQ(cumsum(scalar_tensor(3, TensorOptions(kInt32, dev())), 0).dtype(), kInt64);
}

// ---- cumsum -----------------------------------------------------------------------------------------

TEST_P(ReduceTest, CumsumEveryDimLayoutAndDType) {
  uint64_t seed = 11;
  for (const Shape& shape : kShapes) {
    const int64_t nd = static_cast<int64_t>(shape.size());
    const std::vector<double> v = integers(numel(shape), seed++);
    for (int64_t d = -nd; d < nd; ++d) {
      const int64_t dd = d < 0 ? d + nd : d;
      // Naive prefix sums: element i adds the elements before it along dd.
      const Shape st = Shape([&] {
        Shape s(shape.size(), 1);
        for (int64_t k = nd - 2; k >= 0; --k) s[k] = s[k + 1] * shape[k + 1];
        return s;
      }());
      std::vector<double> expected(v.size());
      for (int64_t i = 0; i < numel(shape); ++i) {
        const int64_t pos = i / st[dd] % shape[dd];
        double acc = 0;
        for (int64_t j = 0; j <= pos; ++j) acc += v[static_cast<size_t>(i - (pos - j) * st[dd])];
        expected[static_cast<size_t>(i)] = acc;
      }
      for (Layout layout : kLayouts) {
        for (DType dt : {kFloat64, kFloat32, kFloat16, kInt32}) {
          SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(shape) << " dim " << d << " "
                                            << layout_name(layout) << " " << dtype_name(dt));
          const Tensor got = cumsum(make_layout(v, shape, layout, dev(), dt), d);
          EXPECT_EQ(got.dtype(), is_floating(dt) ? dt : kInt64);
          ASSERT_TRUE(all_close(got, make(expected, shape)));
        }
      }
    }
  }
  EXPECT_EQ(values(make({1, 0, 1, 1}, {4}, dev(), kBool).cumsum(0)), (std::vector<double>{1, 1, 2, 3}));
}

// ---- large inputs (parallel paths) and accuracy -------------------------------------------------------

TEST_P(ReduceTest, LargeInputsMatchReferenceOnEveryPath) {
  // Long rows with few outputs (split rows), many short rows, and kept innermost dims (row accumulation,
  // also split over the reduced range when the outputs are few).
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{200000}, {0}}, {{2, 100000}, {1}}, {{100000, 3}, {0}}, {{3, 500, 70}, {0, 2}}, {{40, 2000}, {0}},
      {{50, 3, 700}, {1}}};
  uint64_t seed = 5;
  for (const auto& [shape, dims] : cases) {
    const std::vector<double> v = quarters(numel(shape), seed++);
    const std::vector<bool> reduced = reduced_mask(dims, static_cast<int64_t>(shape.size()));
    const auto gs = groups(v, shape, reduced);
    const Shape rs = result_shape(shape, reduced, false);
    for (Layout layout : {Layout::Contiguous, Layout::Transposed}) {
      SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(shape) << " " << layout_name(layout));
      const Tensor x = make_layout(v, shape, layout, dev(), kFloat64);
      EXPECT_TRUE(all_close(sum(x, dims), make(reduce_groups(gs, ref_sum), rs)));
      EXPECT_TRUE(all_close(amax(x, dims), make(reduce_groups(gs, [](const auto& g) { return ref_extreme(g, true); }), rs)));
      EXPECT_TRUE(all_close(var(x, dims), make(reduce_groups(gs, [](const auto& g) { return ref_var(g, 1); }), rs)));
      EXPECT_TRUE(all_close(logsumexp(x, dims), make(reduce_groups(gs, ref_logsumexp), rs)));
      EXPECT_TRUE(all_close(norm(x, 2.0, dims), make(reduce_groups(gs, [](const auto& g) { return ref_norm(g, 2); }), rs)));
      EXPECT_TRUE(all_close(all(x, dims), make(reduce_groups(gs, ref_all), rs)));
      if (dims.size() == 1) {
        EXPECT_TRUE(all_close(argmin(x, dims[0]), make(reduce_groups(gs, [](const auto& g) {
                                                           return static_cast<double>(ref_arg(g, false));
                                                         }), rs)));
      }
    }
  }
  // Ties and NaNs far apart in one long row: the first occurrence wins across parallel parts.
  std::vector<double> row(400000, 0.0);
  row[390000] = 7;
  row[250001] = 7;
  EXPECT_EQ(argmax(make(row, {400000}, dev())).item<int64_t>(), 250001);
  row[300000] = kNaN;
  row[200000] = kNaN;
  EXPECT_EQ(argmax(make(row, {400000}, dev())).item<int64_t>(), 200000);
  EXPECT_EQ(argmin(make(row, {400000}, dev(), kFloat32)).item<int64_t>(), 200000);
  std::vector<double> col(2 * 200000, 1.0);
  col[2 * 150000 + 1] = 9;
  col[2 * 120000 + 1] = 9;
  EXPECT_EQ(values(argmax(make(col, {200000, 2}, dev()), 0)), (std::vector<double>{0, 120000}));
}

TEST_P(ReduceTest, Float32SumOfTenMillionIsAccurate) {
  const int64_t n = 10000000;
  const Tensor x = full({n}, 0.1f, TensorOptions(kFloat32, dev()));
  const double expected = static_cast<double>(0.1f) * static_cast<double>(n);
  EXPECT_NEAR(sum(x).item<double>(), expected, expected * 1e-6);
  EXPECT_NEAR(mean(x).item<double>(), static_cast<double>(0.1f), 1e-7);
  EXPECT_NEAR(norm(x).item<double>(), std::sqrt(n * 0.01), std::sqrt(n * 0.01) * 1e-6);
  // Accumulating rows (kept innermost dim) is accurate too.
  const Tensor rows = sum(x.view({n / 4, 4}), {0});
  for (double r : values(rows)) EXPECT_NEAR(r, expected / 4, expected / 4 * 1e-6);
  // Variance around a large offset: a naive E[x^2] - E[x]^2 loses every digit here.
  std::vector<double> v(1000000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1e8 + (i % 2 ? 1.0 : -1.0);
  const double nv = static_cast<double>(v.size());
  EXPECT_NEAR(var(make(v, {1000000}, dev())).item<double>(), nv / (nv - 1), 1e-6);
  EXPECT_NEAR(var(make(v, {1000, 1000}, dev()), {1}, 0).mean().item<double>(), 1.0, 1e-6);
}

TEST_P(ReduceTest, LogsumexpIsStable) {
  EXPECT_NEAR(logsumexp(make({1000, 1000}, {2}, dev()), {0}).item<double>(), 1000 + std::log(2.0), 1e-9);
  EXPECT_NEAR(logsumexp(make({-1000, -1000}, {2}, dev(), kFloat32), {0}).item<double>(), -1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(logsumexp(make({-kInf, -kInf}, {2}, dev()), {0}).item<double>(), -kInf);
  EXPECT_EQ(logsumexp(make({kInf, 1}, {2}, dev()), {0}).item<double>(), kInf);
  EXPECT_NEAR(logsumexp(make({-kInf, 0}, {2}, dev()), {0}).item<double>(), 0, 1e-12);
}

// ---- gradients --------------------------------------------------------------------------------------

using Unary = std::function<Tensor(const Tensor&)>;

// gradcheck of f at x, and gradgradcheck of f(exp(x)): the inner exp makes every first derivative
// depend on x (also for the piecewise linear ops) without creating ties or zeros.
::testing::AssertionResult grad_ok(const Unary& f, const Tensor& x) {
  const Fn fn = [f](const TensorList& in) { return TensorList{f(in[0])}; };
  auto first = gradcheck(fn, {x});
  if (!first) return first;
  const Fn composed = [f](const TensorList& in) { return TensorList{f(exp(in[0]))}; };
  return gradgradcheck(composed, {x});
}

// gradcheck and gradgradcheck of f itself (f nonlinear).
::testing::AssertionResult both_orders(const Unary& f, const Tensor& x) {
  const Fn fn = [f](const TensorList& in) { return TensorList{f(in[0])}; };
  auto first = gradcheck(fn, {x});
  if (!first) return first;
  return gradgradcheck(fn, {x});
}

// A few dims / keepdim combinations on a 3-d input, also transposed.
struct GradCase {
  Shape dims;
  bool keepdim;
};
const GradCase kGradCases[] = {{{}, false}, {{1}, false}, {{0, -1}, true}, {{-2}, true}};

TEST_P(ReduceTest, GradSumMeanFirstAndSecondOrder) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (const auto& c : kGradCases) {
    SCOPED_TRACE(::testing::PrintToString(c.dims));
    EXPECT_TRUE(grad_ok([c](const Tensor& t) { return sum(t, c.dims, c.keepdim); }, x));
    EXPECT_TRUE(grad_ok([c](const Tensor& t) { return mean(t.transpose(0, 2), c.dims, c.keepdim); }, x));
  }
  const Tensor s = scalar_tensor(1.5, TensorOptions(kFloat64, dev(), true));
  EXPECT_TRUE(grad_ok([](const Tensor& t) { return sum(t) * t; }, s));
  // Exact values: the incoming gradient broadcast, divided by the count for mean.
  const Tensor y = leaf({2, 3}, dev());
  mean(y, {1}).sum().backward();
  EXPECT_TRUE(all_close(y.grad(), make(std::vector<double>(6, 1.0 / 3), {2, 3})));
}

TEST_P(ReduceTest, BroadcastGradientsSumToTheInputShape) {
  // The autograd engine reduces broadcast gradients with sum(..., keepdim = true).
  const Tensor a = leaf({3, 1}, dev());
  const Tensor b = leaf({2, 3, 4}, dev(), 9);
  (a * b).sum().backward();
  std::vector<double> expected(3, 0.0);
  const auto bv = values(b);
  for (int64_t i = 0; i < 24; ++i) expected[static_cast<size_t>(i / 4 % 3)] += bv[static_cast<size_t>(i)];
  EXPECT_TRUE(all_close(a.grad(), make(expected, {3, 1})));
}

TEST_P(ReduceTest, GradProdWithoutAndWithZeros) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (const auto& c : kGradCases) {
    SCOPED_TRACE(::testing::PrintToString(c.dims));
    EXPECT_TRUE(grad_ok([c](const Tensor& t) { return prod(t, c.dims, c.keepdim); }, x));
  }
  // Rows with one, two and three zeros and none: first and second order stay exact.
  const std::vector<double> v = {0.0, 1.5, -2.0, 0.5,    // one zero
                                 0.0, 0.7, 0.0, 1.2,     // two zeros
                                 0.0, 0.0, 0.0, 1.1,     // three zeros
                                 0.9, -1.1, 1.3, 0.8};   // none
  const Tensor z = make(v, {4, 4}, dev()).requires_grad_();
  EXPECT_TRUE(both_orders([](const Tensor& t) { return prod(t, {1}); }, z));
  EXPECT_TRUE(both_orders([](const Tensor& t) { return prod(t.t(), {0}, true); }, z));
  EXPECT_TRUE(both_orders([](const Tensor& t) { return prod(t.narrow(0, 0, 1)); }, z));
  EXPECT_TRUE(both_orders([](const Tensor& t) { return prod(t.narrow(0, 1, 1)); }, z));
  EXPECT_TRUE(both_orders([](const Tensor& t) { return prod(t); }, z));
  // Exact first-order values.
  const Tensor w = make({2, 0, 3, 0, 4, 0}, {2, 3}, dev()).requires_grad_();
  prod(w, {1}).sum().backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{0, 6, 0, 0, 0, 0}));
}

TEST_P(ReduceTest, GradAmaxAminSplitsTiesEvenly) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (const auto& c : kGradCases) {
    SCOPED_TRACE(::testing::PrintToString(c.dims));
    EXPECT_TRUE(grad_ok([c](const Tensor& t) { return amax(t, c.dims, c.keepdim); }, x));
    EXPECT_TRUE(grad_ok([c](const Tensor& t) { return amin(t.transpose(1, 2), c.dims, c.keepdim); }, x));
  }
  EXPECT_TRUE(grad_ok([](const Tensor& t) { return max(t); }, x));
  EXPECT_TRUE(grad_ok([](const Tensor& t) { return t.min(); }, x));
  const Tensor t = make({1, 3, 3, 2, 0, 0}, {2, 3}, dev()).requires_grad_();
  amax(t, {1}).sum().backward();
  EXPECT_EQ(values(t.grad()), (std::vector<double>{0, 0.5, 0.5, 1, 0, 0}));
  const Tensor u = make({1, 3, 3, 3}, {4}, dev()).requires_grad_();
  (max(u) * 3).backward();
  EXPECT_EQ(values(u.grad()), (std::vector<double>{0, 1, 1, 1}));
  const Tensor m = make({0, 2, 0, 5}, {4}, dev()).requires_grad_();
  min(m).backward();
  EXPECT_EQ(values(m.grad()), (std::vector<double>{0.5, 0, 0.5, 0}));
  // A NaN result sends the gradient to the NaNs.
  const Tensor n = make({1, kNaN, 2, kNaN, kNaN, 3}, {2, 3}, dev()).requires_grad_();
  amax(n, {1}).sum().backward();
  EXPECT_EQ(values(n.grad()), (std::vector<double>{0, 1, 0, 0.5, 0.5, 0}));
}

TEST_P(ReduceTest, GradMaxMinAlongDimGoesToTheSelectedIndex) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (int64_t d : {0, 1, -1}) {
    for (bool keepdim : {false, true}) {
      SCOPED_TRACE(::testing::Message() << d << " " << keepdim);
      EXPECT_TRUE(grad_ok([d, keepdim](const Tensor& t) { return max(t, d, keepdim).values; }, x));
      EXPECT_TRUE(grad_ok([d, keepdim](const Tensor& t) { return t.transpose(0, 1).min(d, keepdim).values; }, x));
    }
  }
  const Tensor t = make({1, 3, 3, 2, 0, 0}, {2, 3}, dev()).requires_grad_();
  max(t, 1).values.sum().backward();
  EXPECT_EQ(values(t.grad()), (std::vector<double>{0, 1, 0, 1, 0, 0}));
  const Tensor s = scalar_tensor(2.0, TensorOptions(kFloat64, dev(), true));
  max(s, 0).values.backward();
  EXPECT_EQ(s.grad().item<double>(), 1);
}

TEST_P(ReduceTest, GradVarStd) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (const auto& c : kGradCases) {
    for (int64_t corr : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(c.dims) << " correction " << corr);
      EXPECT_TRUE(both_orders([c, corr](const Tensor& t) { return var(t, c.dims, corr, c.keepdim); }, x));
      EXPECT_TRUE(grad_ok([c, corr](const Tensor& t) { return rtx::std(t.transpose(0, 2), c.dims, corr, c.keepdim); }, x));
    }
  }
  // Like PyTorch: the gradient of std is zero where the standard deviation is zero.
  const Tensor flat = make({2, 2, 2, 1, 3, 5}, {2, 3}, dev()).requires_grad_();
  rtx::std(flat, {1}).sum().backward();
  const auto g = values(flat.grad());
  EXPECT_EQ(std::vector<double>(g.begin(), g.begin() + 3), (std::vector<double>{0, 0, 0}));
  EXPECT_NEAR(g[3], -0.5, 1e-12);  // (x - mean) / ((n - 1) std) = -2 / (2 * 2)
  EXPECT_NEAR(g[5], 0.5, 1e-12);
}

TEST_P(ReduceTest, GradNormEveryP) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (double p : {2.0, 1.0, 3.0, 0.5, 1.5, kInf, -kInf}) {
    for (const auto& c : kGradCases) {
      SCOPED_TRACE(::testing::Message() << "p " << p << " " << ::testing::PrintToString(c.dims));
      EXPECT_TRUE(grad_ok([p, c](const Tensor& t) { return norm(t, p, c.dims, c.keepdim); }, x));
    }
  }
  // Zero gradients: p = 0 everywhere, p = 2 at a zero vector, ties of the inf-norm split evenly.
  const Tensor z = make({0, 0, 0, 3, -4, 0}, {2, 3}, dev()).requires_grad_();
  norm(z, 2.0, {1}).sum().backward();
  EXPECT_TRUE(all_close(z.grad(), make({0, 0, 0, 0.6, -0.8, 0}, {2, 3})));
  const Tensor w = make({1, -3, 3, 2}, {4}, dev()).requires_grad_();
  norm(w, kInf).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{0, -0.5, 0.5, 0}));
  const Tensor q = make({1, -3, 3, 2}, {4}, dev()).requires_grad_();
  norm(q, 0.0).backward();
  EXPECT_EQ(values(q.grad()), (std::vector<double>{0, 0, 0, 0}));
}

TEST_P(ReduceTest, GradLogsumexpAndCumsum) {
  const Tensor x = leaf({2, 3, 2}, dev());
  for (const auto& c : kGradCases) {
    SCOPED_TRACE(::testing::PrintToString(c.dims));
    EXPECT_TRUE(both_orders([c](const Tensor& t) { return logsumexp(t, c.dims, c.keepdim); }, x));
  }
  for (int64_t d : {0, 1, -1}) {
    SCOPED_TRACE(d);
    EXPECT_TRUE(grad_ok([d](const Tensor& t) { return cumsum(t, d); }, x));
    EXPECT_TRUE(grad_ok([d](const Tensor& t) { return t.transpose(0, 2).cumsum(d); }, x));
  }
  // logsumexp's gradient is the softmax; cumsum's the reverse cumulative sum.
  const Tensor y = make({1, 2, 3}, {3}, dev()).requires_grad_();
  logsumexp(y, {0}).backward();
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_TRUE(all_close(y.grad(), make({std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z}, {3})));
  const Tensor c = make({1, 2, 3}, {3}, dev()).requires_grad_();
  (cumsum(c, 0) * make({1, 10, 100}, {3}, dev())).sum().backward();
  EXPECT_EQ(values(c.grad()), (std::vector<double>{111, 110, 100}));
}

TEST_P(ReduceTest, NonDifferentiableResultsDoNotRequireGrad) {
  const Tensor x = leaf({2, 3}, dev());
  EXPECT_TRUE(sum(x).requires_grad());
  EXPECT_FALSE(argmax(x).requires_grad());
  EXPECT_FALSE(max(x, 1).indices.requires_grad());
  EXPECT_TRUE(max(x, 1).values.requires_grad());
  EXPECT_FALSE(any(x).requires_grad());
  {
    NoGradGuard ng;
    EXPECT_FALSE(sum(x).requires_grad());
  }
}

// ---- errors -----------------------------------------------------------------------------------------

TEST_P(ReduceTest, ErrorMessages) {
  const Tensor x = zeros({2, 3}, dev());
  const Tensor i = zeros({2, 3}, TensorOptions(kInt64, dev()));
  const Tensor e = zeros({0, 3}, dev());
  EXPECT_TRUE(throws<ValueError>([&] { sum(Tensor()); }, "[sum] input is an undefined tensor"));
  EXPECT_TRUE(throws<IndexError>([&] { sum(x, {1, -1}); }, "[sum] dim 1 appears more than once"));
  EXPECT_TRUE(throws<IndexError>([&] { x.mean({2}); }, "[mean] dim 2 out of range for a 2-d tensor"));
  EXPECT_TRUE(throws<IndexError>([&] { amax(x, {-3}); }, "[amax] dim -3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { max(x, 2); }, "[max] dim 2 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { argmin(x, -3); }, "[argmin] dim -3 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { cumsum(x, 2); }, "[cumsum] dim 2 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { sum(scalar_tensor(1.0), {1}); }, "[sum] dim 1 out of range for a 0-d tensor"));
  for (const char* op : {"mean", "var", "std", "norm", "logsumexp"}) {
    SCOPED_TRACE(op);
    auto call = [&] {
      const std::string o = op;
      if (o == "mean") mean(i);
      else if (o == "var") var(i);
      else if (o == "std") rtx::std(i);
      else if (o == "norm") norm(i);
      else logsumexp(i, {});
    };
    EXPECT_TRUE(throws<DTypeError>(call, std::string("[") + op + "] expects a floating point input, got int64"));
    EXPECT_TRUE(throws<DTypeError>(call, "convert it with .to(rtx::kFloat32)"));
  }
  EXPECT_TRUE(throws<ValueError>([&] { norm(x, kNaN); }, "[norm] p must be a number"));
  const char* empty_msg = "cannot reduce over a zero-size dim";
  EXPECT_TRUE(throws<IndexError>([&] { amax(e, {0}); }, "[amax] cannot reduce over a zero-size dim 0 of a tensor of shape [0, 3]"));
  EXPECT_TRUE(throws<IndexError>([&] { amin(e); }, std::string("[amin] ") + empty_msg));
  EXPECT_TRUE(throws<IndexError>([&] { max(e); }, std::string("[max] ") + empty_msg));
  EXPECT_TRUE(throws<IndexError>([&] { min(e); }, std::string("[min] ") + empty_msg));
  EXPECT_TRUE(throws<IndexError>([&] { max(e, 0); }, std::string("[max] ") + empty_msg + " 0"));
  EXPECT_TRUE(throws<IndexError>([&] { min(e, -2, true); }, std::string("[min] ") + empty_msg + " 0"));
  EXPECT_TRUE(throws<IndexError>([&] { argmax(e); }, std::string("[argmax] ") + empty_msg + ": the input of shape [0, 3]"));
  EXPECT_TRUE(throws<IndexError>([&] { argmin(e, 0); }, std::string("[argmin] ") + empty_msg + " 0"));
  EXPECT_TRUE(throws<IndexError>([&] { norm(e, kInf); }, std::string("[norm] ") + empty_msg));
  EXPECT_TRUE(throws<IndexError>([&] { norm(e, -kInf, {0}); }, std::string("[norm] ") + empty_msg));
}

// ---- layouts of every GPU path ------------------------------------------------------------------------

// Long rows split over several blocks (also from a misaligned start and along a strided run), one long
// vector, many short rows, columns with and without outer dims (vectorizable or not), runs of an inner
// reduced dim under an outer reduced one, a permuted input and a broadcast (stride 0) one; every float
// dtype, against float64 loops over the same (exactly representable) values.
TEST_P(ReduceTest, EveryKernelPathAndLayoutMatchesReference) {
  struct Case {
    Shape base;
    Shape dims;
    std::function<Tensor(const Tensor&)> view;
  };
  const auto same = [](const Tensor& t) { return t; };
  const std::vector<Case> cases = {
      {{3, 70000}, {1}, same},
      {{300000}, {}, same},
      {{20000, 7}, {1}, same},
      {{5000, 33}, {0}, same},
      {{4096, 64}, {0}, same},
      {{7, 2000, 30}, {1}, same},
      {{16, 8, 50}, {0, 2}, same},
      {{3, 70001}, {1}, [](const Tensor& t) { return t.narrow(1, 1, 70000); }},
      {{3, 140000}, {1}, [](const Tensor& t) { return t.slice(1, 0, std::nullopt, 2); }},
      {{70000, 3}, {1}, [](const Tensor& t) { return t.t(); }},
      {{40, 50, 60}, {0, 2}, [](const Tensor& t) { return t.permute({2, 0, 1}); }},
      {{1, 5000}, {0}, [](const Tensor& t) { return t.expand({300, 5000}); }},
  };
  uint64_t seed = 21;
  for (const Case& c : cases) {
    const std::vector<double> v = quarters(numel(c.base), seed++);
    const Tensor ref_x = c.view(make(v, c.base));
    const Shape shape = ref_x.sizes();
    const std::vector<bool> reduced = reduced_mask(c.dims, static_cast<int64_t>(shape.size()));
    const auto gs = groups(values(ref_x), shape, reduced);
    const Shape rs = result_shape(shape, reduced, false);
    auto expect = [&](const Ref& f) { return make(reduce_groups(gs, f), rs); };
    const Tensor e_sum = expect(ref_sum), e_mean = expect(ref_mean);
    const Tensor e_max = expect([](const auto& g) { return ref_extreme(g, true); });
    const Tensor e_min = expect([](const auto& g) { return ref_extreme(g, false); });
    const Tensor e_var = expect([](const auto& g) { return ref_var(g, 1); });
    const Tensor e_lse = expect(ref_logsumexp);
    const Tensor e_norm = expect([](const auto& g) { return ref_norm(g, 2); });
    const Tensor e_inf = expect([](const auto& g) { return ref_norm(g, kInf); });
    const Tensor e_all = expect(ref_all), e_any = expect(ref_any);
    const Tensor e_prod = expect([](const auto& g) {
      double p = 1;
      for (double x : g) p *= x < 0 ? -1.0 : 1.0;
      return p;
    });
    const Tensor e_argmax = expect([](const auto& g) { return static_cast<double>(ref_arg(g, true)); });
    const Tensor e_argmin = expect([](const auto& g) { return static_cast<double>(ref_arg(g, false)); });
    for (DType dt : kFloatTypes) {
      SCOPED_TRACE(::testing::Message() << "base " << ::testing::PrintToString(c.base) << " view "
                                        << ::testing::PrintToString(shape) << " dims " << ::testing::PrintToString(c.dims)
                                        << " " << dtype_name(dt));
      const Tensor x = c.view(make(v, c.base, dev(), dt));
      const double rtol = dt == kFloat64 ? 1e-9 : dt == kFloat32 ? 1e-5 : -1;
      const double atol = dt == kFloat64 ? 1e-9 : dt == kFloat32 ? 1e-5 : -1;
      EXPECT_TRUE(all_close(sum(x, c.dims), e_sum, rtol, atol));
      EXPECT_TRUE(all_close(mean(x, c.dims), e_mean, rtol, atol));
      EXPECT_TRUE(all_close(amax(x, c.dims), e_max));
      EXPECT_TRUE(all_close(amin(x, c.dims), e_min));
      EXPECT_TRUE(all_close(var(x, c.dims), e_var, rtol, atol));
      EXPECT_TRUE(all_close(logsumexp(x, c.dims), e_lse, rtol, atol));
      EXPECT_TRUE(all_close(norm(x, 2.0, c.dims), e_norm, rtol, atol));
      EXPECT_TRUE(all_close(norm(x, kInf, c.dims), e_inf));
      EXPECT_TRUE(all_close(all(x, c.dims), e_all));
      EXPECT_TRUE(all_close(any(x < -1.5, c.dims), expect([](const auto& g) {
        return static_cast<double>(std::any_of(g.begin(), g.end(), [](double y) { return y < -1.5; }));
      })));
      EXPECT_TRUE(all_close(prod((x < 0).to(dt) * -2 + 1, c.dims), e_prod));
      if (c.dims.size() == 1) {
        EXPECT_TRUE(all_close(argmax(x, c.dims[0]), e_argmax));
        EXPECT_TRUE(all_close(argmin(x, c.dims[0]), e_argmin));
        EXPECT_TRUE(all_close(max(x, c.dims[0]).values, e_max));
      }
    }
    // Integer sums of the same layout (int64 accumulation).
    const Tensor xi = c.view(make(v, c.base, dev(), kFloat64) * 4).to(kInt32);
    EXPECT_EQ(values(sum(xi, c.dims)), values(e_sum * 4));
  }
}

// A NaN and ties far apart in one long row and in long columns: the first one wins on every path.
TEST_P(ReduceTest, ArgReduceTiesAndNaNsAcrossChunks) {
  const int64_t n = 1000003;
  for (DType dt : {kFloat32, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<double> row(static_cast<size_t>(n), 0.0);
    row[987654] = 3;
    row[123457] = 3;
    row[555555] = -3;
    row[20] = -3;
    EXPECT_EQ(argmax(make(row, {n}, dev(), dt)).item<int64_t>(), 123457);
    EXPECT_EQ(argmin(make(row, {n}, dev(), dt)).item<int64_t>(), 20);
    row[700001] = kNaN;
    row[400009] = kNaN;
    EXPECT_EQ(argmax(make(row, {n}, dev(), dt)).item<int64_t>(), 400009);
    EXPECT_EQ(argmin(make(row, {n}, dev(), dt)).item<int64_t>(), 400009);
    EXPECT_TRUE(std::isnan(amax(make(row, {n}, dev(), dt)).item<double>()));
    EXPECT_TRUE(std::isnan(sum(make(row, {n}, dev(), dt)).item<double>()));
    // Columns: [rows, 5], column k holds its maximum at rows 90000 + k and 30000 + 7k.
    const int64_t rows = 100000;
    std::vector<double> col(static_cast<size_t>(rows * 5), 1.0);
    for (int64_t k = 0; k < 5; ++k) {
      col[static_cast<size_t>((90000 + k) * 5 + k)] = 2;
      col[static_cast<size_t>((30000 + 7 * k) * 5 + k)] = 2;
    }
    col[static_cast<size_t>(60000 * 5 + 3)] = kNaN;
    const Tensor c = make(col, {rows, 5}, dev(), dt);
    EXPECT_EQ(values(argmax(c, 0)), (std::vector<double>{30000, 30007, 30014, 60000, 30028}));
    EXPECT_EQ(values(argmin(c, 0)), (std::vector<double>{0, 0, 0, 60000, 0}));
    EXPECT_EQ(values(argmax(c.t(), 1)), (std::vector<double>{30000, 30007, 30014, 60000, 30028}));
  }
}

// Results are bitwise the same run to run.
TEST_P(ReduceTest, ResultsAreDeterministic) {
  const Tensor x = make(smooth(3000000, 41), {3000000}, dev(), kFloat32);
  const Tensor m = make(smooth(3000000, 43), {1000, 3000}, dev(), kFloat32);
  for (int rep = 0; rep < 2; ++rep) {
    EXPECT_EQ(sum(x).item<float>(), sum(x).item<float>());
    EXPECT_EQ(var(x).item<float>(), var(x).item<float>());
    EXPECT_EQ(logsumexp(x, {0}).item<float>(), logsumexp(x, {0}).item<float>());
    EXPECT_EQ(values(sum(m, {0})), values(sum(m, {0})));
    EXPECT_EQ(values(norm(m, 2.0, {1})), values(norm(m, 2.0, {1})));
    EXPECT_EQ(values(cumsum(x, 0)), values(cumsum(x, 0)));
  }
}

// Long and short rows, long columns and few lines (the chunked scans) against float64 prefix sums.
TEST_P(ReduceTest, CumsumLongRowsColumnsAndManyRows) {
  const std::vector<std::pair<Shape, int64_t>> cases = {{{2, 100000}, 1}, {{100000, 3}, 0}, {{5, 3000, 2}, 1},
                                                        {{50000, 5}, 1},  {{300000}, 0},    {{3, 1500, 40}, 1}};
  uint64_t seed = 31;
  for (const auto& [shape, dim] : cases) {
    std::vector<double> v = quarters(numel(shape), seed++);
    for (auto& x : v) x = x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      if (d < dim) outer *= shape[d];
      if (d > dim) inner *= shape[d];
    }
    const int64_t len = shape[dim];
    std::vector<double> expected(v.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < inner; ++k) {
        double acc = 0;
        for (int64_t i = 0; i < len; ++i) {
          const size_t at = static_cast<size_t>((o * len + i) * inner + k);
          acc += v[at];
          expected[at] = acc;
        }
      }
    }
    for (DType dt : {kFloat64, kFloat32, kFloat16, kInt32, kInt8}) {
      SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(shape) << " dim " << dim << " " << dtype_name(dt));
      const Tensor got = cumsum(make(v, shape, dev(), dt), dim);
      EXPECT_EQ(got.dtype(), is_floating(dt) ? dt : kInt64);
      ASSERT_TRUE(all_close(got, make(expected, shape)));
    }
    // A transposed input is scanned along the same logical dim.
    if (shape.size() == 2) {
      const Tensor t = make(v, shape, dev(), kFloat32).t().contiguous().t();
      ASSERT_TRUE(all_close(cumsum(t, dim), make(expected, shape)));
    }
  }
}

}  // namespace
}  // namespace rtx::testing
