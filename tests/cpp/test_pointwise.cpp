// Tests of the pointwise family: every op of rtx/pointwise.def (swept from the table itself) against
// float64 references over dtypes, broadcasting, strided layouts, 0-d and empty tensors, scalar operands
// and in-place variants; integer and NaN edge cases; the ops with parameters and the gradient kernels
// (swept from the table too); first and second order gradients of every differentiable op.
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

// ---- reading tensors and naive references --------------------------------------------------------

template <typename T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

template <typename T>
std::vector<double> read_as(const Tensor& t) {
  const T* base = static_cast<const T*>(t.data_ptr());
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t off = 0, rem = i;
    for (int64_t d = t.dim() - 1; d >= 0; --d) {
      off += (rem % t.size(d)) * t.stride(d);
      rem /= t.size(d);
    }
    out[static_cast<size_t>(i)] = to_double(base[off]);
  }
  return out;
}

// Values of t in row-major order, read through its own strides (not through the library's copies).
std::vector<double> read(const Tensor& any) {
  const Tensor t = any.is_cpu() ? any : any.cpu();
  switch (t.dtype()) {
    case kBool: return read_as<bool>(t);
    case kUInt8: return read_as<uint8_t>(t);
    case kInt8: return read_as<int8_t>(t);
    case kInt16: return read_as<int16_t>(t);
    case kInt32: return read_as<int32_t>(t);
    case kInt64: return read_as<int64_t>(t);
    case kFloat16: return read_as<Half>(t);
    case kBFloat16: return read_as<BFloat16>(t);
    case kFloat32: return read_as<float>(t);
    case kFloat64: return read_as<double>(t);
  }
  return {};
}

// v converted like a write into a tensor of dtype t (integers wrap, bool is "nonzero").
double cast_ref(double v, DType t) {
  switch (t) {
    case kBool: return v != 0 ? 1 : 0;
    case kUInt8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case kInt8: return static_cast<int8_t>(static_cast<int64_t>(v));
    case kInt32: return static_cast<int32_t>(static_cast<int64_t>(v));
    case kInt64: return static_cast<double>(static_cast<int64_t>(v));
    default: return v;
  }
}

// out has dtype and shape and holds expected (integer and bool dtypes exactly, floats within tolerance).
::testing::AssertionResult matches(const Tensor& out, DType dtype, const Shape& shape, const std::vector<double>& expected,
                                   double rtol = -1, double atol = -1) {
  if (out.dtype() != dtype) return ::testing::AssertionFailure() << "dtype " << out.dtype() << " != expected " << dtype;
  if (out.sizes() != shape)
    return ::testing::AssertionFailure() << "shape " << ::testing::PrintToString(out.sizes()) << " != expected "
                                         << ::testing::PrintToString(shape);
  if (rtol < 0) rtol = default_rtol(dtype);
  if (atol < 0) atol = default_atol(dtype);
  const std::vector<double> got = read(out);
  if (got.size() != expected.size()) return ::testing::AssertionFailure() << "element count differs";
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = cast_ref(expected[i], dtype), a = got[i];
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::isinf(e) && a == e) continue;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e)))
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " != expected " << e;
  }
  return ::testing::AssertionSuccess();
}

Shape broadcast_ref(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i + a.size() < n ? 1 : a[i + a.size() - n];
    const int64_t db = i + b.size() < n ? 1 : b[i + b.size() - n];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Row-major index into a tensor of shape `in` that broadcasting maps element i of shape `out` to.
int64_t broadcast_source(int64_t i, const Shape& out, const Shape& in) {
  int64_t src = 0, mul = 1, rem = i;
  const int64_t lead = static_cast<int64_t>(out.size() - in.size());
  for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
    const int64_t k = rem % out[d];
    rem /= out[d];
    const int64_t di = d - lead;
    if (di < 0) continue;
    if (in[di] != 1) src += k * mul;
    mul *= in[di];
  }
  return src;
}

template <typename F>
std::vector<double> map1(const Tensor& x, F f) {
  std::vector<double> out;
  for (double v : read(x)) out.push_back(static_cast<double>(f(v)));
  return out;
}

template <typename F>
std::vector<double> map2(const Tensor& a, const Tensor& b, F f) {
  const Shape s = broadcast_ref(a.sizes(), b.sizes());
  const auto va = read(a), vb = read(b);
  std::vector<double> out;
  for (int64_t i = 0; i < numel(s); ++i)
    out.push_back(static_cast<double>(f(va[broadcast_source(i, s, a.sizes())], vb[broadcast_source(i, s, b.sizes())])));
  return out;
}

// Deterministic values in [lo, hi] (integers when integral), independent of the library's RNG.
std::vector<double> sample(int64_t n, double lo, double hi, uint64_t seed, bool integral = false) {
  std::vector<double> v;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * 0x1.0p-53;
    v.push_back(integral ? std::floor(lo + u * (hi - lo + 1)) : lo + u * (hi - lo));
  }
  return v;
}

// Input ranges: the ops' domains (and, for integers, values that keep results in range).
enum class Domain { Any, Positive, NonZero, Exponent, Unit, AboveOne };

std::vector<double> domain_values(int64_t n, Domain d, DType t, uint64_t seed) {
  const bool integral = !is_floating(t);
  const bool unsigned_t = t == kUInt8 || t == kBool;
  std::vector<double> v;
  switch (d) {
    case Domain::Any: v = integral ? sample(n, unsigned_t ? 0 : -5, 5, seed, true) : sample(n, -3, 3, seed); break;
    case Domain::Positive: v = integral ? sample(n, 1, 6, seed, true) : sample(n, 0.2, 3, seed); break;
    case Domain::NonZero:
      v = integral ? sample(n, 1, 4, seed, true) : sample(n, 0.5, 3, seed);
      if (!unsigned_t)
        for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
      break;
    case Domain::Exponent: v = integral ? sample(n, 0, 3, seed, true) : sample(n, -2, 2, seed); break;
    case Domain::Unit: v = integral ? sample(n, unsigned_t ? 0 : -1, 1, seed, true) : sample(n, -0.9, 0.9, seed); break;
    case Domain::AboveOne: v = integral ? sample(n, 2, 5, seed, true) : sample(n, 1.2, 3, seed); break;
  }
  if (t == kBool)
    for (auto& x : v) x = x > 2 ? 1 : 0;
  return v;
}

// ---- the table: one entry per op of rtx/pointwise.def, with its reference ---------------------------

enum class Rule { FLOAT, NUMERIC, ARITH, TRUEDIV };

namespace ref {
double round_half_even(double x) {
  const double f = std::floor(x), d = x - f;
  if (d != 0.5) return d < 0.5 ? f : f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double neg(double x) { return -x; }
double abs(double x) { return std::fabs(x); }
double sign(double x) { return std::isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0; }
double floor(double x) { return std::floor(x); }
double ceil(double x) { return std::ceil(x); }
double round(double x) { return round_half_even(x); }
double trunc(double x) { return std::trunc(x); }
double square(double x) { return x * x; }
double relu(double x) { return std::isnan(x) ? x : x > 0 ? x : 0; }
double exp(double x) { return std::exp(x); }
double log(double x) { return std::log(x); }
double log1p(double x) { return std::log1p(x); }
double expm1(double x) { return std::expm1(x); }
double sqrt(double x) { return std::sqrt(x); }
double rsqrt(double x) { return 1 / std::sqrt(x); }
double reciprocal(double x) { return 1 / x; }
double sin(double x) { return std::sin(x); }
double cos(double x) { return std::cos(x); }
double sigmoid(double x) { return sigmoid_ref(x); }
double tanh(double x) { return std::tanh(x); }
double silu(double x) { return x * sigmoid_ref(x); }
double erf(double x) { return std::erf(x); }
double erfc(double x) { return std::erfc(x); }
double tan(double x) { return std::tan(x); }
double asin(double x) { return std::asin(x); }
double acos(double x) { return std::acos(x); }
double atan(double x) { return std::atan(x); }
double sinh(double x) { return std::sinh(x); }
double cosh(double x) { return std::cosh(x); }
double asinh(double x) { return std::asinh(x); }
double acosh(double x) { return std::acosh(x); }
double atanh(double x) { return std::atanh(x); }
double log2(double x) { return std::log2(x); }
double log10(double x) { return std::log10(x); }
double exp2(double x) { return std::exp2(x); }

double add(double a, double b) { return a + b; }
double sub(double a, double b) { return a - b; }
double mul(double a, double b) { return a * b; }
double div(double a, double b) { return a / b; }
double pow(double a, double b) { return std::pow(a, b); }
double maximum(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : a > b ? a : b; }
double minimum(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : a < b ? a : b; }
double fmod(double a, double b) { return std::fmod(a, b); }
double remainder(double a, double b) { return a - std::floor(a / b) * b; }
double floor_divide(double a, double b) { return std::floor(a / b); }
double atan2(double a, double b) { return std::atan2(a, b); }
double hypot(double a, double b) { return std::hypot(a, b); }
double logaddexp(double a, double b) { return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b))); }

bool eq(double a, double b) { return a == b; }
bool ne(double a, double b) { return a != b; }
bool lt(double a, double b) { return a < b; }
bool le(double a, double b) { return a <= b; }
bool gt(double a, double b) { return a > b; }
bool ge(double a, double b) { return a >= b; }
bool logical_and(bool a, bool b) { return a && b; }
bool logical_or(bool a, bool b) { return a || b; }
bool logical_xor(bool a, bool b) { return a != b; }
bool logical_not(double x) { return x == 0; }
bool isnan(double x) { return std::isnan(x); }
bool isinf(double x) { return std::isinf(x); }
bool isfinite(double x) { return std::isfinite(x); }
}  // namespace ref

Domain unary_domain(const std::string& name) {
  if (name == "log" || name == "sqrt" || name == "rsqrt" || name == "log1p" || name == "log2" || name == "log10")
    return Domain::Positive;
  if (name == "reciprocal") return Domain::NonZero;
  // tan stays away from its poles; the inverse functions in their domains.
  if (name == "asin" || name == "acos" || name == "atanh" || name == "tan") return Domain::Unit;
  if (name == "acosh") return Domain::AboveOne;
  return Domain::Any;
}

struct UnaryOp {
  std::string name;
  Tensor (*fn)(const Tensor&);
  Tensor& (*fn_)(Tensor&);
  Rule rule;
  double (*ref)(double);
  bool zero_grad;  // gradient zero wherever it exists
};

struct BinaryOp {
  std::string name;
  Tensor (*tt)(const Tensor&, const Tensor&);
  Tensor (*ts)(const Tensor&, const Scalar&);
  Tensor (*st)(const Scalar&, const Tensor&);
  Tensor& (*tt_)(Tensor&, const Tensor&);
  Tensor& (*ts_)(Tensor&, const Scalar&);
  Rule rule;
  double (*ref)(double, double);
};

struct CompareOp {
  std::string name;
  Tensor (*tt)(const Tensor&, const Tensor&);
  Tensor (*ts)(const Tensor&, const Scalar&);
  bool (*ref)(double, double);
};

struct LogicalOp {
  std::string name;
  Tensor (*tt)(const Tensor&, const Tensor&);
  bool (*ref)(bool, bool);
};

struct PredicateOp {
  std::string name;
  Tensor (*fn)(const Tensor&);
  bool (*ref)(double);
};

using T1 = Tensor (*)(const Tensor&);
using T1_ = Tensor& (*)(Tensor&);
using TT = Tensor (*)(const Tensor&, const Tensor&);
using TS = Tensor (*)(const Tensor&, const Scalar&);
using ST = Tensor (*)(const Scalar&, const Tensor&);
using TT_ = Tensor& (*)(Tensor&, const Tensor&);
using TS_ = Tensor& (*)(Tensor&, const Scalar&);

