// Ops built from other ops (rtx/ops.h, "ops built from the ops above"): elementwise (nan_to_num, logit,
// xlogy, signbit, copysign, heaviside, fmax/fmin, ...), statistics (var_mean, aminmax, nansum,
// kthvalue, median, quantile, ...), joining and splitting (atleast_nd, hstack, tensor_split,
// block_diag, cartesian_prod, ...) and matrices (diag, diag_embed, tril_indices, kron, tensordot,
// cross, cdist, rot90): values against hand-worked numbers and float64 loops on every device, NaN,
// inf and -0.0 edge cases, first-order gradients and errors naming the op.
#include <algorithm>
#include <cmath>
#include <limits>

#include "test_utils.h"

namespace rtx::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class CompositeTest : public DeviceTest {
 protected:
  Tensor f64(const std::vector<double>& v, const Shape& shape) const { return make(v, shape, dev()); }
  Tensor f64(const std::vector<double>& v) const { return f64(v, {static_cast<int64_t>(v.size())}); }
  Tensor i64(const std::vector<double>& v) const { return make(v, {static_cast<int64_t>(v.size())}, dev(), kInt64); }
  // A float64 tensor of shape whose element at flat index i holds i.
  Tensor base(const Shape& shape) const {
    std::vector<double> v(static_cast<size_t>(numel(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    return f64(v, shape);
  }
};
INSTANTIATE_DEVICE_TESTS(CompositeTest);

using V = std::vector<double>;

Fn unary(std::function<Tensor(const Tensor&)> f) {
  return [f](const TensorList& in) { return TensorList{f(in[0])}; };
}
Fn binary(std::function<Tensor(const Tensor&, const Tensor&)> f) {
  return [f](const TensorList& in) { return TensorList{f(in[0], in[1])}; };
}

// The signbit of each value (so that -0.0 and 0.0 differ).
std::vector<bool> signs(const Tensor& t) {
  std::vector<bool> s;
  for (double v : values(t)) s.push_back(std::signbit(v));
  return s;
}

// Row r of a row-major [rows, n] buffer, sorted with its original indices (NaN last).
std::vector<std::pair<double, int64_t>> sorted_row(const V& v, int64_t n, int64_t r) {
  std::vector<std::pair<double, int64_t>> row;
  for (int64_t j = 0; j < n; ++j) row.push_back({v[static_cast<size_t>(r * n + j)], j});
  std::stable_sort(row.begin(), row.end(), [](const auto& a, const auto& b) {
    return std::isnan(b.first) ? !std::isnan(a.first) : a.first < b.first;
  });
  return row;
}

// The q-quantile of a sorted row of distinct, non-NaN values, as numpy.quantile(method=interp).
double quantile_ref(const std::vector<std::pair<double, int64_t>>& row, double q, const std::string& interp) {
  const double rank = q * static_cast<double>(row.size() - 1);
  const auto at = [&](double r) { return row[static_cast<size_t>(r)].first; };
  const double lo = at(std::floor(rank)), hi = at(std::ceil(rank));
  if (interp == "lower") return lo;
  if (interp == "higher") return hi;
  if (interp == "midpoint") return (lo + hi) / 2;
  if (interp == "nearest") return at(std::nearbyint(rank));  // ties to even
  return lo + (rank - std::floor(rank)) * (hi - lo);
}

// ---- elementwise ----------------------------------------------------------------------------------

TEST_P(CompositeTest, NanToNumAndInfPredicates) {
  const V in{kNaN, kInf, -kInf, 1.5, -0.0};
  const double big64 = std::numeric_limits<double>::max(), big32 = std::numeric_limits<float>::max();
  EXPECT_EQ(values(nan_to_num(f64(in))), (V{0, big64, -big64, 1.5, 0}));
  EXPECT_EQ(values(nan_to_num(f64(in).to(kFloat32))), (V{0, big32, -big32, 1.5, 0}));
  EXPECT_EQ(values(nan_to_num(f64(in), 2, 3, -4)), (V{2, 3, -4, 1.5, 0}));
  EXPECT_EQ(values(nan_to_num(f64(in), 0, 9)), (V{0, 9, -big64, 1.5, 0}));
  EXPECT_EQ(nan_to_num(f64(in).to(kFloat32)).dtype(), kFloat32);
  const Tensor ints = i64({1, -2});
  const Tensor copy = nan_to_num(ints);
  EXPECT_EQ(copy.dtype(), kInt64);
  EXPECT_FALSE(copy.shares_storage(ints));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return nan_to_num(t * 2.0, 0, 1); }), {leaf({2, 3}, dev())}));
  const Tensor p = isposinf(f64(in)), n = isneginf(f64(in));
  EXPECT_EQ(p.dtype(), kBool);
  EXPECT_EQ(values(p), (V{0, 1, 0, 0, 0}));
  EXPECT_EQ(values(n), (V{0, 0, 1, 0, 0}));
  EXPECT_EQ(values(isposinf(ints)), (V{0, 0}));
}