const std::vector<UnaryOp> kUnary = {
#define RTX_UNARY(name, F, rule, save, grad) \
  {#name, static_cast<T1>(&rtx::name), static_cast<T1_>(&rtx::name##_), Rule::rule, &ref::name, std::string(#grad) == "ZERO"},
#include "rtx/pointwise.def"
};
const std::vector<BinaryOp> kBinary = {
#define RTX_BINARY(name, F, rule, save, ga, gb)                                                                  \
  {#name,          static_cast<TT>(&rtx::name),   static_cast<TS>(&rtx::name), static_cast<ST>(&rtx::name), \
   static_cast<TT_>(&rtx::name##_), static_cast<TS_>(&rtx::name##_), Rule::rule, &ref::name},
#include "rtx/pointwise.def"
};
const std::vector<CompareOp> kCompare = {
#define RTX_COMPARE(name, F) {#name, static_cast<TT>(&rtx::name), static_cast<TS>(&rtx::name), &ref::name},
#include "rtx/pointwise.def"
};
const std::vector<LogicalOp> kLogical = {
#define RTX_LOGICAL(name, F) {#name, static_cast<TT>(&rtx::name), &ref::name},
#include "rtx/pointwise.def"
};
const std::vector<PredicateOp> kPredicate = {
#define RTX_PREDICATE(name, F) {#name, static_cast<T1>(&rtx::name), &ref::name},
#include "rtx/pointwise.def"
};

Domain binary_domain_b(const std::string& name) {
  if (name == "div" || name == "fmod" || name == "remainder" || name == "floor_divide") return Domain::NonZero;
  if (name == "pow") return Domain::Exponent;
  return Domain::Any;
}
Domain binary_domain_a(const std::string& name) { return name == "pow" ? Domain::Positive : Domain::Any; }

const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kIntTypes = {kUInt8, kInt8, kInt16, kInt32, kInt64};

// The dtype an op of `rule` gives for operands of (promoted) dtype t.
DType result_dtype(Rule rule, DType t) {
  if ((rule == Rule::FLOAT || rule == Rule::TRUEDIV) && !is_floating(t)) return kFloat32;
  return t;
}

// ---- layouts ------------------------------------------------------------------------------------

class PointwiseTest : public DeviceTest {
 protected:
  // A tensor of shape with values from domain d.
  Tensor input(const Shape& shape, DType t, Domain d, uint64_t seed) const {
    return make(domain_values(numel(shape), d, t, seed), shape, dev(), t);
  }
  // Same logical shape [4, 5] in several layouts: contiguous, transposed, sliced with step 2, expanded.
  std::vector<std::pair<std::string, Tensor>> layouts(DType t, Domain d, uint64_t seed) const {
    return {{"contiguous", input({4, 5}, t, d, seed)},
            {"transposed", input({5, 4}, t, d, seed + 1).t()},
            {"step2", input({4, 10}, t, d, seed + 2).slice(1, 0, std::nullopt, 2)},
            {"expanded", input({1, 5}, t, d, seed + 3).expand({4, 5})},
            {"permuted3d", input({5, 2, 2}, t, d, seed + 4).permute({1, 2, 0}).reshape({4, 5})}};
  }
  // Pairs of operands: same layout, broadcasting, mixed strided layouts, 0-d and empty ones.
  std::vector<std::tuple<std::string, Tensor, Tensor>> pairs(DType t, Domain da, Domain db, uint64_t seed) const {
    std::vector<std::tuple<std::string, Tensor, Tensor>> out;
    const auto la = layouts(t, da, seed), lb = layouts(t, db, seed + 100);
    for (size_t i = 0; i < la.size(); ++i) out.emplace_back(la[i].first, la[i].second, lb[(i + 1) % lb.size()].second);
    out.emplace_back("broadcast [3,1,4] [2,1]", input({3, 1, 4}, t, da, seed + 5), input({2, 1}, t, db, seed + 6));
    out.emplace_back("broadcast [2,1] [3,1,4]", input({2, 1}, t, da, seed + 7), input({3, 1, 4}, t, db, seed + 8));
    out.emplace_back("0-d 0-d", input({}, t, da, seed + 9), input({}, t, db, seed + 10));
    out.emplace_back("0-d [3]", input({}, t, da, seed + 11), input({3}, t, db, seed + 12));
    out.emplace_back("empty [0,3] [3]", input({0, 3}, t, da, seed + 13), input({3}, t, db, seed + 14));
    return out;
  }
  std::vector<std::pair<std::string, Tensor>> unary_inputs(DType t, Domain d, uint64_t seed) const {
    auto out = layouts(t, d, seed);
    out.emplace_back("0-d", input({}, t, d, seed + 20));
    out.emplace_back("empty", input({0, 3}, t, d, seed + 21));
    return out;
  }
};
INSTANTIATE_DEVICE_TESTS(PointwiseTest);

// ---- the sweep ----------------------------------------------------------------------------------

TEST_P(PointwiseTest, UnaryForwardAllDTypesAndLayouts) {
  for (const auto& op : kUnary) {
    std::vector<DType> types = kFloatTypes;
    types.insert(types.end(), kIntTypes.begin(), kIntTypes.end());
    for (DType t : types) {
      const Domain d = unary_domain(op.name);
      for (const auto& [layout, x] : unary_inputs(t, d, 7)) {
        const Tensor y = op.fn(x);
        EXPECT_TRUE(matches(y, result_dtype(op.rule, t), x.sizes(), map1(x, op.ref)))
            << op.name << " " << t << " " << layout;
        EXPECT_TRUE(y.is_contiguous()) << op.name;
      }
    }
  }
}

TEST_P(PointwiseTest, UnaryBoolInputs) {
  const Tensor b = make({1, 0, 1}, {3}, dev(), kBool);
  for (const auto& op : kUnary) {
    if (op.rule == Rule::NUMERIC) {
      EXPECT_TRUE(throws<DTypeError>([&] { op.fn(b); }, "[" + op.name + "]")) << op.name;
    } else {
      EXPECT_TRUE(matches(op.fn(b), kFloat32, {3}, {op.ref(1), op.ref(0), op.ref(1)})) << op.name;
    }
  }
}

TEST_P(PointwiseTest, BinaryForwardAllDTypesAndLayouts) {
  for (const auto& op : kBinary) {
    std::vector<DType> types = kFloatTypes;
    types.insert(types.end(), kIntTypes.begin(), kIntTypes.end());
    for (DType t : types) {
      for (const auto& [layout, a, b] : pairs(t, binary_domain_a(op.name), binary_domain_b(op.name), 3)) {
        const Tensor y = op.tt(a, b);
        EXPECT_TRUE(matches(y, result_dtype(op.rule, t), broadcast_ref(a.sizes(), b.sizes()), map2(a, b, op.ref)))
            << op.name << " " << t << " " << layout;
      }
    }
  }
}

TEST_P(PointwiseTest, BinaryBoolOperands) {
  const Tensor b = make({1, 0, 1}, {3}, dev(), kBool);
  for (const auto& op : kBinary) {
    if (op.rule == Rule::ARITH) {
      EXPECT_TRUE(throws<DTypeError>([&] { op.tt(b, b); }, "bool")) << op.name;
    } else {
      EXPECT_TRUE(matches(op.tt(b, make({1, 1, 2}, {3}, dev(), kBool)), kFloat32, {3}, map2(b, make({1, 1, 1}, {3}), op.ref)))
          << op.name;
    }
  }
}

TEST_P(PointwiseTest, BinaryMixedDTypesPromote) {
  struct Case {
    DType a, b, out;
  };
  const std::vector<Case> cases = {{kInt32, kFloat32, kFloat32}, {kFloat16, kFloat32, kFloat32},
                                   {kFloat16, kBFloat16, kFloat32}, {kUInt8, kInt8, kInt16},
                                   {kInt64, kFloat16, kFloat16},  {kBool, kInt32, kInt32},
                                   {kFloat32, kFloat64, kFloat64}, {kInt8, kInt64, kInt64},
                                   {kInt16, kInt8, kInt16},       {kUInt8, kInt16, kInt16}};
  for (const auto& c : cases) {
    const Tensor a = make({1, 2, 3}, {3}, dev(), c.a), b = make({1, 1, 2}, {3}, dev(), c.b);
    EXPECT_TRUE(matches(add(a, b), c.out, {3}, map2(a, b, ref::add))) << c.a << " + " << c.b;
    EXPECT_TRUE(matches(div(a, b), is_floating(c.out) ? c.out : kFloat32, {3}, map2(a, b, ref::div))) << c.a << " / " << c.b;
    EXPECT_TRUE(matches(lt(b, a), kBool, {3}, map2(b, a, ref::lt))) << c.a << " < " << c.b;
  }
  // A 0-d tensor does not upcast a dimensioned one of its category, but does across categories.
  const Tensor h = make({1, 2}, {2}, dev(), kFloat16);
  EXPECT_EQ(add(h, make({1}, {}, dev(), kFloat64)).dtype(), kFloat16);
  EXPECT_EQ(add(make({1, 2}, {2}, dev(), kInt32), make({0.5}, {}, dev(), kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(add(make({1}, {}, dev(), kInt32), make({0.5}, {}, dev(), kFloat16)).dtype(), kFloat16);
}

// add, sub and mul read a bfloat16 or float16 operand beside a float32 one as it is: the same bits as
// casting it to float32 first, in every layout and in both orders, and the 16-bit operand's gradient
// comes back in its own dtype, as through the cast.
TEST_P(PointwiseTest, MixedFloatOperandsEqualCastingFirst) {
  using BinaryOp = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<std::string, BinaryOp>> ops = {{"add", add}, {"sub", sub}, {"mul", mul}};
  const auto wide = pairs(kFloat32, Domain::Any, Domain::Any, 7);
  for (DType low : {kBFloat16, kFloat16}) {
    const auto narrow = pairs(low, Domain::Any, Domain::Any, 300);
    for (size_t i = 0; i < wide.size(); ++i) {
      for (bool low_first : {false, true}) {
        const Tensor f = std::get<1>(wide[i]), h = low_first ? std::get<1>(narrow[i]) : std::get<2>(narrow[i]);
        const Tensor& a = low_first ? h : f;
        const Tensor& b = low_first ? f : h;
        if (f.dim() == 0 && h.dim() > 0) continue;  // a 0-d float32 leaves the result 16-bit (tested below)
        for (const auto& [name, op] : ops) {
          const std::string what = name + " " + std::get<0>(wide[i]) + (low_first ? " low first " : " ") +
                                   std::string(dtype_name(low));
          const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32);
          const Tensor got = op(a, b), want = op(a32, b32);
          EXPECT_EQ(got.dtype(), kFloat32) << what;
          EXPECT_TRUE(same_bytes(got, want)) << what;
          if (got.numel() == 0) continue;
          Tensor ga = a.detach().requires_grad_(), gb = b.detach().requires_grad_();
          Tensor ca = a.detach().requires_grad_(), cb = b.detach().requires_grad_();
          const Tensor weights = input(got.sizes(), kFloat32, Domain::Any, 11);
          (op(ga, gb) * weights).sum().backward();
          (op(ca.to(kFloat32), cb.to(kFloat32)) * weights).sum().backward();
          EXPECT_EQ(ga.grad().dtype(), a.dtype()) << what;
          EXPECT_EQ(gb.grad().dtype(), b.dtype()) << what;
          EXPECT_TRUE(same_bytes(ga.grad(), ca.grad())) << what;
          EXPECT_TRUE(same_bytes(gb.grad(), cb.grad())) << what;
        }
      }
    }
  }
  // A 0-d float32 number from the CPU beside a 16-bit tensor: its category does not upcast (bf16 result).
  const Tensor h = make({1, 2, 3}, {3}, dev(), kBFloat16);
  EXPECT_EQ(add(h, make({0.5}, {}, Device(kCPU), kFloat32)).dtype(), kBFloat16);
  // A 0-d 16-bit number from the CPU beside a float32 tensor is read as it is.
  const Tensor x = make({1, 2, 3}, {3}, dev(), kFloat32), q = make({0.1}, {}, Device(kCPU), kBFloat16);
  EXPECT_TRUE(same_bytes(mul(x, q), mul(x, q.to(kFloat32))));
  if (!dev().is_cuda()) return;
  // No float32 copy of the 16-bit operand: the result is the only allocation.
  const Tensor big = make(std::vector<double>(4096, 0.25), {4096}, dev(), kBFloat16), wide32 = big.to(kFloat32);
  const uint64_t before = cuda::memory_stats().num_allocs;
  const Tensor sum = wide32 + big;
  EXPECT_EQ(cuda::memory_stats().num_allocs - before, 1u);
}

TEST_P(PointwiseTest, CompareAllDTypesAndLayouts) {
  std::vector<DType> types = kFloatTypes;
  types.insert(types.end(), kIntTypes.begin(), kIntTypes.end());
  types.push_back(kBool);
  for (const auto& op : kCompare) {
    for (DType t : types) {
      // Few distinct values so that ties occur.
      for (const auto& [layout, a, b] : pairs(t, Domain::Positive, Domain::Positive, 11)) {
        const Tensor ar = is_floating(t) ? a.round() : a, br = is_floating(t) ? b.round() : b;
        EXPECT_TRUE(matches(op.tt(ar, br), kBool, broadcast_ref(a.sizes(), b.sizes()), map2(ar, br, op.ref)))
            << op.name << " " << t << " " << layout;
      }
    }
    // NaN compares unequal to everything.
    const Tensor n = make({NAN, 1}, {2}, dev(), kFloat32);
    EXPECT_TRUE(matches(op.tt(n, n), kBool, {2}, map2(n, n, op.ref))) << op.name;
  }
}

TEST_P(PointwiseTest, CompareWithScalarPromotes) {
  const Tensor i = make({1, 2, 3}, {3}, dev(), kInt32);
  // 2.5 must not be truncated to the tensor's integer type.
  EXPECT_TRUE(matches(lt(i, 2.5), kBool, {3}, {1, 1, 0}));
  EXPECT_TRUE(matches(ge(i, 2.5), kBool, {3}, {0, 0, 1}));
  EXPECT_TRUE(matches(eq(i, 2.5), kBool, {3}, {0, 0, 0}));
  EXPECT_TRUE(matches(ne(i, 2), kBool, {3}, {1, 0, 1}));
  const Tensor h = make({0.5, 1.5}, {2}, dev(), kFloat16);
  EXPECT_TRUE(matches(gt(h, 1), kBool, {2}, {0, 1}));
  EXPECT_TRUE(matches(le(h, 0.5), kBool, {2}, {1, 0}));
  // Operators with the scalar on either side.
  EXPECT_TRUE(matches(2 < i, kBool, {3}, {0, 0, 1}));
  EXPECT_TRUE(matches(2 >= i, kBool, {3}, {1, 1, 0}));
  EXPECT_TRUE(matches(2 == i, kBool, {3}, {0, 1, 0}));
  EXPECT_TRUE(matches(i != 3, kBool, {3}, {1, 1, 0}));
  EXPECT_TRUE(matches(2.5 > i, kBool, {3}, {1, 1, 0}));
  EXPECT_TRUE(matches(1 <= i, kBool, {3}, {1, 1, 1}));
}

TEST_P(PointwiseTest, LogicalAndPredicates) {
  for (DType t : {kFloat32, kFloat16, kInt32, kUInt8, kBool, kFloat64}) {
    const std::vector<double> va = is_floating(t) ? std::vector<double>{0, 1.5, -2, 0, NAN, 3}
                                                  : std::vector<double>{0, 1, 2, 0, 1, 0};
    const Tensor a = make(va, {2, 3}, dev(), t);
    const Tensor b = make({1, 0, 1}, {3}, dev(), t);
    for (const auto& op : kLogical) {
      const auto f = [&](double x, double y) { return op.ref(x != 0, y != 0); };
      EXPECT_TRUE(matches(op.tt(a, b), kBool, {2, 3}, map2(a, b, f))) << op.name << " " << t;
      EXPECT_TRUE(matches(op.tt(a.t(), make({1, 0}, {2}, dev(), kBool)), kBool, {3, 2},
                          map2(a.t(), make({1, 0}, {2}), f)))
          << op.name << " " << t;
    }
    for (const auto& op : kPredicate) {
      EXPECT_TRUE(matches(op.fn(a), kBool, {2, 3}, map1(a, op.ref))) << op.name << " " << t;
      EXPECT_TRUE(matches(op.fn(a.t()), kBool, {3, 2}, map1(a.t(), op.ref))) << op.name << " " << t;
      EXPECT_TRUE(matches(op.fn(make({}, {0}, dev(), t)), kBool, {0}, {})) << op.name;
    }
  }
  const Tensor s = make({INFINITY, -INFINITY, NAN, 0, -1e300, 65504}, {6}, dev(), kFloat64);
  for (DType t : kFloatTypes) {
    const Tensor x = s.to(t);
    for (const auto& op : kPredicate) EXPECT_TRUE(matches(op.fn(x), kBool, {6}, map1(x, op.ref))) << op.name << " " << t;
  }
}

TEST_P(PointwiseTest, LargeTensorsUseParallelPaths) {
  // Above the grain size, contiguous and strided.
  const Tensor a = input({300, 250}, kFloat32, Domain::Any, 1), b = input({250, 300}, kFloat32, Domain::Any, 2);
  EXPECT_TRUE(matches(add(a, b.t()), kFloat32, {300, 250}, map2(a, b.t(), ref::add)));
  EXPECT_TRUE(matches(mul(a, a), kFloat32, {300, 250}, map2(a, a, ref::mul)));
  EXPECT_TRUE(matches(exp(b.t()), kFloat32, {300, 250}, map1(b.t(), ref::exp)));
  EXPECT_TRUE(matches(sin(a.slice(0, 0, std::nullopt, 2)), kFloat32, {150, 250}, map1(a.slice(0, 0, std::nullopt, 2), ref::sin)));
  const Tensor h = input({300, 250}, kFloat16, Domain::Any, 3);
  EXPECT_TRUE(matches(sub(h, h.mul(2)), kFloat16, {300, 250}, map1(h, [](double v) { return -v; })));
  Tensor c = a.clone();
  c.add_(b.t());
  EXPECT_TRUE(matches(c, kFloat32, {300, 250}, map2(a, b.t(), ref::add)));
}

// ---- scalars ------------------------------------------------------------------------------------

TEST_P(PointwiseTest, ScalarOperandsBothSides) {
  for (const auto& op : kBinary) {
    const bool pow_op = op.name == "pow";
    const Domain da = binary_domain_a(op.name);
    for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8}) {
      const Tensor x = input({2, 3}, t, da, 5);
      const Tensor xb = input({2, 3}, t, Domain::NonZero, 6);  // right operand of div/fmod/remainder
      // Float scalar: never upcasts a float tensor; an integer tensor becomes float32.
      const double fs = pow_op ? 1.5 : 2.5;
      const DType float_out = is_floating(t) ? t : kFloat32;
      EXPECT_TRUE(matches(op.ts(x, fs), float_out, {2, 3}, map1(x, [&](double v) { return op.ref(v, fs); })))
          << op.name << " " << t << " tensor op 2.5";
      EXPECT_TRUE(matches(op.st(fs, xb), float_out, {2, 3}, map1(xb, [&](double v) { return op.ref(fs, v); })))
          << op.name << " " << t << " 2.5 op tensor";
      // Integer scalar: keeps the tensor's type (TRUEDIV ops still give floats).
      const int64_t is = 2;
      EXPECT_TRUE(matches(op.ts(x, is), result_dtype(op.rule, t), {2, 3}, map1(x, [&](double v) { return op.ref(v, is); })))
          << op.name << " " << t << " tensor op 2";
      EXPECT_TRUE(matches(op.st(is, xb), result_dtype(op.rule, t), {2, 3}, map1(xb, [&](double v) { return op.ref(is, v); })))
          << op.name << " " << t << " 2 op tensor";
    }
  }
  // The operators follow the same rules.
  const Tensor h = make({1, 2}, {2}, dev(), kFloat16);
  EXPECT_TRUE(matches(h * 2.5, kFloat16, {2}, {2.5, 5}));
  EXPECT_TRUE(matches(2.5 * h, kFloat16, {2}, {2.5, 5}));
  EXPECT_TRUE(matches(1 - h, kFloat16, {2}, {0, -1}));
  EXPECT_TRUE(matches(1 / h, kFloat16, {2}, {1, 0.5}));
  EXPECT_TRUE(matches(h + 1, kFloat16, {2}, {2, 3}));
  EXPECT_TRUE(matches(-h, kFloat16, {2}, {-1, -2}));
  const Tensor i = make({1, 2}, {2}, dev(), kInt32);
  EXPECT_TRUE(matches(i * 2.5, kFloat32, {2}, {2.5, 5}));
  EXPECT_TRUE(matches(i * 2, kInt32, {2}, {2, 4}));
  EXPECT_TRUE(matches(i / 2, kFloat32, {2}, {0.5, 1}));
  EXPECT_TRUE(matches(3 - i, kInt32, {2}, {2, 1}));
  EXPECT_TRUE(matches(i + true, kInt32, {2}, {2, 3}));
  const Tensor b = make({1, 0}, {2}, dev(), kBool);
  EXPECT_TRUE(matches(b + 1, kInt64, {2}, {2, 1}));
  EXPECT_TRUE(matches(b * 1.5, kFloat32, {2}, {1.5, 0}));
  // A float64 scalar keeps its precision on a float64 tensor.
  const Tensor d = make({1}, {1}, dev(), kFloat64);
  EXPECT_TRUE(matches(d + 1e-12, kFloat64, {1}, {1 + 1e-12}, 0, 1e-15));
}

// 0-d CPU tensors (numbers, like PyTorch's CPU scalars) join tensors on any device: the result lives
// on the other operands' device, and a CUDA kernel takes the number by value. Contiguous and strided
// layouts, 2- and 8-byte numbers, in-place ops and a number that requires grad.
TEST_P(PointwiseTest, CpuNumbersJoinTensorsOnAnyDevice) {
  const Device cpu(kCPU);
  const Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3}, dev(), kFloat32);
  const Tensor two = make({2}, {}, cpu, kFloat32);
  const Tensor prod = x * two;
  EXPECT_EQ(prod.device(), dev());
  EXPECT_TRUE(matches(prod, kFloat32, {2, 3}, {2, 4, 6, 8, 10, 12}));
  EXPECT_TRUE(matches(two - x.t(), kFloat32, {3, 2}, {1, -2, 0, -3, -1, -4}));
  EXPECT_TRUE(matches(where(x > 3, two, x), kFloat32, {2, 3}, {1, 2, 3, 2, 2, 2}));
  EXPECT_TRUE(matches(where(make({1}, {}, cpu, kBool), x, 0.0), kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(matches(addcmul(x, two, two, 0.5), kFloat32, {2, 3}, {3, 4, 5, 6, 7, 8}));
  EXPECT_TRUE(matches(lerp(x, two, 0.5), kFloat32, {2, 3}, {1.5, 2, 2.5, 3, 3.5, 4}));
  Tensor y = x.clone();
  y.mul_(two);
  EXPECT_TRUE(matches(y, kFloat32, {2, 3}, {2, 4, 6, 8, 10, 12}));
  const Tensor h = make({1, 2, 3, 4, 5, 6, 7, 8, 9}, {9}, dev(), kFloat16);  // a vector and a tail
  EXPECT_TRUE(matches(h + make({0.5}, {}, cpu, kFloat16), kFloat16, {9}, {1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5}));
  const int64_t big = int64_t{1} << 40;
  EXPECT_TRUE(matches(make({1, 2, 3}, {3}, dev(), kInt64) * make({static_cast<double>(big)}, {}, cpu, kInt64), kInt64,
                      {3}, {1.0 * big, 2.0 * big, 3.0 * big}));
  EXPECT_TRUE(matches(x == make({4}, {}, cpu, kFloat32), kBool, {2, 3}, {0, 0, 0, 1, 0, 0}));
  // The gradient of a number that requires grad comes back to the CPU.
  Tensor s = make({3}, {}, cpu, kFloat32).requires_grad_();
  Tensor xg = x.detach().requires_grad_();
  (xg * s).sum().backward();
  EXPECT_EQ(s.grad().device(), cpu);
  EXPECT_TRUE(matches(s.grad(), kFloat32, {}, {21}));
  EXPECT_TRUE(matches(xg.grad(), kFloat32, {2, 3}, {3, 3, 3, 3, 3, 3}));
  if (!dev().is_cuda()) return;
  // Only 0-d CPU tensors join, and an in-place result stays on its destination's device.
  EXPECT_TRUE(throws<DeviceError>([&] { (void)(x + make({1, 2, 3}, {3}, cpu)); },
                                  "[add] expected all tensors on one device, but got cuda:0 and cpu"));
  EXPECT_TRUE(throws<DeviceError>([&] { (void)(make({1, 2, 3}, {3}, cpu) * make({2}, {}, dev())); }, "[mul]"));
  EXPECT_TRUE(throws<DeviceError>([&] { two.clone().add_(make({1}, {}, dev())); },
                                  "[add_] cannot write a result on cuda:0 into a tensor on cpu"));
  // A scalar operand takes no device memory: the result is the only allocation.
  const uint64_t before = cuda::memory_stats().num_allocs;
  const Tensor scaled = x * 2.5;
  EXPECT_EQ(cuda::memory_stats().num_allocs - before, 1u);
  EXPECT_TRUE(matches(scaled, kFloat32, {2, 3}, {2.5, 5, 7.5, 10, 12.5, 15}));
}

// ---- in-place -----------------------------------------------------------------------------------

TEST_P(PointwiseTest, UnaryInPlace) {
  for (const auto& op : kUnary) {
    for (DType t : kFloatTypes) {
      const Domain d = unary_domain(op.name);
      const Tensor x0 = input({3, 4}, t, d, 9);
      Tensor x = x0.clone();
      const uint64_t v0 = x.version();
      Tensor& r = op.fn_(x);
      EXPECT_EQ(&r, &x) << op.name;
      EXPECT_GT(x.version(), v0) << op.name;
      EXPECT_TRUE(matches(x, t, {3, 4}, map1(x0, op.ref))) << op.name << " " << t;
      // Through a strided view: the base sees the result, elements outside the view do not change.
      Tensor base = input({4, 6}, t, d, 10);
      const auto before = read(base);
      Tensor v = base.slice(1, 0, std::nullopt, 2).t();
      const Tensor v0c = v.clone();
      op.fn_(v);
      EXPECT_TRUE(matches(v, t, {3, 4}, map1(v0c, op.ref))) << op.name << " view " << t;
      const auto after = read(base);
      for (size_t k = 1; k < after.size(); k += 2) EXPECT_EQ(after[k], before[k]) << op.name << " touched " << k;
    }
    if (op.rule == Rule::NUMERIC) {
      Tensor i = make({-2, 3}, {2}, dev(), kInt32);
      op.fn_(i);
      EXPECT_TRUE(matches(i, kInt32, {2}, {op.ref(-2), op.ref(3)})) << op.name;
    } else {
      Tensor i = make({1, 2}, {2}, dev(), kInt32);
      EXPECT_TRUE(throws<DTypeError>([&] { op.fn_(i); }, "cannot be written")) << op.name;
    }
  }
}

TEST_P(PointwiseTest, BinaryInPlace) {
  for (const auto& op : kBinary) {
    for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64}) {
      if (op.rule == Rule::TRUEDIV && !is_floating(t)) continue;
      const Tensor a0 = input({3, 4}, t, binary_domain_a(op.name), 12);
      const Tensor b = input({4}, t, binary_domain_b(op.name), 13);
      Tensor a = a0.clone();
      const uint64_t v0 = a.version();
      Tensor& r = op.tt_(a, b);
      EXPECT_EQ(&r, &a);
      EXPECT_GT(a.version(), v0) << op.name;
      EXPECT_TRUE(matches(a, t, {3, 4}, map2(a0, b, op.ref))) << op.name << " " << t;
      // Scalar operand.
      Tensor c = a0.clone();
      op.ts_(c, 2);
      EXPECT_TRUE(matches(c, t, {3, 4}, map1(a0, [&](double v) { return op.ref(v, 2); }))) << op.name << " scalar " << t;
      // Non-contiguous destination, 0-d source.
      Tensor base = input({4, 3}, t, binary_domain_a(op.name), 14);
      Tensor dst = base.t();
      const Tensor d0 = dst.clone();
      const Tensor s = input({}, t, binary_domain_b(op.name), 15);
      op.tt_(dst, s);
      EXPECT_TRUE(matches(base.t(), t, {3, 4}, map2(d0, s, op.ref))) << op.name << " strided " << t;
    }
    // A wider operand type is computed in that type and written back.
    Tensor h = make({1, 2}, {2}, dev(), kFloat16);
    const Tensor f = make({0.25, 3}, {2}, dev(), kFloat32);
    op.tt_(h, f);
    EXPECT_TRUE(matches(h, kFloat16, {2}, {op.ref(1, 0.25), op.ref(2, 3)})) << op.name;
    // Zero-size.
    Tensor e = make({}, {0, 2}, dev(), kFloat32);
    EXPECT_TRUE(matches(op.tt_(e, make({1, 2}, {2}, dev(), kFloat32)), kFloat32, {0, 2}, {})) << op.name;
  }
}

TEST_P(PointwiseTest, InPlaceErrors) {
  Tensor leaf = make({1, 2}, {2}, dev()).requires_grad_();
  EXPECT_TRUE(throws<Error>([&] { leaf.add_(1); }, "leaf"));
  EXPECT_TRUE(throws<Error>([&] { leaf.exp_(); }, "[exp_]"));
  EXPECT_TRUE(throws<Error>([&] { leaf.mul_(make({2, 2}, {2}, dev())); }, "[mul_]"));
  {
    NoGradGuard no_grad;  // as optimizers do
    leaf.mul_(2);
  }
  EXPECT_TRUE(matches(leaf.detach(), kFloat64, {2}, {2, 4}));

  Tensor i = make({1, 2}, {2}, dev(), kInt32);
  EXPECT_TRUE(throws<DTypeError>([&] { i.div_(2); }, "cannot be written into a tensor of dtype int32"));
  EXPECT_TRUE(throws<DTypeError>([&] { i.div_(make({1, 1}, {2}, dev(), kInt32)); }, "[div_]"));
  EXPECT_TRUE(throws<DTypeError>([&] { i.add_(1.5); }, "float32"));
  EXPECT_TRUE(throws<DTypeError>([&] { i.mul_(make({1, 1}, {2}, dev(), kFloat32)); }, "[mul_]"));
  EXPECT_TRUE(throws<DTypeError>([&] { i.sqrt_(); }, "[sqrt_]"));
  Tensor bl = make({1, 0}, {2}, dev(), kBool);
  EXPECT_TRUE(throws<DTypeError>([&] { bl.add_(1); }, "[add_]"));
  EXPECT_TRUE(throws<DTypeError>([&] { bl.neg_(); }, "[neg_]"));
  EXPECT_TRUE(matches(i, kInt32, {2}, {1, 2}));  // untouched by the failed calls

  Tensor ex = make({1, 2, 3}, {1, 3}, dev()).expand({2, 3});
  EXPECT_TRUE(throws<Error>([&] { ex.add_(1); }, "expanded"));
  EXPECT_TRUE(throws<Error>([&] { ex.neg_(); }, "expanded"));
  EXPECT_TRUE(throws<Error>([&] { ex.clamp_(0, 1); }, "expanded"));

  Tensor small = make({1, 2, 3}, {3}, dev());
  const Tensor big = make({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  EXPECT_TRUE(throws<ShapeError>([&] { small.add_(big); }, "does not fit"));
  EXPECT_TRUE(throws<ShapeError>([&] { small.pow_(big); }, "[pow_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { small.add_(make({1, 2}, {2}, dev())); }, "[add_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { addcmul_(small, big, big); }, "[addcmul_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { addcdiv_(small, small, big); }, "[addcdiv_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { lerp_(small, big, 0.5); }, "[lerp_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { small.masked_fill_(make({1, 0, 1, 0, 1, 0}, {2, 3}, dev(), kBool), 0); }, "[masked_fill"));
  EXPECT_TRUE(matches(small, kFloat64, {3}, {1, 2, 3}));
  // The same errors on the recording path (a non-leaf that requires grad).
  Tensor w = make({1, 2, 3}, {3}, dev()).requires_grad_();
  Tensor nl = w * 1;
  EXPECT_TRUE(throws<ShapeError>([&] { nl.add_(big); }, "does not fit"));
  EXPECT_TRUE(throws<ShapeError>([&] { addcmul_(nl, big, big); }, "[addcmul_]"));
  EXPECT_TRUE(throws<ShapeError>([&] { lerp_(nl, big, 0.5); }, "[lerp_]"));
}

TEST_P(PointwiseTest, InPlaceWithAnOverlappingOperand) {
  // The operand is read as it was before the op, whatever the memory it shares with the destination.
  for (DType t : {kFloat32, kInt64, kFloat16}) {
    Tensor a = make({1, 2, 3, 4}, {2, 2}, dev(), t);
    a.add_(a.t());
    EXPECT_TRUE(matches(a, t, {2, 2}, {2, 5, 5, 8})) << t;
    Tensor b = make({1, 2, 3, 4}, {2, 2}, dev(), t);
    b.mul_(b[0]);
    EXPECT_TRUE(matches(b, t, {2, 2}, {1, 4, 3, 8})) << t;
    Tensor c = make({1, 2, 3, 4, 5}, {5}, dev(), t);
    Tensor head = c.slice(0, 0, 4);
    head.sub_(c.slice(0, 1, 5));
    EXPECT_TRUE(matches(c, t, {5}, {-1, -1, -1, -1, 5})) << t;
    Tensor d = make({1, 2, 3, 4, 5}, {5}, dev(), t);
    Tensor tail = d.slice(0, 1, 5);
    tail.add_(d.slice(0, 0, 4));
    EXPECT_TRUE(matches(d, t, {5}, {1, 3, 5, 7, 9})) << t;
    Tensor e = make({1, 2, 3, 4}, {2, 2}, dev(), t);
    e.mul_(e);  // the same elements: fine in place
    EXPECT_TRUE(matches(e, t, {2, 2}, {1, 4, 9, 16})) << t;
  }
}

// ---- integer and NaN edge cases ---------------------------------------------------------------------

TEST_P(PointwiseTest, IntegerDivisionByZeroAndOverflow) {
  for (DType t : {kInt8, kInt32, kInt64}) {
    const Tensor a = make({5, -5, 0, 7, -7}, {5}, dev(), t), b = make({0, 0, 0, 2, 2}, {5}, dev(), t);
    if (dev().is_cpu()) {
      // The CPU raises, as PyTorch's does; CUDA gives 0 without synchronizing to look.
      for (TT op : std::initializer_list<TT>{fmod, remainder, floor_divide})
        EXPECT_TRUE(throws<ValueError>([&] { op(a, b); }, "ZeroDivisionError")) << t;
      for (TS op : std::initializer_list<TS>{fmod, remainder, floor_divide})
        EXPECT_TRUE(throws<ValueError>([&] { op(a, 0); }, "ZeroDivisionError")) << t;
    } else {
      EXPECT_TRUE(matches(fmod(a, b), t, {5}, {0, 0, 0, 1, -1})) << t;
      EXPECT_TRUE(matches(remainder(a, b), t, {5}, {0, 0, 0, 1, 1})) << t;
      EXPECT_TRUE(matches(fmod(a, 0), t, {5}, {0, 0, 0, 0, 0})) << t;
      EXPECT_TRUE(matches(remainder(a, 0), t, {5}, {0, 0, 0, 0, 0})) << t;
    }
    // True division by an integer zero is a float division.
    EXPECT_TRUE(matches(div(a, b), kFloat32, {5}, {INFINITY, -INFINITY, NAN, 3.5, -3.5})) << t;
  }
  const Tensor u = make({5, 0, 7}, {3}, dev(), kUInt8);
  if (!dev().is_cpu()) {
    EXPECT_TRUE(matches(fmod(u, 0), kUInt8, {3}, {0, 0, 0}));
    EXPECT_TRUE(matches(remainder(u, make({0, 0, 4}, {3}, dev(), kUInt8)), kUInt8, {3}, {0, 0, 3}));
  }
  // The most negative value by -1 (a hardware trap for the native instruction).
  const Tensor lo64 = tensor<int64_t>({std::numeric_limits<int64_t>::min(), 7});
  EXPECT_TRUE(matches(fmod(lo64.to(dev()), -1), kInt64, {2}, {0, 0}));
  EXPECT_TRUE(matches(remainder(lo64.to(dev()), -1), kInt64, {2}, {0, 0}));
  const Tensor lo32 = tensor<int32_t>({std::numeric_limits<int32_t>::min(), 7});
  EXPECT_TRUE(matches(fmod(lo32.to(dev()), -1), kInt32, {2}, {0, 0}));
  EXPECT_TRUE(matches(remainder(lo32.to(dev()), -1), kInt32, {2}, {0, 0}));
}

TEST_P(PointwiseTest, RemainderAndFmodSignRules) {
  // Python: -7 % 3 == 2, 7 % -3 == -2, -7 % -3 == -1; C fmod keeps the sign of the dividend.
  for (DType t : {kInt32, kInt64, kInt8, kFloat32, kFloat64, kFloat16}) {
    const Tensor a = make({-7, 7, -7, 7, 6, -6}, {6}, dev(), t), b = make({3, -3, -3, 3, -3, 3}, {6}, dev(), t);
    EXPECT_TRUE(matches(remainder(a, b), t, {6}, {2, -2, -1, 1, 0, 0})) << t;
    EXPECT_TRUE(matches(fmod(a, b), t, {6}, {-1, 1, -1, 1, 0, 0})) << t;
    EXPECT_TRUE(matches(remainder(-7, b), t, {6}, {2, -1, -1, 2, -1, 2})) << t;
  }
  const Tensor a = make({-7.5, 7.5, -0.5, 5.25}, {4}, dev(), kFloat64);
  EXPECT_TRUE(matches(remainder(a, 2), kFloat64, {4}, {0.5, 1.5, 1.5, 1.25}));
  EXPECT_TRUE(matches(remainder(a, -2), kFloat64, {4}, {-1.5, -0.5, -0.5, -0.75}));
  EXPECT_TRUE(matches(fmod(a, 2), kFloat64, {4}, {-1.5, 1.5, -0.5, 1.25}));
  EXPECT_TRUE(matches(fmod(a, 0.0), kFloat64, {4}, {NAN, NAN, NAN, NAN}));
  EXPECT_TRUE(matches(remainder(a, 0.0), kFloat64, {4}, {NAN, NAN, NAN, NAN}));
}

TEST_P(PointwiseTest, IntegerPowNegativeExponent) {
  for (DType t : {kInt8, kInt32, kInt64}) {
    const Tensor a = make({2, 1, -1, -1, 0, 3, -2, 5}, {8}, dev(), t);
    const Tensor b = make({-1, -5, -3, -2, -1, 0, 3, 2}, {8}, dev(), t);
    // Integer powers with negative exponents: 1 and -1 stay exact, anything else truncates to 0.
    EXPECT_TRUE(matches(pow(a, b), t, {8}, {0, 1, -1, 1, 0, 1, -8, 25})) << t;
    // A negative integer number as the exponent is refused, as PyTorch refuses it.
    EXPECT_TRUE(throws<ValueError>([&] { pow(a, -1); }, "negative integer powers")) << t;
    // A float exponent computes in float32.
    EXPECT_TRUE(matches(pow(a, -1.0), kFloat32, {8}, map1(a, [](double v) { return 1 / v; }))) << t;
    // Scalar base.
    EXPECT_TRUE(matches(pow(2, make({0, 3, 10}, {3}, dev(), t)), t, {3}, {1, 8, t == kInt8 ? 0.0 : 1024.0})) << t;
  }
  EXPECT_TRUE(matches(pow(make({3, 2}, {2}, dev(), kUInt8), 2), kUInt8, {2}, {9, 4}));
  EXPECT_TRUE(matches(pow(make({2, 3}, {2}, dev(), kInt64), 33), kInt64, {2}, {8589934592.0, 5559060566555523.0}));
}

TEST_P(PointwiseTest, RoundHalfToEven) {
  for (DType t : kFloatTypes) {
    const Tensor x = make({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.25, 2.75}, {9}, dev(), t);
    EXPECT_TRUE(matches(round(x), t, {9}, {-2, -2, -0.0, 0, 2, 2, 4, -3, 3})) << t;
    EXPECT_TRUE(matches(trunc(x), t, {9}, {-2, -1, -0.0, 0, 1, 2, 3, -3, 2})) << t;
  }
}

TEST_P(PointwiseTest, NaNPropagation) {
  for (DType t : kFloatTypes) {
    const Tensor a = make({NAN, 1, NAN, -2}, {4}, dev(), t), b = make({1, NAN, NAN, 3}, {4}, dev(), t);
    EXPECT_TRUE(matches(maximum(a, b), t, {4}, {NAN, NAN, NAN, 3})) << t;
    EXPECT_TRUE(matches(minimum(a, b), t, {4}, {NAN, NAN, NAN, -2})) << t;
    EXPECT_TRUE(matches(maximum(a, 0), t, {4}, {NAN, 1, NAN, 0})) << t;
    EXPECT_TRUE(matches(relu(a), t, {4}, {NAN, 1, NAN, 0})) << t;
    EXPECT_TRUE(matches(clamp(a, 0, 0.5), t, {4}, {NAN, 0.5, NAN, 0})) << t;
    EXPECT_TRUE(matches(clamp(a, std::nullopt, 0.5), t, {4}, {NAN, 0.5, NAN, -2})) << t;
    EXPECT_TRUE(matches(clamp(a, make({0}, {1}, dev(), t), make({0.5}, {1}, dev(), t)), t, {4}, {NAN, 0.5, NAN, 0})) << t;
    EXPECT_TRUE(matches(leaky_relu(a), t, {4}, {NAN, 1, NAN, -0.02})) << t;
    EXPECT_TRUE(matches(sign(a), t, {4}, {NAN, 1, NAN, -1})) << t;
    EXPECT_TRUE(matches(abs(a), t, {4}, {NAN, 1, NAN, 2})) << t;
  }
}

// float32 tanh over a dense sweep (both polynomial ranges, the switch between them, saturation,
// subnormals) within 2.5 ulp of the exact value (the CPU's host_tanhf: 1.3; CUDA documents 2 ulp
// from the correctly rounded result), odd, and exact at the special values.
TEST_P(PointwiseTest, TanhFloat32Accuracy) {
  std::vector<double> v;
  for (double a = 1e-30; a < 12; a *= 1.0007) v.push_back(a);
  for (int i = 0; i <= 20000; ++i) v.push_back(1.25 * i / 20000);  // around 0.625, the switch
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  const Tensor x = make(v, {static_cast<int64_t>(v.size())}, dev(), kFloat32);
  const std::vector<double> xs = values(x), ys = values(tanh(x));
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double exact = std::tanh(xs[i]);
    const float rounded = static_cast<float>(exact);
    const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
    worst = std::max(worst, std::fabs(ys[i] - exact) / ulp);
    if (i < n) {
      EXPECT_EQ(ys[i], -ys[i + n]) << xs[i];
    }
  }
  EXPECT_LE(worst, 2.5);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor special = make({0.0, -0.0, inf, -inf, NAN, 1e-40}, {6}, dev(), kFloat32);
  const std::vector<double> s = values(tanh(special));
  EXPECT_EQ(s[0], 0.0);
  EXPECT_TRUE(std::signbit(s[1]));
  EXPECT_EQ(s[2], 1.0);
  EXPECT_EQ(s[3], -1.0);
  EXPECT_TRUE(std::isnan(s[4]));
  EXPECT_EQ(s[5], values(special)[5]);  // tanh(x) = x for subnormal x
}

// float32 exp over a dense sweep of its whole range (results from the largest float down through
// the subnormals) within 2 ulp of the exact value (the CPU's host_expf: 1.2; CUDA documents 2 ulp
// for expf), and exact at the special values: overflow to infinity, underflow to 0, NaN.
TEST_P(PointwiseTest, ExpFloat32Accuracy) {
  std::vector<double> v;
  for (int i = 0; i <= 400000; ++i) v.push_back(-103.0 + (88.7 + 103.0) * i / 400000);
  for (double a = 1e-30; a < 1; a *= 1.001) {
    v.push_back(a);
    v.push_back(-a);
  }
  const Tensor x = make(v, {static_cast<int64_t>(v.size())}, dev(), kFloat32);
  const std::vector<double> xs = values(x), ys = values(exp(x));
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double exact = std::exp(xs[i]);
    const float rounded = static_cast<float>(exact);
    // ulp of the float result; below the normal range the subnormals' spacing
    const double ulp = std::max(std::nextafter(rounded, INFINITY) - static_cast<double>(rounded), 0x1p-149);
    worst = std::max(worst, std::fabs(ys[i] - exact) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor special = make({0.0, -0.0, inf, -inf, NAN, 89.0, -104.0, 88.0, -87.0}, {9}, dev(), kFloat32);
  const std::vector<double> s = values(exp(special));
  EXPECT_EQ(s[0], 1.0);
  EXPECT_EQ(s[1], 1.0);
  EXPECT_EQ(s[2], inf);
  EXPECT_EQ(s[3], 0.0);
  EXPECT_TRUE(std::isnan(s[4]));
  EXPECT_EQ(s[5], inf);
  EXPECT_EQ(s[6], 0.0);
  EXPECT_NEAR(s[7] / std::exp(88.0), 1.0, 2.4e-7);
  EXPECT_NEAR(s[8] / std::exp(-87.0), 1.0, 2.4e-7);
}

// ---- ops with parameters ------------------------------------------------------------------------

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST_P(PointwiseTest, ActivationsWithParameters) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32}) {
    for (const auto& [layout, x] : unary_inputs(t, Domain::Any, 21)) {
      const DType out = result_dtype(Rule::FLOAT, t);
      const std::string what = std::string(dtype_name(t)) + " " + layout;
      EXPECT_TRUE(matches(gelu(x), out, x.sizes(), map1(x, gelu_ref))) << what;
      EXPECT_TRUE(matches(x.gelu("tanh"), out, x.sizes(), map1(x, gelu_tanh_ref))) << what;
      EXPECT_TRUE(matches(leaky_relu(x), out, x.sizes(), map1(x, [](double v) { return v > 0 ? v : 0.01 * v; }))) << what;
      EXPECT_TRUE(matches(x.leaky_relu(0.2), out, x.sizes(), map1(x, [](double v) { return v > 0 ? v : 0.2 * v; }))) << what;
      EXPECT_TRUE(matches(elu(x), out, x.sizes(), map1(x, [](double v) { return v > 0 ? v : std::expm1(v); }))) << what;
      EXPECT_TRUE(matches(x.elu(1.5), out, x.sizes(), map1(x, [](double v) { return v > 0 ? v : 1.5 * std::expm1(v); })))
          << what;
      EXPECT_TRUE(matches(softplus(x), out, x.sizes(), map1(x, [](double v) { return std::log1p(std::exp(v)); }))) << what;
      const auto sp = [](double v) { return 2 * v > 1.5 ? v : std::log1p(std::exp(2 * v)) / 2; };
      EXPECT_TRUE(matches(x.softplus(2, 1.5), out, x.sizes(), map1(x, sp))) << what;
    }
  }
  // Around the threshold the result switches from log1p(exp(beta x)) / beta to x exactly.
  const Tensor x = make({0.74, 0.76, 30, -30}, {4}, dev());
  EXPECT_TRUE(matches(softplus(x, 2, 1.5), kFloat64, {4}, {std::log1p(std::exp(1.48)) / 2, 0.76, 30, std::log1p(std::exp(-60)) / 2}));
  EXPECT_TRUE(matches(softplus(make({100, -100}, {2}, dev()), 1, 200), kFloat64, {2}, {100, std::exp(-100.0)}));
  EXPECT_TRUE(throws<ValueError>([&] { gelu(x, "fast"); }, "approximate"));
  EXPECT_TRUE(throws<ValueError>([&] { softplus(x, 0); }, "beta"));
}

// The table's gradient kernels (its functor ops named *_backward), each reached through the op it
// differentiates, with the reference of that gradient from the incoming gradient g and the input x.
// The sweep fails for a gradient kernel without an entry.
struct GradientKernel {
  Tensor (*forward)(const Tensor&);
  double (*ref)(double g, double x);
};
const std::map<std::string, GradientKernel> kGradientKernels = {
    {"gelu_backward",
     {[](const Tensor& x) { return gelu(x); },
      [](double g, double x) { return g * (0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI)); }}},
    {"gelu_tanh_backward",
     {[](const Tensor& x) { return gelu(x, "tanh"); },
      [](double g, double x) {
        const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
        return g * (0.5 * (1 + t) + 0.5 * k * x * (1 - t * t) * (1 + 3 * 0.044715 * x * x));
      }}},
    // relu's: g where relu(x) > 0, so a NaN input passes g (PyTorch's threshold_backward).
    {"threshold_backward",
     {[](const Tensor& x) { return relu(x); }, [](double g, double x) { return x > 0 || std::isnan(x) ? g : 0.0; }}},
};

std::vector<std::string> table_gradient_kernels() {
  std::vector<std::string> names;
#define RTX_BINARY_FUNCTOR(name, F, types)                                                  \
  if (std::string(#name).size() > 9 && std::string(#name).substr(std::string(#name).size() - 9) == "_backward") \
    names.push_back(#name);
#include "rtx/pointwise.def"
  return names;
}

TEST_P(PointwiseTest, GradientKernelsAllFloatTypesAndLayouts) {
  const std::vector<std::string> names = table_gradient_kernels();
  EXPECT_EQ(names.size(), kGradientKernels.size());
  for (const std::string& name : names) {
    const auto it = kGradientKernels.find(name);
    ASSERT_NE(it, kGradientKernels.end()) << name << " has no entry in kGradientKernels";
    const GradientKernel& op = it->second;
    for (DType t : kFloatTypes) {
      // Input and incoming gradient in different layouts of one logical shape, and 0-d and empty ones.
      auto xs = unary_inputs(t, Domain::Any, 71), gs = unary_inputs(t, Domain::Any, 171);
      std::rotate(gs.begin(), gs.begin() + 1, gs.end() - 2);
      for (size_t i = 0; i < xs.size(); ++i) {
        const Tensor x = xs[i].second.detach().requires_grad_(), g = gs[i].second;
        ASSERT_EQ(x.sizes(), g.sizes());
        const Tensor grad = autograd::grad({op.forward(x)}, {x}, {g})[0];
        EXPECT_TRUE(matches(grad, t, x.sizes(), map2(g, x, op.ref))) << name << " " << t << " x " << xs[i].first
                                                                      << ", g " << gs[i].first;
      }
    }
  }
}

// The tanh GELU of 16-bit floats over its tails, where 1 + tanh(u) cancels, and at infinities and
// NaN, forward and backward, against the float64 formula (the CUDA kernels compute it as x
// sigmoid(2u) for these dtypes).
TEST_P(PointwiseTest, GeluTanhSixteenBitTailsAndSpecialValues) {
  std::vector<double> v;
  for (int i = -48; i <= 48; ++i) v.push_back(i * 0.25);
  v.insert(v.end(), {INFINITY, -INFINITY, NAN, 1e-3, -1e-3});
  const auto n = static_cast<int64_t>(v.size());
  for (DType t : {kFloat16, kBFloat16}) {
    const Tensor x = make(v, {n}, dev(), t).requires_grad_();
    const Tensor g = make(std::vector<double>(v.size(), 1.5), {n}, dev(), t);
    const Tensor y = gelu(x, "tanh");
    EXPECT_TRUE(matches(y, t, {n}, map1(x, gelu_tanh_ref))) << t;
    const Tensor dx = autograd::grad({y}, {x}, {g})[0];
    EXPECT_TRUE(matches(dx, t, {n}, map2(g, x, kGradientKernels.at("gelu_tanh_backward").ref))) << t;
  }
}

TEST_P(PointwiseTest, ReluGradientAtZeroNaNAndInfinity) {
  // 0 and -0 give no gradient, NaN passes it; below zero a NaN or infinite gradient gives 0, not NaN.
  for (DType t : kFloatTypes) {
    const Tensor x = make({NAN, 0.0, -0.0, -1, 2, INFINITY, -INFINITY, -3}, {8}, dev(), t).requires_grad_();
    const Tensor g = make({3, NAN, INFINITY, -INFINITY, NAN, 1, 5, NAN}, {8}, dev(), t);
    relu(x).backward(g);
    EXPECT_TRUE(matches(x.grad(), t, {8}, {3, 0, 0, 0, NAN, 1, 0, 0})) << t;
    // In place on a non-leaf.
    const Tensor x2 = x.detach().requires_grad_();
    Tensor y = x2 * 1;
    y.relu_().backward(g);
    EXPECT_TRUE(matches(x2.grad(), t, {8}, {3, 0, 0, 0, NAN, 1, 0, 0})) << t << " relu_";
  }
  // Third order runs the gradient kernel's own recorded backward.
  const Tensor x = make({0.5, -1.5, 2.5}, {3}, dev()).requires_grad_();
  const Tensor g = make({1.5, 2, -1}, {3}, dev()).requires_grad_();
  const Tensor gx = autograd::grad({relu(x)}, {x}, {g}, std::nullopt, true)[0];
  EXPECT_TRUE(gx.requires_grad());
  const Tensor gg = autograd::grad({(gx * gx).sum()}, {g}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(matches(gg, kFloat64, {3}, {3, 0, -2}));
  EXPECT_TRUE(gradgradcheck([&](const TensorList& in) { return TensorList{autograd::grad({relu(in[0])}, {in[0]}, {in[1]}, std::nullopt, true)[0]}; },
                            {x, g}));
}

TEST_P(PointwiseTest, ClampScalarBounds) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8, kInt8, kInt16}) {
    for (const auto& [layout, x] : unary_inputs(t, Domain::Any, 31)) {
      const std::string what = std::string(dtype_name(t)) + " " + layout;
      EXPECT_TRUE(matches(clamp(x, -1, 2), t, x.sizes(), map1(x, [](double v) { return std::min(std::max(v, -1.0), 2.0); })))
          << what;
      EXPECT_TRUE(matches(clamp(x, 1), t, x.sizes(), map1(x, [](double v) { return std::max(v, 1.0); }))) << what;
      EXPECT_TRUE(matches(x.clamp(std::nullopt, 1), t, x.sizes(), map1(x, [](double v) { return std::min(v, 1.0); }))) << what;
      // min > max: everything becomes max, like PyTorch.
      EXPECT_TRUE(matches(clamp(x, 3, 1), t, x.sizes(), map1(x, [](double) { return 1.0; }))) << what;
    }
  }
  // An integer tensor with a float bound promotes.
  const Tensor i = make({-3, 0, 1, 4}, {4}, dev(), kInt32);
  EXPECT_TRUE(matches(clamp(i, -0.5, 2.5), kFloat32, {4}, {-0.5, 0, 1, 2.5}));
  EXPECT_TRUE(matches(clamp(i, 0, 2.5), kFloat32, {4}, {0, 0, 1, 2.5}));
  EXPECT_TRUE(matches(clamp(i, 0, 2), kInt32, {4}, {0, 0, 1, 2}));
  EXPECT_TRUE(matches(clamp(make({0.5, 3}, {2}, dev(), kFloat16), 1, 2), kFloat16, {2}, {1, 2}));
  // In place.
  Tensor f = make({-3, 0, 1, 4}, {2, 2}, dev(), kFloat32);
  const uint64_t v0 = f.version();
  EXPECT_EQ(&f.clamp_(0, 2), &f);
  EXPECT_GT(f.version(), v0);
  EXPECT_TRUE(matches(f, kFloat32, {2, 2}, {0, 0, 1, 2}));
  Tensor ft = make({-3, 0, 1, 4}, {2, 2}, dev(), kFloat32).t();
  ft.clamp_(std::nullopt, 0.5);
  EXPECT_TRUE(matches(ft, kFloat32, {2, 2}, {-3, 0.5, 0, 0.5}));
  Tensor ii = i.clone();
  ii.clamp_(0, 2);
  EXPECT_TRUE(matches(ii, kInt32, {4}, {0, 0, 1, 2}));
  EXPECT_TRUE(throws<DTypeError>([&] { ii.clamp_(0.5, 2); }, "[clamp_]"));
  // Errors.
  EXPECT_TRUE(throws<ValueError>([&] { clamp(i, std::nullopt, std::nullopt); }, "at least one"));
  EXPECT_TRUE(throws<ValueError>([&] { ii.clamp_(std::nullopt, std::nullopt); }, "at least one"));
  EXPECT_TRUE(throws<DTypeError>([&] { clamp(make({1, 0}, {2}, dev(), kBool), 0, 1); }, "bool"));
  Tensor bl = make({1, 0}, {2}, dev(), kBool);
  EXPECT_TRUE(throws<DTypeError>([&] { bl.clamp_(0, 1); }, "bool"));
}

TEST_P(PointwiseTest, ClampTensorBounds) {
  const Tensor x = input({3, 4}, kFloat64, Domain::Any, 41);
  const Tensor lo = input({4}, kFloat64, Domain::Any, 42), hi = input({3, 1}, kFloat64, Domain::Any, 43).add(1);
  const auto vx = read(x), vlo = read(lo), vhi = read(hi);
  std::vector<double> both, only_lo, only_hi;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      const double v = vx[r * 4 + c], l = vlo[c], h = vhi[r];
      both.push_back(std::min(std::max(v, l), h));
      only_lo.push_back(std::max(v, l));
      only_hi.push_back(std::min(v, h));
    }
  EXPECT_TRUE(matches(clamp(x, lo, hi), kFloat64, {3, 4}, both));
  EXPECT_TRUE(matches(clamp(x, lo, Tensor()), kFloat64, {3, 4}, only_lo));
  EXPECT_TRUE(matches(clamp(x, Tensor(), hi), kFloat64, {3, 4}, only_hi));
  EXPECT_TRUE(matches(clamp(x.to(kFloat32), lo, hi), kFloat64, {3, 4}, both, 1e-6, 1e-6));
  EXPECT_TRUE(throws<ValueError>([&] { clamp(x, Tensor(), Tensor()); }, "at least one"));
  EXPECT_TRUE(throws<ShapeError>([&] { clamp(x, make({1, 2}, {2}, dev()), Tensor()); }, "broadcast"));
}

TEST_P(PointwiseTest, Where) {
  const Tensor c = make({1, 0, 1}, {3, 1}, dev(), kBool);
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kUInt8, kBool}) {
    const Tensor a = input({1, 4}, t, Domain::Positive, 51), b = input({}, t, Domain::Any, 52);
    const auto vc = read(c), va = read(a), vb = read(b);
    std::vector<double> e;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t k = 0; k < 4; ++k) e.push_back(vc[r] != 0 ? va[k] : vb[0]);
    EXPECT_TRUE(matches(where(c, a, b), t, {3, 4}, e)) << t;
    // Strided condition and values.
    const Tensor ct = make({1, 0, 0, 1, 1, 0}, {2, 3}, dev(), kBool).t();
    const Tensor at = input({2, 3}, t, Domain::Any, 53).t();
    EXPECT_TRUE(matches(where(ct, at, b), t, {3, 2}, map2(ct, at, [&](double cv, double av) { return cv != 0 ? av : vb[0]; })))
        << t;
  }
  // Promotion and scalar values.
  const Tensor i = make({1, 2, 3}, {3}, dev(), kInt32), f = make({0.5, 0.25, 0.125}, {3}, dev(), kFloat32);
  const Tensor m = make({1, 0, 1}, {3}, dev(), kBool);
  EXPECT_TRUE(matches(where(m, i, f), kFloat32, {3}, {1, 0.25, 3}));
  EXPECT_TRUE(matches(where(m, i, 2.5), kFloat32, {3}, {1, 2.5, 3}));
  EXPECT_TRUE(matches(where(m, i, 7), kInt32, {3}, {1, 7, 3}));
  EXPECT_TRUE(matches(where(m, -1, f), kFloat32, {3}, {-1, 0.25, -1}));
  EXPECT_TRUE(matches(where(m, make({}, {0, 3}, dev()), 1.0), kFloat64, {0, 3}, {}));
  // Errors.
  EXPECT_TRUE(throws<DTypeError>([&] { where(i, f, f); }, "condition must be a bool tensor"));
  EXPECT_TRUE(throws<ShapeError>([&] { where(make({1, 0}, {2}, dev(), kBool), f, f); }, "[where]"));
  EXPECT_TRUE(throws<ValueError>([&] { where(m, Tensor(), f); }, "[where]"));
}

TEST_P(PointwiseTest, WhereLargeWithRandomConditions) {
  // Above the grain size, with a condition that changes at random: contiguous operands, a strided
  // one, and a scalar value (masked_fill's case), in every kind of dtype.
  const Tensor cond = input({300, 250}, kFloat32, Domain::Any, 81) > 0;
  const Tensor cond_strided = (input({250, 300}, kFloat32, Domain::Any, 82) > 0).t();
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt8, kUInt8, kBool}) {
    const Tensor a = input({300, 250}, t, Domain::Any, 83), b = input({300, 250}, t, Domain::Any, 84);
    const Tensor bt = input({250, 300}, t, Domain::Any, 85).t();
    const auto pick = [](const Tensor& c, const Tensor& x, const Tensor& y) {
      const auto vc = read(c), vx = read(x), vy = read(y);
      std::vector<double> e;
      for (size_t i = 0; i < vc.size(); ++i) e.push_back(vc[i] != 0 ? vx[i] : vy[i]);
      return e;
    };
    EXPECT_TRUE(matches(where(cond, a, b), t, {300, 250}, pick(cond, a, b))) << t << " contiguous";
    EXPECT_TRUE(matches(where(cond_strided, a, bt), t, {300, 250}, pick(cond_strided, a, bt))) << t << " strided";
    const Tensor one = make({1}, {}, dev(), t);
    EXPECT_TRUE(matches(masked_fill(a, cond, 1), t, {300, 250}, pick(cond, one.expand({300, 250}), a))) << t << " scalar";
  }
}

TEST_P(PointwiseTest, MaskedFill) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kInt64, kUInt8}) {
    const Tensor x = input({3, 4}, t, Domain::Positive, 61);
    const Tensor mask = make({1, 0, 0, 1}, {4}, dev(), kBool);
    const auto vx = read(x);
    std::vector<double> e;
    for (size_t k = 0; k < vx.size(); ++k) e.push_back(k % 4 == 0 || k % 4 == 3 ? 7 : vx[k]);
    EXPECT_TRUE(matches(masked_fill(x, mask, 7), t, {3, 4}, e)) << t;
    Tensor y = x.clone();
    const uint64_t v0 = y.version();
    EXPECT_EQ(&y.masked_fill_(mask, 7), &y);
    EXPECT_GT(y.version(), v0);
    EXPECT_TRUE(matches(y, t, {3, 4}, e)) << t;
    // Strided destination.
    Tensor base = input({4, 3}, t, Domain::Positive, 62);
    Tensor v = base.t();
    const auto vv = read(v);
    v.masked_fill_(mask, 7);
    std::vector<double> ev;
    for (size_t k = 0; k < vv.size(); ++k) ev.push_back(k % 4 == 0 || k % 4 == 3 ? 7 : vv[k]);
    EXPECT_TRUE(matches(base.t(), t, {3, 4}, ev)) << t;
  }
  const Tensor h = make({1, 2}, {2}, dev(), kFloat16);
  EXPECT_TRUE(matches(masked_fill(h, make({0, 1}, {2}, dev(), kBool), 0.5), kFloat16, {2}, {1, 0.5}));
  EXPECT_TRUE(matches(masked_fill(h, make({1}, {}, dev(), kBool), -INFINITY), kFloat16, {2}, {-INFINITY, -INFINITY}));
  EXPECT_TRUE(throws<DTypeError>([&] { masked_fill(h, make({0, 1}, {2}, dev(), kInt32), 0); }, "mask must be a bool tensor"));
  EXPECT_TRUE(throws<ShapeError>([&] { masked_fill(h, make({0, 1, 1}, {3}, dev(), kBool), 0); }, "[masked_fill]"));
  EXPECT_TRUE(throws<ShapeError>([&] { masked_fill(h, make({0, 1, 1, 0}, {2, 2}, dev(), kBool), 0); }, "[masked_fill]"));
  EXPECT_TRUE(throws<DTypeError>([&] { masked_fill(make({1, 2}, {2}, dev(), kInt32), make({0, 1}, {2}, dev(), kBool), 0.5); },
                                 "[masked_fill]"));
}