TEST_P(CompositeTest, SignbitAndCopysignSeeNegativeZero) {
  const V in{-0.0, 0.0, -1, 1, kNaN, -kNaN, -kInf};
  for (DType t : {kFloat64, kFloat32}) {
    const Tensor s = signbit(f64(in).to(t));
    EXPECT_EQ(s.dtype(), kBool);
    EXPECT_EQ(values(s), (V{1, 0, 1, 0, 0, 1, 1})) << t;
  }
  EXPECT_EQ(values(signbit(i64({-3, 0, 2}))), (V{1, 0, 0}));
  EXPECT_EQ(values(signbit(f64({-3, 0, 2}).t())), (V{1, 0, 0}));
  const Tensor c = copysign(f64({1, -2, 3, 0, kInf, 2}), f64({-0.0, 0.0, -kInf, -1, -2, -kNaN}));
  EXPECT_EQ(values(c), (V{-1, 2, -3, 0, -kInf, -2}));
  EXPECT_EQ(signs(c), (std::vector<bool>{true, false, true, true, true, true}));  // copysign(0, -1) = -0.0
  const Tensor ci = copysign(i64({1, -2}), i64({-1, 1}));
  EXPECT_EQ(ci.dtype(), get_default_dtype());
  EXPECT_EQ(values(ci), (V{-1, 2}));
  EXPECT_EQ(values(copysign(f64({3, -4}), scalar_tensor(-1.0, TensorOptions(kFloat64, dev())))), (V{-3, -4}));
  const Tensor b = f64({-1, 2, -0.0, 0.5, 3, -2});
  EXPECT_TRUE(gradcheck(unary([b](const Tensor& a) { return copysign(a, b.view({2, 3})); }), {leaf({2, 3}, dev())}));
}

TEST_P(CompositeTest, LogitXlogyFracAnglesFloatPower) {
  EXPECT_TRUE(all_close(logit(f64({0.25, 0.5, 0.9, 0, 1})), f64({std::log(1 / 3.0), 0, std::log(9.0), -kInf, kInf})));
  EXPECT_TRUE(all_close(logit(f64({0.25, 0.05, 0.99, -1}), 0.1),
                        f64({std::log(1 / 3.0), std::log(1 / 9.0), std::log(9.0), std::log(1 / 9.0)})));
  EXPECT_TRUE(std::isnan(values(logit(f64({1.5})))[0]));
  EXPECT_EQ(logit(i64({0, 1})).dtype(), get_default_dtype());
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return logit(t * 0.3 + 0.5); }), {leaf({2, 3}, dev())}));
  // 0 * log(y) is 0 unless y is NaN; x * log(0) is -inf; a NaN x stays NaN.
  EXPECT_TRUE(all_close(xlogy(f64({0, 0, 0, 2, 3, -1, kNaN}), f64({0, kNaN, kInf, 0, std::exp(1.0), 4, 1})),
                        f64({0, kNaN, 0, -kInf, 3, -std::log(4.0), kNaN})));
  const Tensor xi = xlogy(i64({1, 2}), i64({2, 3}));
  EXPECT_EQ(xi.dtype(), get_default_dtype());
  EXPECT_TRUE(all_close(xi, f64({std::log(2.0), 2 * std::log(3.0)}).to(xi.dtype())));
  EXPECT_TRUE(all_close(xlogy(f64({2, 3}), scalar_tensor(4, TensorOptions(kInt64, dev()))),
                        f64({2 * std::log(4.0), 3 * std::log(4.0)})));
  EXPECT_TRUE(gradcheck(binary([](const Tensor& x, const Tensor& y) { return xlogy(x, y * y + 0.5); }),
                        {leaf({2, 3}, dev(), 1), leaf({2, 3}, dev(), 2)}));
  EXPECT_EQ(values(frac(f64({1.75, -1.75, 2, -0.5, 0}))), (V{0.75, -0.75, 0, -0.5, 0}));
  EXPECT_TRUE(throws<DTypeError>([&] { frac(i64({1})); }, "[frac]"));
  EXPECT_TRUE(all_close(deg2rad(f64({180, -90, 45})), f64({M_PI, -M_PI / 2, M_PI / 4})));
  EXPECT_TRUE(all_close(rad2deg(f64({M_PI, -M_PI / 2})), f64({180, -90})));
  EXPECT_EQ(deg2rad(i64({180})).dtype(), get_default_dtype());
  const Tensor fp = float_power(f64({2, 4, -8}).to(kFloat32), i64({3, -1, 1}));
  EXPECT_EQ(fp.dtype(), kFloat64);
  EXPECT_EQ(values(fp), (V{8, 0.25, -8}));
  EXPECT_TRUE(std::isnan(values(float_power(i64({-8}), f64({1 / 3.0})))[0]));
}