TEST_P(PointwiseTest, AddcmulAddcdivLerp) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor x = input({3, 4}, t, Domain::Any, 71), t1 = input({4}, t, Domain::Any, 72);
    const Tensor t2 = input({3, 1}, t, Domain::NonZero, 73), end = input({3, 8}, t, Domain::Any, 74).slice(1, 0, std::nullopt, 2);
    const auto vx = read(x), v1 = read(t1), v2 = read(t2), ve = read(end);
    std::vector<double> em, ed, el3, el7;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t c = 0; c < 4; ++c) {
        const double xv = vx[r * 4 + c], a = v1[c], b = v2[r], e = ve[r * 4 + c];
        em.push_back(xv + 0.5 * a * b);
        ed.push_back(xv + 0.5 * a / b);
        el3.push_back(xv + 0.3 * (e - xv));
        el7.push_back(xv + 0.7 * (e - xv));
      }
    const double tol = t == kBFloat16 ? 3e-2 : t == kFloat16 ? 3e-3 : -1;
    EXPECT_TRUE(matches(addcmul(x, t1, t2, 0.5), t, {3, 4}, em, tol, tol)) << t;
    EXPECT_TRUE(matches(addcdiv(x, t1, t2, 0.5), t, {3, 4}, ed, tol, tol)) << t;
    EXPECT_TRUE(matches(lerp(x, end, 0.3), t, {3, 4}, el3, tol, tol)) << t;
    EXPECT_TRUE(matches(lerp(x, end, 0.7), t, {3, 4}, el7, tol, tol)) << t;
    Tensor y = x.clone();
    EXPECT_EQ(&addcmul_(y, t1, t2, 0.5), &y);
    EXPECT_TRUE(matches(y, t, {3, 4}, em, tol, tol)) << t;
    y = x.clone();
    const uint64_t v0 = y.version();
    addcdiv_(y, t1, t2, 0.5);
    EXPECT_GT(y.version(), v0);
    EXPECT_TRUE(matches(y, t, {3, 4}, ed, tol, tol)) << t;
    y = x.clone();
    EXPECT_EQ(&lerp_(y, end, 0.7), &y);
    EXPECT_TRUE(matches(y, t, {3, 4}, el7, tol, tol)) << t;
  }
  // Default value 1, integer inputs (addcdiv computes in float32).
  const Tensor i = make({1, 2, 3}, {3}, dev(), kInt32), j = make({2, 2, 4}, {3}, dev(), kInt32);
  EXPECT_TRUE(matches(addcmul(i, i, j), kInt32, {3}, {3, 6, 15}));
  EXPECT_TRUE(matches(addcmul(i, i, j, 2), kInt32, {3}, {5, 10, 27}));
  EXPECT_TRUE(matches(addcmul(i, i, j, 0.5), kFloat32, {3}, {2, 4, 9}));
  EXPECT_TRUE(matches(addcdiv(i, i, j), kFloat32, {3}, {1.5, 3, 3.75}));
  Tensor ic = i.clone();
  addcmul_(ic, i, j, 2);
  EXPECT_TRUE(matches(ic, kInt32, {3}, {5, 10, 27}));
  EXPECT_TRUE(throws<DTypeError>([&] { addcdiv_(ic, i, j); }, "[addcdiv_]"));
  EXPECT_TRUE(throws<DTypeError>([&] { addcmul_(ic, i, j, 0.5); }, "[addcmul_]"));
  EXPECT_TRUE(throws<DTypeError>([&] { lerp(i, i, 0.5); }, "float"));
  EXPECT_TRUE(throws<ShapeError>([&] { addcmul(i, make({1, 2}, {2}, dev()), i); }, "[addcmul]"));
  const Tensor bl = make({1}, {1}, dev(), kBool);
  EXPECT_TRUE(throws<DTypeError>([&] { addcmul(bl, bl, bl, true); }, "bool"));
}

TEST_P(PointwiseTest, AddWithAlpha) {
  const Tensor a = make({1, 2, 3}, {3}, dev()), b = make({0.5, 1, 2}, {3}, dev());
  EXPECT_TRUE(matches(add(a, b, 2), kFloat64, {3}, {2, 4, 7}));
  EXPECT_TRUE(matches(add(a, b, -0.5), kFloat64, {3}, {0.75, 1.5, 2}));
  EXPECT_TRUE(matches(add(a, b, 1), kFloat64, {3}, {1.5, 3, 5}));
  EXPECT_TRUE(matches(add(a, b.slice(0, 0, 1), 3), kFloat64, {3}, {2.5, 3.5, 4.5}));
  const Tensor i = make({1, 2, 3}, {3}, dev(), kInt64);
  EXPECT_TRUE(matches(add(i, i, 3), kInt64, {3}, {4, 8, 12}));
  Tensor c = a.clone();
  add_(c, b, 2);
  EXPECT_TRUE(matches(c, kFloat64, {3}, {2, 4, 7}));
  Tensor h = make({1, 2}, {2}, dev(), kFloat16);
  add_(h, make({1, 1}, {2}, dev(), kFloat16), 0.5);
  EXPECT_TRUE(matches(h, kFloat16, {2}, {1.5, 2.5}));
}