TEST_P(CompositeTest, HeavisideAndNanIgnoringMaxMin) {
  EXPECT_EQ(values(heaviside(f64({-1.5, 0, 2, 0}), f64({0.5, 0.5, 0.5, 7}))), (V{0, 0.5, 1, 7}));
  EXPECT_EQ(values(heaviside(f64({-0.0, 3}), scalar_tensor(0.25, TensorOptions(kFloat64, dev())))), (V{0.25, 1}));
  EXPECT_EQ(values(heaviside(i64({-2, 0, 5}), i64({9, 9, 9}))), (V{0, 9, 1}));
  EXPECT_TRUE(throws<DTypeError>([&] { heaviside(f64({1}), f64({1}).to(kFloat32)); }, "[heaviside]"));
  const Tensor a = f64({1, kNaN, kNaN, -kInf, 3}), b = f64({2, 5, kNaN, 0, -1});
  EXPECT_TRUE(all_close(fmax(a, b), f64({2, 5, kNaN, 0, 3})));
  EXPECT_TRUE(all_close(fmin(a, b), f64({1, 5, kNaN, -kInf, -1})));
  EXPECT_TRUE(all_close(fmax(a.view({5, 1}), b.view({1, 5})).select(0, 1), f64({2, 5, kNaN, 0, -1})));  // broadcast
  const Tensor m = fmax(a.to(kFloat32), b);
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(values(fmin(i64({1, 5}), i64({3, 2}))), (V{1, 2}));
  EXPECT_EQ(fmin(i64({1, 5}), i64({3, 2})).dtype(), kInt64);
  EXPECT_TRUE(gradcheck(binary([](const Tensor& x, const Tensor& y) { return fmax(x, y); }),
                        {leaf({2, 3}, dev(), 3), leaf({2, 3}, dev(), 4)}));
  EXPECT_TRUE(gradcheck(binary([](const Tensor& x, const Tensor& y) { return fmin(x, y); }),
                        {leaf({2, 3}, dev(), 3), leaf({3}, dev(), 4)}));
}

// ---- statistics -----------------------------------------------------------------------------------

TEST_P(CompositeTest, VarMeanAminmaxNansum) {
  const V v = irregular(12);
  const Tensor x = f64(v, {3, 4});
  const TensorList vm = var_mean(x, {1});
  const TensorList sm = std_mean(x, {1}, 0, true);
  V var1, std0, mean;
  for (int r = 0; r < 3; ++r) {
    double s = 0, ss = 0;
    for (int j = 0; j < 4; ++j) s += v[r * 4 + j];
    for (int j = 0; j < 4; ++j) ss += (v[r * 4 + j] - s / 4) * (v[r * 4 + j] - s / 4);
    mean.push_back(s / 4), var1.push_back(ss / 3), std0.push_back(std::sqrt(ss / 4));
  }
  EXPECT_TRUE(all_close(vm[0], f64(var1)));
  EXPECT_TRUE(all_close(vm[1], f64(mean)));
  EXPECT_TRUE(all_close(sm[0], f64(std0, {3, 1})));
  EXPECT_TRUE(all_close(sm[1], f64(mean, {3, 1})));
  EXPECT_EQ(var_mean(x)[0].dim(), 0);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return var_mean(in[0], {0}); }, {leaf({3, 2}, dev())}));
  // aminmax: NaN propagates like amin/amax.
  const TensorList mm = aminmax(f64({3, -1, 2, 7, kNaN, 0}, {2, 3}), 1, true);
  EXPECT_EQ(mm[0].sizes(), (Shape{2, 1}));
  EXPECT_TRUE(all_close(mm[0], f64({-1, kNaN}, {2, 1})));
  EXPECT_TRUE(all_close(mm[1], f64({3, kNaN}, {2, 1})));
  const TensorList all = aminmax(x);
  EXPECT_EQ(all[0].dim(), 0);
  EXPECT_EQ(values(all[0])[0], *std::min_element(v.begin(), v.end()));
  EXPECT_EQ(values(all[1])[0], *std::max_element(v.begin(), v.end()));
  // nansum / nanmean: an all-NaN row sums to 0 and averages to NaN.
  const Tensor n = f64({1, kNaN, 3, kNaN, kNaN, kNaN}, {2, 3});
  EXPECT_EQ(values(nansum(n, {1})), (V{4, 0}));
  EXPECT_TRUE(all_close(nanmean(n, {1}), f64({2, kNaN})));
  EXPECT_EQ(values(nansum(n)), (V{4}));
  EXPECT_TRUE(all_close(nanmean(n, {0}, true), f64({1, kNaN, 3}, {1, 3})));
  EXPECT_EQ(nansum(i64({1, 2, 3}).to(kInt32)).dtype(), kInt64);
  EXPECT_EQ(values(nansum(f64({}, {0}))), (V{0}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return nanmean(t, {1}); }), {leaf({2, 3}, dev())}));
  EXPECT_TRUE(throws<DTypeError>([&] { nanmean(i64({1})); }, "[nanmean]"));
}