TEST_P(PointwiseTest, OperatorsAndCompoundAssignment) {
  const Tensor a = make({1, 2, 3}, {3}, dev()), b = make({4, 5, 6}, {3}, dev());
  EXPECT_TRUE(matches(a + b, kFloat64, {3}, {5, 7, 9}));
  EXPECT_TRUE(matches(a - b, kFloat64, {3}, {-3, -3, -3}));
  EXPECT_TRUE(matches(a * b, kFloat64, {3}, {4, 10, 18}));
  EXPECT_TRUE(matches(a / b, kFloat64, {3}, {0.25, 0.4, 0.5}));
  EXPECT_TRUE(matches(6 / a, kFloat64, {3}, {6, 3, 2}));
  EXPECT_TRUE(matches(10 - a, kFloat64, {3}, {9, 8, 7}));
  EXPECT_TRUE(matches(a == make({1, 0, 3}, {3}, dev()), kBool, {3}, {1, 0, 1}));
  Tensor c = a.clone();
  c += b;
  c -= 1;
  c *= 2;
  c /= make({2, 2, 2}, {3}, dev());
  EXPECT_TRUE(matches(c, kFloat64, {3}, {4, 6, 8}));
  c *= b;
  c += 1.5;
  c -= a;
  c /= 2;
  EXPECT_TRUE(matches(c, kFloat64, {3}, {8.25, 14.75, 23.25}));
}

// ---- gradients ----------------------------------------------------------------------------------

// Values away from the points where the ops are not differentiable (0, integers, halves).
Tensor grad_input(const Shape& shape, Domain d, Device dev, uint64_t seed) {
  std::vector<double> v = sample(numel(shape), d == Domain::Any || d == Domain::NonZero ? -2.4 : 0.25, 2.4, seed);
  for (auto& x : v) {
    const double frac = x - std::floor(x);
    if (std::fabs(frac - 0.5) < 0.1 || frac < 0.1 || frac > 0.9) x += 0.23;
    if (d == Domain::Positive && x < 0.25) x = 0.3;
    if (d == Domain::Unit) x = std::clamp(x / 3.0, -0.85, 0.85);
    if (d == Domain::AboveOne) x = 1.25 + x * 0.5;
  }
  return make(v, shape, dev).requires_grad_();
}

class PointwiseGradTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(PointwiseGradTest);

TEST_P(PointwiseGradTest, UnaryGradients) {
  for (const auto& op : kUnary) {
    const Tensor x = grad_input({2, 3}, unary_domain(op.name), dev(), 81);
    const Fn f = [&](const TensorList& in) { return TensorList{op.fn(in[0])}; };
    EXPECT_TRUE(gradcheck(f, {x})) << op.name;
    EXPECT_TRUE(gradgradcheck(f, {x})) << op.name;
    // The in-place variant on a non-leaf records the same derivative.
    const Fn f_ = [&](const TensorList& in) {
      Tensor y = in[0].clone();
      return TensorList{op.fn_(y)};
    };
    EXPECT_TRUE(gradcheck(f_, {x})) << op.name << "_";
    EXPECT_TRUE(gradgradcheck(f_, {x})) << op.name << "_";
    // Strided input.
    const Tensor xt = grad_input({3, 2}, unary_domain(op.name), dev(), 82);
    const Fn ft = [&](const TensorList& in) { return TensorList{op.fn(in[0].t())}; };
    EXPECT_TRUE(gradcheck(ft, {xt})) << op.name << " transposed";
    if (op.zero_grad) {
      Tensor y = op.fn(x);
      y.backward(ones_like(y));
      EXPECT_TRUE(matches(x.grad(), kFloat64, {2, 3}, std::vector<double>(6, 0.0))) << op.name;
    }
  }
}