TEST_P(CompositeTest, KthvalueAndMedianPickSortedElements) {
  const V v = irregular(15);
  const Tensor x = f64(v, {3, 5});
  const ValuesIndices k2 = kthvalue(x, 2, 1), med = median(x, -1), med0 = median(x, 0, true);
  EXPECT_EQ(k2.indices.dtype(), kInt64);
  for (int64_t r = 0; r < 3; ++r) {
    const auto row = sorted_row(v, 5, r);
    EXPECT_EQ(values(k2.values)[r], row[1].first);
    EXPECT_EQ(values(k2.indices)[r], row[1].second);
    EXPECT_EQ(values(med.values)[r], row[2].first);
    EXPECT_EQ(values(med.indices)[r], row[2].second);
  }
  EXPECT_EQ(med0.values.sizes(), (Shape{1, 5}));
  for (int64_t c = 0; c < 5; ++c) {  // a column of 3: the middle one
    const auto col = sorted_row(values(x.t().contiguous()), 3, c);
    EXPECT_EQ(values(med0.values)[c], col[1].first);
    EXPECT_EQ(values(med0.indices)[c], col[1].second);
  }
  // Even counts give the lower median; median(x) of all 15 elements is the 8th smallest.
  EXPECT_EQ(values(median(f64({4, 1, 3, 2}))), (V{2}));
  V all = v;
  std::sort(all.begin(), all.end());
  EXPECT_EQ(values(median(x)), (V{all[7]}));
  EXPECT_EQ(values(kthvalue(x.flatten(), 15).values), (V{all[14]}));
  // Ties: the index points at an element holding the value.
  const ValuesIndices tie = median(f64({2, 1, 2, 2}), 0);
  EXPECT_EQ(values(tie.values), (V{2}));
  EXPECT_NE(values(tie.indices)[0], 1);
  // NaN: median gives NaN and the NaN's index; nanmedian skips NaNs, NaN only for an all-NaN row.
  const Tensor n = f64({3, kNaN, 1, 2, 4, kNaN, 5, 2, kNaN, kNaN, kNaN, kNaN}, {3, 4});
  const ValuesIndices mn = median(n, 1), nm = nanmedian(n, 1);
  EXPECT_TRUE(std::isnan(values(mn.values)[0]) && std::isnan(values(mn.values)[1]) && std::isnan(values(mn.values)[2]));
  EXPECT_EQ(values(mn.indices)[0], 1);
  EXPECT_EQ(values(mn.indices)[1], 1);
  EXPECT_TRUE(all_close(nm.values, f64({2, 4, kNaN})));  // the middle of {1, 2, 3} and of {2, 4, 5}
  EXPECT_EQ(values(nm.indices)[0], 3);
  EXPECT_EQ(values(nm.indices)[1], 0);
  EXPECT_TRUE(std::isnan(values(median(n))[0]));
  EXPECT_EQ(values(nanmedian(n)), (V{2}));  // element 2 of {1, 2, 2, 3, 4, 5}
  EXPECT_EQ(values(nanmedian(f64({4, kNaN, 1, 2, 8}))), (V{2}));  // lower median of 4 values
  EXPECT_TRUE(std::isnan(values(median(f64({}, {0})))[0]));
  EXPECT_EQ(median(scalar_tensor(5.0, TensorOptions(kFloat64, dev())), 0).values.dim(), 0);
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return median(t, 1).values; }), {leaf({3, 4}, dev())}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return kthvalue(t, 2, 0, true).values; }), {leaf({3, 2}, dev())}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return nanmedian(t); }), {leaf({5}, dev())}));
  EXPECT_TRUE(throws<IndexError>([&] { kthvalue(x, 6, 1); }, "[kthvalue] k = 6"));
  EXPECT_TRUE(throws<IndexError>([&] { kthvalue(x, 0); }, "[kthvalue]"));
  EXPECT_TRUE(throws<ShapeError>([&] { median(f64({}, {2, 0}), 1); }, "[median]"));
}

TEST_P(CompositeTest, QuantileMatchesEveryInterpolation) {
  const V v = irregular(15, 0.3);
  const Tensor x = f64(v, {3, 5});
  const V qs{0, 0.125, 0.375, 0.5, 0.9, 1};  // ranks 0, 0.5, 1.5, 2, 3.6, 4: ties of "nearest" go to even
  const Tensor q = f64(qs);
  for (const std::string interp : {"linear", "lower", "higher", "midpoint", "nearest"}) {
    const Tensor out = quantile(x, q, 1, false, interp);
    ASSERT_EQ(out.sizes(), (Shape{6, 3})) << interp;
    V expected;
    for (double qq : qs)
      for (int64_t r = 0; r < 3; ++r) expected.push_back(quantile_ref(sorted_row(v, 5, r), qq, interp));
    EXPECT_TRUE(all_close(out, f64(expected, {6, 3}))) << interp;
  }
  // Flattened, a 0-d q, keepdim shapes.
  const Tensor half = scalar_tensor(0.5, TensorOptions(kFloat64, dev()));
  EXPECT_TRUE(all_close(quantile(x, half), f64(V{quantile_ref(sorted_row(v, 15, 0), 0.5, "linear")}, {})));
  EXPECT_EQ(quantile(x, q, 0, true).sizes(), (Shape{6, 1, 5}));
  EXPECT_EQ(quantile(x, q, std::nullopt, true).sizes(), (Shape{6, 1, 1}));
  EXPECT_EQ(quantile(x, half, -1, true).sizes(), (Shape{3, 1}));
  // A row holding a NaN gives NaN; the other rows are untouched.
  const Tensor n = f64({1, 2, 3, 4, kNaN, 4, 0, 2}, {2, 4});
  EXPECT_TRUE(all_close(quantile(n, f64({0, 0.5}), 1), f64({1, kNaN, 2.5, kNaN}, {2, 2})));
  EXPECT_TRUE(std::isnan(values(quantile(n, half))[0]));
  EXPECT_TRUE(throws<ShapeError>([&] { quantile(f64({}, {0}), half); }, "[quantile] expects a non-empty input"));
  EXPECT_EQ(quantile(x.to(kFloat32), half.to(kFloat32)).dtype(), kFloat32);
  EXPECT_TRUE(gradcheck(unary([&](const Tensor& t) { return quantile(t, f64({0.3, 0.5, 1}), 1); }),
                        {leaf({2, 5}, dev())}));
  EXPECT_TRUE(gradcheck(unary([&](const Tensor& t) { return quantile(t, f64({0.3}), 0, false, "midpoint"); }),
                        {leaf({4, 2}, dev())}));
  EXPECT_TRUE(throws<ValueError>([&] { quantile(x, f64({0.5, 1.5})); }, "[quantile] q values must lie in [0, 1]"));
  EXPECT_TRUE(throws<ValueError>([&] { quantile(x, half, 0, false, "cubic"); }, "[quantile] interpolation"));
  EXPECT_TRUE(throws<DTypeError>([&] { quantile(i64({1, 2}), half); }, "[quantile]"));
  EXPECT_TRUE(throws<DTypeError>([&] { quantile(x, half.to(kFloat32)); }, "[quantile] q"));
  EXPECT_TRUE(throws<ShapeError>([&] { quantile(x, f64({0.5, 0.5}, {1, 2})); }, "[quantile]"));
}