TEST_P(PointwiseGradTest, BinaryGradientsWithBroadcasting) {
  for (const auto& op : kBinary) {
    const Tensor a = grad_input({2, 3}, binary_domain_a(op.name), dev(), 91);
    // Values of b differ from every a, are nonzero and make a / b no integer.
    const Tensor b = make({0.5, -1.1, 1.6}, {3}, dev()).requires_grad_();
    const Fn f = [&](const TensorList& in) { return TensorList{op.tt(in[0], in[1])}; };
    EXPECT_TRUE(gradcheck(f, {a, b})) << op.name;
    EXPECT_TRUE(gradgradcheck(f, {a, b})) << op.name;
    // The broadcast operand first (pow: a positive base).
    const Tensor b1 = make({0.5, op.name == "pow" ? 1.1 : -1.1, 1.6}, {3}, dev()).requires_grad_();
    const Tensor a1 = make({0.45, 0.7, 2.3, 1.35, 0.95, 1.85}, {2, 3}, dev()).requires_grad_();
    EXPECT_TRUE(gradcheck(f, {b1, a1})) << op.name << " reversed";
    // [3,1] op [1,4]: the engine sums each gradient back to its input's shape.
    const Tensor c = grad_input({3, 1}, binary_domain_a(op.name), dev(), 92);
    const Tensor d = make({0.5, -1.1, 1.6, 0.7}, {1, 4}, dev()).requires_grad_();
    EXPECT_TRUE(gradcheck(f, {c, d})) << op.name << " [3,1] [1,4]";
    Tensor y = op.tt(c, d);
    y.backward(ones_like(y));
    EXPECT_EQ(c.grad().sizes(), Shape({3, 1})) << op.name;
    EXPECT_EQ(d.grad().sizes(), Shape({1, 4})) << op.name;
    EXPECT_TRUE(c.grad().is_contiguous() && d.grad().is_contiguous()) << op.name;
    // Only one side requiring grad.
    const Fn fa = [&](const TensorList& in) { return TensorList{op.tt(in[0], b.detach())}; };
    EXPECT_TRUE(gradcheck(fa, {a})) << op.name << " a only";
    // Scalars on either side.
    const Fn fs = [&](const TensorList& in) { return TensorList{op.ts(in[0], 1.7)}; };
    EXPECT_TRUE(gradcheck(fs, {a})) << op.name << " tensor op scalar";
    EXPECT_TRUE(gradgradcheck(fs, {a})) << op.name << " tensor op scalar";
    const Fn fr = [&](const TensorList& in) { return TensorList{op.st(1.3, in[0])}; };
    EXPECT_TRUE(gradcheck(fr, {b})) << op.name << " scalar op tensor";
    EXPECT_TRUE(gradgradcheck(fr, {b})) << op.name << " scalar op tensor";
    // In place on a non-leaf.
    const Fn fi = [&](const TensorList& in) {
      Tensor y2 = in[0].clone();
      return TensorList{op.tt_(y2, in[1])};
    };
    EXPECT_TRUE(gradcheck(fi, {a, b})) << op.name << "_";
    EXPECT_TRUE(gradgradcheck(fi, {a, b})) << op.name << "_";
  }
}

TEST_P(PointwiseGradTest, PowGradientsAtZero) {
  // d/da 0^0 = 0 and d/db 0^b = 0 for b >= 0 (not NaN from 0 * inf or 0 * log 0), like PyTorch.
  const Tensor a = make({0, 2, 0, 0}, {4}, dev()).requires_grad_();
  const Tensor b = make({0, 3, 2, 1}, {4}, dev()).requires_grad_();
  Tensor y = pow(a, b);
  y.backward(ones_like(y));
  EXPECT_TRUE(matches(a.grad(), kFloat64, {4}, {0, 12, 0, 1}));
  EXPECT_TRUE(matches(b.grad(), kFloat64, {4}, {0, 8 * std::log(2.0), 0, 0}));
  // Polynomial features x^[0, 1, 2] at x = 0.
  const Tensor x = make({0}, {1}, dev()).requires_grad_();
  Tensor f = pow(x, make({0, 1, 2}, {3}, dev()));
  f.backward(make({1, 1, 1}, {3}, dev()));
  EXPECT_TRUE(matches(x.grad(), kFloat64, {1}, {1}));
  EXPECT_TRUE(gradgradcheck([](const TensorList& in) { return TensorList{pow(in[0], in[1])}; },
                           {make({0.5, 2}, {2}, dev()).requires_grad_(), make({0, 1.5}, {2}, dev()).requires_grad_()}));
}

TEST_P(PointwiseGradTest, NonDifferentiableOpsGiveNoGraph) {
  const Tensor x = make({1, 2}, {2}, dev()).requires_grad_();
  for (const auto& op : kCompare) EXPECT_FALSE(op.tt(x, x).requires_grad()) << op.name;
  for (const auto& op : kLogical) EXPECT_FALSE(op.tt(x, x).requires_grad()) << op.name;
  for (const auto& op : kPredicate) EXPECT_FALSE(op.fn(x).requires_grad()) << op.name;
  for (const auto& op : kUnary) EXPECT_TRUE(op.fn(x).requires_grad()) << op.name;
}

TEST_P(PointwiseGradTest, ParameterOpGradients) {
  const Tensor x = grad_input({2, 3}, Domain::Any, dev(), 101);
  const std::vector<std::pair<std::string, Fn>> fns = {
      {"gelu", [](const TensorList& in) { return TensorList{gelu(in[0])}; }},
      {"gelu tanh", [](const TensorList& in) { return TensorList{gelu(in[0], "tanh")}; }},
      {"leaky_relu", [](const TensorList& in) { return TensorList{leaky_relu(in[0], 0.2)}; }},
      {"elu", [](const TensorList& in) { return TensorList{elu(in[0], 1.5)}; }},
      {"softplus", [](const TensorList& in) { return TensorList{softplus(in[0], 2, 3)}; }},
      {"softplus default", [](const TensorList& in) { return TensorList{softplus(in[0])}; }},
      {"clamp", [](const TensorList& in) { return TensorList{clamp(in[0], -1.0, 1.0)}; }},
      {"clamp min", [](const TensorList& in) { return TensorList{clamp(in[0], 0.1)}; }},
      {"clamp max", [](const TensorList& in) { return TensorList{clamp(in[0], std::nullopt, 0.1)}; }},
      {"clamp_", [](const TensorList& in) { Tensor y = in[0].clone(); return TensorList{y.clamp_(-1.0, 1.0)}; }},
      {"masked_fill", [&](const TensorList& in) { return TensorList{masked_fill(in[0], make({1, 0, 1}, {3}, Device(in[0].device()), kBool), 2)}; }},
      {"masked_fill_", [&](const TensorList& in) {
         Tensor y = in[0].clone();
         return TensorList{y.masked_fill_(make({0, 1, 1}, {3}, Device(in[0].device()), kBool), 2)};
       }},
      {"add alpha", [](const TensorList& in) { return TensorList{add(in[0], in[0].t().t() * in[0], 2.5)}; }},
  };
  for (const auto& [name, f] : fns) {
    EXPECT_TRUE(gradcheck(f, {x})) << name;
    EXPECT_TRUE(gradgradcheck(f, {x})) << name;
  }
  // Softplus on both sides of the threshold (2 * x vs 3).
  const Tensor xs = make({1.3, 1.7, -0.4, 2.2}, {4}, dev()).requires_grad_();
  const Fn sp = [](const TensorList& in) { return TensorList{softplus(in[0], 2, 3)}; };
  EXPECT_TRUE(gradcheck(sp, {xs}));
  EXPECT_TRUE(gradgradcheck(sp, {xs}));
}

TEST_P(PointwiseGradTest, MultiInputOpGradients) {
  const Tensor x = grad_input({2, 3}, Domain::Any, dev(), 111);
  const Tensor t1 = grad_input({3}, Domain::Any, dev(), 112);
  const Tensor t2 = make({0.7, -1.3}, {2, 1}, dev()).requires_grad_();
  const Tensor lo = make({-1.9, 0.05, -0.1}, {3}, dev()).requires_grad_();
  const Tensor hi = make({2.0, 0.9}, {2, 1}, dev()).requires_grad_();
  const Tensor cond = make({1, 0, 1}, {3}, dev(), kBool);
  const std::vector<std::pair<std::string, Fn>> fns = {
      {"addcmul", [](const TensorList& in) { return TensorList{addcmul(in[0], in[1], in[2], 0.5)}; }},
      {"addcdiv", [](const TensorList& in) { return TensorList{addcdiv(in[0], in[1], in[2], -1.5)}; }},
      {"addcmul_", [](const TensorList& in) { Tensor y = in[0].clone(); return TensorList{addcmul_(y, in[1], in[2], 0.5)}; }},
      {"addcdiv_", [](const TensorList& in) { Tensor y = in[0].clone(); return TensorList{addcdiv_(y, in[1], in[2])}; }},
      {"lerp", [](const TensorList& in) { return TensorList{lerp(in[0], in[1], 0.3) + lerp(in[0], in[2], 0.8)}; }},
      {"lerp_", [](const TensorList& in) { Tensor y = in[0].clone(); return TensorList{lerp_(y, in[1], 0.3)}; }},
      {"where", [&](const TensorList& in) { return TensorList{where(cond, in[0], in[2]) + where(cond, in[1], 2.0)}; }},
      {"add alpha", [](const TensorList& in) { return TensorList{add(in[0], in[1], -2) + add(in[2], in[1], 0.5)}; }},
  };
  for (const auto& [name, f] : fns) {
    EXPECT_TRUE(gradcheck(f, {x, t1, t2})) << name;
    EXPECT_TRUE(gradgradcheck(f, {x, t1, t2})) << name;
  }
  const Fn ct = [](const TensorList& in) { return TensorList{clamp(in[0], in[1], in[2])}; };
  EXPECT_TRUE(gradcheck(ct, {x, lo, hi}));
  EXPECT_TRUE(gradgradcheck(ct, {x, lo, hi}));
  // Gradient shapes follow the inputs through broadcasting.
  Tensor y = addcdiv(x, t1, t2);
  y.backward(ones_like(y));
  EXPECT_EQ(t1.grad().sizes(), Shape({3}));
  EXPECT_EQ(t2.grad().sizes(), Shape({2, 1}));
  EXPECT_EQ(x.grad().sizes(), Shape({2, 3}));
}

}  // namespace
}  // namespace rtx::testing