// ---- joining and splitting ------------------------------------------------------------------------

TEST_P(CompositeTest, AtleastAndStacks) {
  const Tensor s = scalar_tensor(7.0, TensorOptions(kFloat64, dev())), v = base({3}), m = base({2, 3});
  EXPECT_EQ(atleast_1d(s).sizes(), (Shape{1}));
  EXPECT_EQ(atleast_2d(s).sizes(), (Shape{1, 1}));
  EXPECT_EQ(atleast_3d(s).sizes(), (Shape{1, 1, 1}));
  EXPECT_EQ(atleast_2d(v).sizes(), (Shape{1, 3}));
  EXPECT_EQ(atleast_3d(v).sizes(), (Shape{1, 3, 1}));
  EXPECT_EQ(atleast_3d(m).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(atleast_1d(base({2, 3, 4})).sizes(), (Shape{2, 3, 4}));
  EXPECT_TRUE(atleast_3d(m).shares_storage(m));
  EXPECT_EQ(values(hstack({v, base({2})})), (V{0, 1, 2, 0, 1}));
  EXPECT_EQ(values(hstack({m, base({2, 1})})), (V{0, 1, 2, 0, 3, 4, 5, 1}));
  EXPECT_EQ(values(hstack({s, v})), (V{7, 0, 1, 2}));
  const Tensor vs = vstack({v, m});
  EXPECT_EQ(vs.sizes(), (Shape{3, 3}));
  EXPECT_EQ(values(vs), (V{0, 1, 2, 0, 1, 2, 3, 4, 5}));
  const Tensor ds = dstack({m, m * 10.0});
  EXPECT_EQ(ds.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(values(ds), (V{0, 0, 1, 10, 2, 20, 3, 30, 4, 40, 5, 50}));
  EXPECT_EQ(dstack({v, v}).sizes(), (Shape{1, 3, 2}));
  const Tensor cs = column_stack({v, m.t(), v.to(kInt64)});
  EXPECT_EQ(cs.sizes(), (Shape{3, 4}));
  EXPECT_EQ(cs.dtype(), kFloat64);
  EXPECT_EQ(values(cs), (V{0, 0, 3, 0, 1, 1, 4, 1, 2, 2, 5, 2}));
  EXPECT_TRUE(gradcheck(binary([](const Tensor& a, const Tensor& b) { return dstack({a, b}); }),
                        {leaf({2, 2}, dev(), 1), leaf({2, 2}, dev(), 2)}));
  EXPECT_TRUE(throws<ValueError>([&] { hstack({}); }, "[hstack]"));
}

TEST_P(CompositeTest, TensorSplitIntoSectionsAndAtIndices) {
  const Tensor x = base({7});
  const auto pieces = [](const TensorList& parts) {
    std::vector<V> out;
    for (const Tensor& p : parts) out.push_back(values(p));
    return out;
  };
  EXPECT_EQ(pieces(tensor_split(x, 3)), (std::vector<V>{{0, 1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(pieces(tensor_split(base({3}), 5)), (std::vector<V>{{0}, {1}, {2}, {}, {}}));
  EXPECT_EQ(pieces(tensor_split(x, Shape{2, -2})), (std::vector<V>{{0, 1}, {2, 3, 4}, {5, 6}}));
  EXPECT_EQ(pieces(tensor_split(x, Shape{10})), (std::vector<V>{{0, 1, 2, 3, 4, 5, 6}, {}}));
  EXPECT_EQ(pieces(tensor_split(x, Shape{})), (std::vector<V>{{0, 1, 2, 3, 4, 5, 6}}));
  // Each piece is x[indices[i - 1]:indices[i]] with Python's slice rules (numpy.array_split, PyTorch).
  EXPECT_EQ(pieces(tensor_split(x, Shape{3, 1})), (std::vector<V>{{0, 1, 2}, {}, {1, 2, 3, 4, 5, 6}}));
  const Tensor m = base({2, 6});
  const TensorList cols = tensor_split(m, 4, -1);
  ASSERT_EQ(cols.size(), 4u);
  EXPECT_EQ(cols[0].sizes(), (Shape{2, 2}));
  EXPECT_EQ(cols[3].sizes(), (Shape{2, 1}));
  EXPECT_EQ(values(cols[3]), (V{5, 11}));
  EXPECT_TRUE(cols[1].shares_storage(m));
  EXPECT_TRUE(throws<ShapeError>([&] { tensor_split(scalar_tensor(1.0, TensorOptions(kFloat64, dev())), 2); },
                                 "[tensor_split]"));
  EXPECT_TRUE(throws<ValueError>([&] { tensor_split(x, 0); }, "[tensor_split] sections must be positive"));
  EXPECT_TRUE(throws<IndexError>([&] { tensor_split(x, 2, 1); }, "[tensor_split]"));
}

TEST_P(CompositeTest, BlockDiagAndCartesianProd) {
  const Tensor eight = scalar_tensor(8.0, TensorOptions(kFloat64, dev()));
  const Tensor bd = block_diag({f64({1, 2, 3, 4}, {2, 2}), i64({5, 6, 7}), eight});
  EXPECT_EQ(bd.sizes(), (Shape{4, 6}));
  EXPECT_EQ(bd.dtype(), kFloat64);
  EXPECT_EQ(values(bd), (V{1, 2, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 5, 6, 7, 0, 0, 0, 0, 0, 0, 8}));
  EXPECT_EQ(block_diag({f64({}, {0, 2}), i64({1})}).sizes(), (Shape{1, 3}));
  EXPECT_EQ(block_diag({}).sizes(), (Shape{1, 0}));
  EXPECT_EQ(block_diag({i64({1})}).dtype(), kInt64);
  EXPECT_TRUE(gradcheck([](const TensorList& in) { return TensorList{block_diag({in[0], in[1], in[2]})}; },
                        {leaf({2, 2}, dev(), 1), leaf({3}, dev(), 2), leaf({1, 2}, dev(), 3)}));
  EXPECT_TRUE(throws<ShapeError>([&] { block_diag({base({1, 1, 1})}); }, "[block_diag]"));
  const Tensor cp = cartesian_prod({f64({1, 2}), i64({3, 4, 5})});
  EXPECT_EQ(cp.sizes(), (Shape{6, 2}));
  EXPECT_EQ(values(cp), (V{1, 3, 1, 4, 1, 5, 2, 3, 2, 4, 2, 5}));
  EXPECT_EQ(cartesian_prod({base({2}), base({2}), base({3})}).sizes(), (Shape{12, 3}));
  EXPECT_EQ(values(cartesian_prod({base({2}), base({2}), base({3})}).select(0, 11)), (V{1, 1, 2}));
  EXPECT_EQ(cartesian_prod({base({4})}).sizes(), (Shape{4}));
  EXPECT_TRUE(throws<ShapeError>([&] { cartesian_prod({base({2, 2})}); }, "[cartesian_prod]"));
}

// ---- matrices -------------------------------------------------------------------------------------

TEST_P(CompositeTest, DiagDiagEmbedTraceAndTriangleIndices) {
  const Tensor v = f64({1, 2, 3});
  EXPECT_EQ(values(diag(v)), (V{1, 0, 0, 0, 2, 0, 0, 0, 3}));
  EXPECT_EQ(values(diag(v, 1)), (V{0, 1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0}));
  const Tensor low = diag(v, -2);
  EXPECT_EQ(low.sizes(), (Shape{5, 5}));
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(values(low)[i * 5 + j], i - j == 2 ? j + 1.0 : 0.0) << i << "," << j;
  const Tensor m = base({3, 4});
  EXPECT_EQ(values(diag(m)), (V{0, 5, 10}));
  EXPECT_EQ(values(diag(m, 1)), (V{1, 6, 11}));
  EXPECT_EQ(values(diag(m, -1)), (V{4, 9}));
  EXPECT_EQ(diag(m, 5).sizes(), (Shape{0}));
  EXPECT_FALSE(diag(m).shares_storage(m));
  EXPECT_EQ(values(diag(f64({kInf, 1}))), (V{kInf, 0, 0, 1}));  // no inf * 0 off the diagonal
  // diag_embed of [2, 3] with every offset and dims pair against a loop.
  const Tensor x = base({2, 3});
  for (int64_t off : {0, 1, -2})
    for (auto [d1, d2] : {std::pair<int64_t, int64_t>{-2, -1}, {0, 2}, {2, 0}, {1, 0}}) {
      const Tensor out = diag_embed(x, off, d1, d2);
      const int64_t n = 3 + std::abs(off), a = (d1 + 3) % 3, b = (d2 + 3) % 3, batch = 3 - a - b;
      Shape expect_shape(3, n);
      expect_shape[static_cast<size_t>(batch)] = 2;
      ASSERT_EQ(out.sizes(), expect_shape) << off << " " << d1 << " " << d2;
      const V got = values(out);
      for (int64_t i = 0; i < numel(expect_shape); ++i) {
        const Shape& e = expect_shape;
        const int64_t idx[3] = {i / (e[1] * e[2]), i / e[2] % e[1], i % e[2]};
        const int64_t r = idx[a], c = idx[b], bb = idx[batch];
        const double want = c - r == off ? static_cast<double>(bb * 3 + (off >= 0 ? r : c)) : 0.0;
        EXPECT_EQ(got[static_cast<size_t>(i)], want) << off << " " << d1 << " " << d2 << " at " << i;
      }
    }
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return diag_embed(t, 1, 0, 2); }), {leaf({2, 3}, dev())}));
  EXPECT_TRUE(throws<ValueError>([&] { diag_embed(x, 0, 1, -2); }, "[diag_embed]"));
  EXPECT_TRUE(throws<ShapeError>([&] { diag(base({2, 2, 2})); }, "[diag]"));
  EXPECT_EQ(values(trace(m)), (V{15}));
  EXPECT_EQ(values(trace(m.t())), (V{15}));
  EXPECT_EQ(trace(m.to(kInt32)).dtype(), kInt64);
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return trace(t); }), {leaf({3, 2}, dev())}));
  EXPECT_TRUE(throws<ShapeError>([&] { trace(v); }, "[trace]"));
  using Triangle = std::tuple<int64_t, int64_t, int64_t>;  // rows, cols, offset
  for (auto [rows, cols, off] : {Triangle{4, 3, 0}, {3, 4, 1}, {3, 3, -1}, {2, 5, -3}, {0, 3, 0}}) {
    V li, lj, ui, uj;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        if (j - i <= off) li.push_back(i), lj.push_back(j);
        if (j - i >= off) ui.push_back(i), uj.push_back(j);
      }
    const Tensor l = tril_indices(rows, cols, off, TensorOptions(kInt64, dev()));
    const Tensor u = triu_indices(rows, cols, off, TensorOptions(kInt32, dev()));
    EXPECT_EQ(l.dtype(), kInt64);
    EXPECT_EQ(u.dtype(), kInt32);
    EXPECT_EQ(l.device(), dev());
    EXPECT_EQ(l.sizes(), (Shape{2, static_cast<int64_t>(li.size())}));
    li.insert(li.end(), lj.begin(), lj.end());
    ui.insert(ui.end(), uj.begin(), uj.end());
    EXPECT_EQ(values(l), li) << rows << "x" << cols << " offset " << off;
    EXPECT_EQ(values(u), ui) << rows << "x" << cols << " offset " << off;
  }
  EXPECT_EQ(tril_indices(3, 3).dtype(), kInt64);
  EXPECT_TRUE(throws<ValueError>([&] { tril_indices(-1, 3); }, "[tril_indices]"));
}

TEST_P(CompositeTest, KronAndTensordotAgainstLoops) {
  const V av{1, 2, 3, 4}, bv = irregular(6);
  const Tensor k = kron(f64(av, {2, 2}), f64(bv, {2, 3}));
  ASSERT_EQ(k.sizes(), (Shape{4, 6}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(values(k)[i * 6 + j], av[(i / 2) * 2 + j / 3] * bv[(i % 2) * 3 + j % 3]);
  EXPECT_EQ(values(kron(f64({1, 10}), f64({1, 2, 3, 4}, {2, 2}))), (V{1, 2, 10, 20, 3, 4, 30, 40}));
  EXPECT_EQ(kron(base({2, 1, 3}), base({2, 2})).sizes(), (Shape{2, 2, 6}));
  EXPECT_EQ(kron(i64({1, 2}), f64({1}).to(kFloat32)).dtype(), kFloat32);
  EXPECT_TRUE(gradcheck(binary([](const Tensor& a, const Tensor& b) { return kron(a, b); }),
                        {leaf({2, 2}, dev(), 1), leaf({3}, dev(), 2)}));
  // [2, 3, 4] . [3, 4, 5] over the last two dims of a.
  const V x = irregular(24), y = irregular(60, 1.0);
  const Tensor a = f64(x, {2, 3, 4}), b = f64(y, {3, 4, 5});
  V expected(10, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < 5; ++l)
      for (int j = 0; j < 3; ++j)
        for (int kk = 0; kk < 4; ++kk) expected[i * 5 + l] += x[i * 12 + j * 4 + kk] * y[j * 20 + kk * 5 + l];
  EXPECT_TRUE(all_close(tensordot(a, b), f64(expected, {2, 5})));
  EXPECT_TRUE(all_close(tensordot(a, b, {-2, 2}, {0, 1}), f64(expected, {2, 5})));
  // Pairs in another order: a's dims (2, 0) with c's dims (0, 1) of c [4, 2].
  const V z = irregular(8, 2.0);
  V e2(3, 0.0);
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 2; ++i)
      for (int kk = 0; kk < 4; ++kk) e2[j] += x[i * 12 + j * 4 + kk] * z[kk * 2 + i];
  EXPECT_TRUE(all_close(tensordot(a, f64(z, {4, 2}), {2, 0}, {0, 1}), f64(e2)));
  EXPECT_EQ(values(tensordot(f64({1, 2}), f64({3, 4, 5}), 0)), (V{3, 4, 5, 6, 8, 10}));
  EXPECT_TRUE(gradcheck(binary([](const Tensor& p, const Tensor& q) { return tensordot(p, q, {1}, {0}); }),
                        {leaf({2, 3}, dev(), 1), leaf({3, 2, 2}, dev(), 2)}));
  EXPECT_TRUE(throws<ShapeError>([&] { tensordot(a, b, {0}, {0}); }, "[tensordot] contracted dims differ"));
  EXPECT_TRUE(throws<ValueError>([&] { tensordot(a, b, {0, 1}, {0}); }, "[tensordot]"));
  EXPECT_TRUE(throws<ValueError>([&] { tensordot(a, b, 4); }, "[tensordot]"));
  EXPECT_TRUE(throws<ValueError>([&] { tensordot(a, b, {1, 1}, {0, 0}); }, "[tensordot] a dim is contracted twice"));
}

TEST_P(CompositeTest, CrossCdistRot90) {
  EXPECT_EQ(values(cross(f64({1, 0, 0}), f64({0, 1, 0}))), (V{0, 0, 1}));
  const V av = irregular(6), bv = irregular(3, 1.0);
  const auto cross3 = [](const double* p, const double* q) {
    return V{p[1] * q[2] - p[2] * q[1], p[2] * q[0] - p[0] * q[2], p[0] * q[1] - p[1] * q[0]};
  };
  V expected;
  for (int r = 0; r < 2; ++r)
    for (double e : cross3(&av[r * 3], bv.data())) expected.push_back(e);
  EXPECT_TRUE(all_close(cross(f64(av, {2, 3}), f64(bv)), f64(expected, {2, 3})));  // broadcast, dim -1
  // Without dim: the first dim of size 3 (dim 0 of [3, 2]).
  EXPECT_TRUE(all_close(cross(f64(av, {2, 3}).t(), f64(bv, {3, 1})), f64(expected, {2, 3}).t()));
  EXPECT_TRUE(all_close(cross(f64(av, {2, 3}), f64(bv), -1), f64(expected, {2, 3})));
  EXPECT_TRUE(gradcheck(binary([](const Tensor& a, const Tensor& b) { return cross(a, b, 1); }),
                        {leaf({2, 3}, dev(), 1), leaf({2, 3}, dev(), 2)}));
  EXPECT_TRUE(throws<ShapeError>([&] { cross(base({2, 4}), base({2, 4})); }, "[cross] needs a dim of size 3"));
  EXPECT_TRUE(throws<ShapeError>([&] { cross(base({3, 2}), base({3, 2}), 1); }, "[cross]"));
  // cdist against loops for several p, batched too.
  const V xv = quarters(12, 1), yv = quarters(16, 2);
  for (double p : {1.0, 2.0, 3.0, kInf, 0.0}) {
    V e;
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) {
          double acc = 0;
          for (int mm = 0; mm < 2; ++mm) {
            const double d = std::fabs(xv[b * 6 + i * 2 + mm] - yv[b * 8 + j * 2 + mm]);
            acc = p == kInf ? std::max(acc, d) : p == 0 ? acc + (d != 0) : acc + std::pow(d, p);
          }
          e.push_back(p == kInf || p == 0 ? acc : std::pow(acc, 1 / p));
        }
    EXPECT_TRUE(all_close(cdist(f64(xv, {2, 3, 2}), f64(yv, {2, 4, 2}), p), f64(e, {2, 3, 4}))) << p;
    EXPECT_TRUE(all_close(cdist(f64(xv, {2, 3, 2}).select(0, 1), f64(yv, {2, 4, 2}).select(0, 1), p),
                          f64(V(e.begin() + 12, e.end()), {3, 4}))) << p;
  }
  for (double p : {1.0, 2.0, 3.0})
    EXPECT_TRUE(gradcheck(binary([p](const Tensor& a, const Tensor& b) { return cdist(a, b, p); }),
                          {leaf({3, 2}, dev(), 1), leaf({2, 2}, dev(), 2)})) << p;
  EXPECT_TRUE(throws<ShapeError>([&] { cdist(base({3, 2}), base({3, 3})); }, "[cdist]"));
  EXPECT_TRUE(throws<ValueError>([&] { cdist(base({3, 2}), base({3, 2}), -1); }, "[cdist] p must be non-negative"));
  // rot90 of [[0, 1, 2], [3, 4, 5]].
  const Tensor m = base({2, 3});
  EXPECT_EQ(values(rot90(m)), (V{2, 5, 1, 4, 0, 3}));
  EXPECT_EQ(rot90(m).sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(rot90(m, 2)), (V{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(values(rot90(m, 3)), (V{3, 0, 4, 1, 5, 2}));
  EXPECT_EQ(values(rot90(m, -1)), values(rot90(m, 3)));
  EXPECT_EQ(values(rot90(m, 1, {1, 0})), values(rot90(m, 3)));
  EXPECT_EQ(values(rot90(m, 4)), values(m));
  EXPECT_FALSE(rot90(m, 4).shares_storage(m));
  EXPECT_EQ(values(rot90(base({2, 2, 3}), 1, {-2, -1})), (V{2, 5, 1, 4, 0, 3, 8, 11, 7, 10, 6, 9}));
  EXPECT_TRUE(gradcheck(unary([](const Tensor& t) { return rot90(t, 1, {0, 2}); }), {leaf({2, 2, 3}, dev())}));
  EXPECT_TRUE(throws<ValueError>([&] { rot90(m, 1, {0}); }, "[rot90] expects 2 dims"));
  EXPECT_TRUE(throws<ValueError>([&] { rot90(m, 1, {1, -1}); }, "[rot90]"));
  EXPECT_TRUE(throws<ShapeError>([&] { rot90(base({3})); }, "[rot90]"));
}

}  // namespace
}  // namespace rtx::testing
