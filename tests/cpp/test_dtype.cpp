// DTypes and their promotion (promote_types, result_type tiers), Scalar kinds, the 16-bit float
// conversions (exhaustive over every bit pattern, on the host and the GPU) and Device parsing.
#include <cmath>
#include <cstring>
#include <sstream>

#include "test_utils.h"

namespace rtx {
namespace {

using testing::throws;

const DType kAll[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

TEST(DType, NamesSizesAndCategories) {
  const char* names[] = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
  const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_STREQ(dtype_name(kAll[i]), names[i]);
    EXPECT_EQ(element_size(kAll[i]), sizes[i]);
    std::ostringstream os;
    os << kAll[i];
    EXPECT_EQ(os.str(), names[i]);
    EXPECT_EQ(is_floating(kAll[i]), i >= 6) << names[i];
    EXPECT_EQ(is_integral(kAll[i]), i >= 1 && i <= 5) << names[i];
  }
  EXPECT_EQ(dtype_of_v<bool>, kBool);
  EXPECT_EQ(dtype_of_v<uint8_t>, kUInt8);
  EXPECT_EQ(dtype_of_v<int8_t>, kInt8);
  EXPECT_EQ(dtype_of_v<int16_t>, kInt16);
  EXPECT_EQ(dtype_of_v<int32_t>, kInt32);
  EXPECT_EQ(dtype_of_v<int64_t>, kInt64);
  EXPECT_EQ(dtype_of_v<Half>, kFloat16);
  EXPECT_EQ(dtype_of_v<BFloat16>, kBFloat16);
  EXPECT_EQ(dtype_of_v<float>, kFloat32);
  EXPECT_EQ(dtype_of_v<double>, kFloat64);
  EXPECT_EQ(kDefaultFloat, kFloat32);
}

// torch.promote_types over the library's dtypes, row and column order as kAll.
TEST(DType, PromoteTypesMatchesPyTorch) {
  constexpr DType b1 = kBool, u1 = kUInt8, i1 = kInt8, i2 = kInt16, i4 = kInt32, i8 = kInt64, f2 = kFloat16,
                  bf = kBFloat16, f4 = kFloat32, f8 = kFloat64;
  const DType table[kNumDTypes][kNumDTypes] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  for (int i = 0; i < kNumDTypes; ++i)
    for (int j = 0; j < kNumDTypes; ++j)
      EXPECT_EQ(promote_types(kAll[i], kAll[j]), table[i][j]) << dtype_name(kAll[i]) << " + " << dtype_name(kAll[j]);
}

Tensor dimensioned(DType dt) { return zeros({2}, dt); }
Tensor zero_d(DType dt) { return zeros({}, dt); }

TEST(DType, ResultTypeTensorAndScalar) {
  // A Python scalar never upcasts a tensor within its category; a higher category gives the default
  // dtype of that category (float32 for floats, int64 for ints).
  EXPECT_EQ(result_type(dimensioned(kInt32), 2.5), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kInt64), 2.5), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kUInt8), 2.5), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kFloat16), 2.5), kFloat16);
  EXPECT_EQ(result_type(dimensioned(kBFloat16), 1e10), kBFloat16);
  EXPECT_EQ(result_type(dimensioned(kFloat64), 2.5), kFloat64);
  EXPECT_EQ(result_type(dimensioned(kInt8), 1000), kInt8);
  EXPECT_EQ(result_type(dimensioned(kUInt8), -1), kUInt8);
  EXPECT_EQ(result_type(dimensioned(kFloat16), 7), kFloat16);
  EXPECT_EQ(result_type(dimensioned(kBool), 1), kInt64);
  EXPECT_EQ(result_type(dimensioned(kBool), 2.5), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kBool), true), kBool);
  EXPECT_EQ(result_type(dimensioned(kInt32), true), kInt32);
  EXPECT_EQ(result_type(dimensioned(kFloat16), false), kFloat16);
  // A 0-d tensor is below a dimensioned one but above scalars.
  EXPECT_EQ(result_type(zero_d(kInt32), 2.5), kFloat32);
  EXPECT_EQ(result_type(zero_d(kFloat16), 2.5), kFloat16);
  EXPECT_EQ(result_type(zero_d(kFloat64), 2.5), kFloat64);
  EXPECT_EQ(result_type(zero_d(kInt8), 1000), kInt8);
  EXPECT_EQ(result_type(zero_d(kBool), 3), kInt64);
  // Float scalars of any C++ type count as the default float.
  EXPECT_EQ(result_type(dimensioned(kInt32), 2.5f), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kInt32), Half(1.0f)), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kInt8), int64_t{1} << 40), kInt8);
}

TEST(DType, ResultTypeTwoTensors) {
  // Dimensioned with dimensioned: promote_types.
  EXPECT_EQ(result_type(dimensioned(kInt32), dimensioned(kFloat16)), kFloat16);
  EXPECT_EQ(result_type(dimensioned(kUInt8), dimensioned(kInt8)), kInt16);
  EXPECT_EQ(result_type(dimensioned(kFloat16), dimensioned(kBFloat16)), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kInt64), dimensioned(kFloat64)), kFloat64);
  // Dimensioned with 0-d: the 0-d tensor counts only when its category is higher, and then with its
  // own dtype (not the category's default).
  EXPECT_EQ(result_type(dimensioned(kFloat16), zero_d(kFloat64)), kFloat16);
  EXPECT_EQ(result_type(zero_d(kFloat64), dimensioned(kFloat16)), kFloat16);
  EXPECT_EQ(result_type(dimensioned(kFloat32), zero_d(kFloat64)), kFloat32);
  EXPECT_EQ(result_type(dimensioned(kInt32), zero_d(kFloat64)), kFloat64);
  EXPECT_EQ(result_type(dimensioned(kInt32), zero_d(kFloat16)), kFloat16);
  EXPECT_EQ(result_type(dimensioned(kInt8), zero_d(kInt64)), kInt8);
  EXPECT_EQ(result_type(dimensioned(kUInt8), zero_d(kInt8)), kUInt8);
  EXPECT_EQ(result_type(dimensioned(kBool), zero_d(kInt32)), kInt32);
  EXPECT_EQ(result_type(dimensioned(kBool), zero_d(kUInt8)), kUInt8);
  EXPECT_EQ(result_type(dimensioned(kBool), zero_d(kBFloat16)), kBFloat16);
  EXPECT_EQ(result_type(dimensioned(kInt64), zero_d(kBool)), kInt64);
  EXPECT_EQ(result_type(dimensioned(kFloat16), zero_d(kInt64)), kFloat16);
  // An empty dimensioned tensor is still dimensioned.
  EXPECT_EQ(result_type(zeros({0}, kInt8), zero_d(kInt64)), kInt8);
  // Two 0-d tensors: promote_types.
  EXPECT_EQ(result_type(zero_d(kInt32), zero_d(kFloat16)), kFloat16);
  EXPECT_EQ(result_type(zero_d(kFloat16), zero_d(kFloat64)), kFloat64);
  EXPECT_EQ(result_type(zero_d(kUInt8), zero_d(kInt8)), kInt16);
  EXPECT_EQ(result_type(zero_d(kBool), zero_d(kBool)), kBool);
}

TEST(DType, ResultTypeDecidesOpDTypes) {
  // The pointwise ops follow result_type, including with Scalars on either side.
  EXPECT_EQ((dimensioned(kInt32) + 2.5).dtype(), kFloat32);
  EXPECT_EQ((2.5 * dimensioned(kFloat16)).dtype(), kFloat16);
  EXPECT_EQ((dimensioned(kBool) + 1).dtype(), kInt64);
  EXPECT_EQ((dimensioned(kInt8) + 1000).dtype(), kInt8);
  EXPECT_EQ((dimensioned(kFloat16) + zero_d(kFloat64)).dtype(), kFloat16);
  EXPECT_EQ((dimensioned(kInt32) * zero_d(kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((zero_d(kInt32) + 2.5).dtype(), kFloat32);
  EXPECT_EQ((zero_d(kInt32) + 2.5).dim(), 0);
  // Overflowing scalars wrap like PyTorch's (int8: 1 + 1000 = 1001 = -23 mod 256).
  const std::vector<int8_t> one = {1};
  EXPECT_EQ((from_buffer(one.data(), {1}, kInt8) + 1000).item<int64_t>(), -23);
}

// ---- Scalar -----------------------------------------------------------------------------------

TEST(ScalarKinds, KindDTypeAndConversions) {
  EXPECT_TRUE(Scalar(true).is_bool());
  EXPECT_EQ(Scalar(true).dtype(), kBool);
  EXPECT_TRUE(Scalar(3).is_integral());
  EXPECT_EQ(Scalar(uint8_t{3}).dtype(), kInt64);
  EXPECT_EQ(Scalar(int64_t{-3}).dtype(), kInt64);
  EXPECT_TRUE(Scalar(2.5f).is_floating());
  EXPECT_EQ(Scalar(2.5).dtype(), kFloat32);
  EXPECT_EQ(Scalar(BFloat16(2.0f)).dtype(), kFloat32);
  EXPECT_EQ(Scalar().to_int(), 0);
  EXPECT_TRUE(Scalar().is_integral());
  EXPECT_EQ(Scalar(-2.75).to_int(), -2);
  EXPECT_EQ(Scalar(-2.75).to<int8_t>(), -2);
  EXPECT_EQ(Scalar(7).to_double(), 7.0);
  EXPECT_TRUE(Scalar(0.5).to_bool());
  EXPECT_FALSE(Scalar(0).to<bool>());
  const int64_t big = (int64_t{1} << 62) + 1;
  EXPECT_EQ(Scalar(big).to_int(), big);  // integers are kept exactly
  std::ostringstream os;
  os << Scalar(true) << " " << Scalar(-4) << " " << Scalar(0.5);
  EXPECT_EQ(os.str(), "True -4 0.5");
}

// ---- float16 / bfloat16 -----------------------------------------------------------------------

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 decoded from its fields with double arithmetic.
double decode_half(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp(mant, -24);
  else v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

// The nearest value with `digits` significant bits (ties to even), exponent at least min_exp (the
// subnormal range below), saturating to inf at max_finite + half an ulp. Computed in double.
double round_to_format(double v, int digits, int min_exp, double max_finite) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  const double a = std::fabs(v);
  const int e = std::max(std::ilogb(a), min_exp);
  const double ulp = std::ldexp(1.0, e - (digits - 1));
  const double r = std::nearbyint(a / ulp) * ulp;  // default rounding mode: ties to even
  const double max_ulp = std::ldexp(1.0, std::ilogb(max_finite) - (digits - 1));
  const double out = a >= max_finite + max_ulp / 2 ? INFINITY : r;
  return v < 0 ? -out : out;
}
double round_half(float f) { return round_to_format(f, 11, -14, 65504.0); }
double round_bf16(float f) { return round_to_format(f, 8, -126, 3.3895313892515355e+38); }

TEST(Half, EveryBitPatternDecodesAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = static_cast<float>(Half::from_bits(h));
    const double want = decode_half(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      const uint16_t back = Half(f).bits;
      ASSERT_EQ(back & 0x7c00, 0x7c00) << std::hex << b;  // still NaN, sign kept
      ASSERT_NE(back & 0x3ff, 0) << std::hex << b;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << std::hex << b;
    ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << b;
    ASSERT_EQ(Half(f).bits, h) << std::hex << b;
    ASSERT_EQ(detail::float_to_half_bits(detail::half_bits_to_float(h)), h) << std::hex << b;
  }
}

TEST(BFloat16, EveryBitPatternDecodesAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = static_cast<float>(BFloat16::from_bits(h));
    ASSERT_EQ(bits_of(f), b << 16) << std::hex << b;  // bfloat16 is the top half of a float
    const uint16_t back = BFloat16(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(static_cast<float>(BFloat16::from_bits(back)))) << std::hex << b;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << b;
    } else {
      ASSERT_EQ(back, h) << std::hex << b;
    }
  }
}

// Checks float -> 16-bit conversion of f against the double reference (value and sign of zero).
template <typename T>
::testing::AssertionResult rounds_like_reference(float f, double (*reference)(float)) {
  const float got = static_cast<float>(T(f));
  const double want = reference(f);
  if (std::isnan(want) ? std::isnan(got) : (got == want && std::signbit(got) == std::signbit(f)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::hexfloat << f << " -> " << got << ", expected " << want;
}

// Floats around every 16-bit value: the value, the midpoints to its neighbours (ties) and the
// floats just beside them, plus a sweep over the whole float range.
template <typename T>
void check_rounding(double (*reference)(float), float (*decode)(uint16_t)) {
  for (uint32_t b = 0; b < 0x8000; ++b) {
    const float lo = decode(static_cast<uint16_t>(b)), hi = decode(static_cast<uint16_t>(b + 1));
    if (!std::isfinite(lo)) break;
    const float mid = std::isfinite(hi) ? (lo + hi) / 2 : lo;
    for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      ASSERT_TRUE(rounds_like_reference<T>(f, reference));
      ASSERT_TRUE(rounds_like_reference<T>(-f, reference));
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) ASSERT_TRUE(rounds_like_reference<T>(float_of(static_cast<uint32_t>(u)), reference));
}

TEST(Half, FloatRoundsToNearestEven) {
  check_rounding<Half>(round_half, detail::half_bits_to_float);
  // Specific cases: ties to even, overflow to inf, subnormals, NaN.
  EXPECT_EQ(Half(2049.0f).bits, Half(2048.0f).bits);
  EXPECT_EQ(static_cast<float>(Half(2051.0f)), 2052.0f);
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);
  EXPECT_EQ(Half(-1e6f).bits, 0xfc00);
  EXPECT_EQ(Half(INFINITY).bits, 0x7c00);
  EXPECT_EQ(Half(5.9604644775390625e-8f).bits, 0x0001);           // 2^-24, smallest subnormal
  EXPECT_EQ(Half(2.98023223876953125e-8f).bits, 0x0000);          // 2^-25: tie, to even (zero)
  EXPECT_EQ(Half(std::nextafter(2.98023223876953125e-8f, 1.0f)).bits, 0x0001);
  EXPECT_EQ(Half(8.940696716308594e-8f).bits, 0x0002);            // 1.5 * 2^-24: tie, to even (2)
  EXPECT_EQ(Half(6.097555160522461e-5f).bits, 0x03ff);            // largest subnormal
  EXPECT_EQ(Half(6.103515625e-5f).bits, 0x0400);                   // smallest normal
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  EXPECT_EQ(Half(1e-10f).bits, 0x0000);
  EXPECT_EQ(Half(-1e-10f).bits, 0x8000);
  EXPECT_EQ(Half(NAN).bits & 0x7e00, 0x7e00);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(-NAN))));
}

TEST(BFloat16, FloatRoundsToNearestEven) {
  check_rounding<BFloat16>(round_bf16, detail::bf16_bits_to_float);
  EXPECT_EQ(static_cast<float>(BFloat16(257.0f)), 256.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(259.0f)), 260.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(0.1f)), 0.10009765625f);
  EXPECT_EQ(BFloat16(3.39e38f).bits, 0x7f7f);
  EXPECT_EQ(BFloat16(3.4e38f).bits, 0x7f80);  // above the largest value plus half an ulp
  EXPECT_EQ(BFloat16(3.4028235e38f).bits, 0x7f80);  // FLT_MAX rounds up to inf
  EXPECT_EQ(BFloat16(-INFINITY).bits, 0xff80);
  EXPECT_EQ(BFloat16(1e-45f).bits, 0x0000);  // the smallest float subnormal rounds to zero
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
  // A NaN whose payload sits in the low half stays NaN (does not become inf).
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(float_of(0x7f800001u)))));
}

// The GPU's conversions (the hardware's cvt instructions) against the host's portable ones: float
// -> 16 bits over every 16-bit value, the ties between neighbours and the floats beside them, a sweep
// of the float range and the special values; 16 bits -> float over every bit pattern. The same
// bits, and NaN for NaN (payloads may differ).
template <typename T>
void check_cuda_conversions(DType dtype, float (*decode)(uint16_t)) {
  std::vector<float> floats = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 3.4028235e38f, 1e-45f, float_of(0x7f800001u)};
  for (uint32_t b = 0; b < 0x8000; ++b) {
    const float lo = decode(static_cast<uint16_t>(b)), hi = decode(static_cast<uint16_t>(b + 1));
    if (!std::isfinite(lo)) break;
    const float mid = std::isfinite(hi) ? (lo + hi) / 2 : lo;
    for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      floats.push_back(f);
      floats.push_back(-f);
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) floats.push_back(float_of(static_cast<uint32_t>(u)));
  const auto n = static_cast<int64_t>(floats.size());
  const Tensor narrowed = from_buffer(floats.data(), {n}, kFloat32, Device(kCUDA, 0)).to(dtype).cpu();
  const auto* got = static_cast<const uint16_t*>(narrowed.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t want = T(floats[static_cast<size_t>(i)]).bits;
    if (std::isnan(floats[static_cast<size_t>(i)]))
      ASSERT_TRUE(std::isnan(decode(got[i]))) << std::hexfloat << floats[static_cast<size_t>(i)];
    else
      ASSERT_EQ(got[i], want) << std::hexfloat << floats[static_cast<size_t>(i)];
  }

  std::vector<uint16_t> patterns(65536);
  for (uint32_t b = 0; b < 65536; ++b) patterns[b] = static_cast<uint16_t>(b);
  const Tensor widened = from_buffer(patterns.data(), {65536}, dtype, Device(kCUDA, 0)).to(kFloat32).cpu();
  const auto* wide = static_cast<const float*>(widened.data_ptr());
  for (uint32_t b = 0; b < 65536; ++b) {
    const float want = decode(static_cast<uint16_t>(b));
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(wide[b])) << std::hex << b;
    else
      ASSERT_EQ(bits_of(wide[b]), bits_of(want)) << std::hex << b;
  }
}

TEST(Half, CudaConversionsMatchTheHost) {
  RTX_SKIP_IF_UNAVAILABLE(Device(kCUDA, 0));
  check_cuda_conversions<Half>(kFloat16, detail::half_bits_to_float);
}

TEST(BFloat16, CudaConversionsMatchTheHost) {
  RTX_SKIP_IF_UNAVAILABLE(Device(kCUDA, 0));
  check_cuda_conversions<BFloat16>(kBFloat16, detail::bf16_bits_to_float);
}

// ---- Device -----------------------------------------------------------------------------------

TEST(DeviceParsing, ValidSpecs) {
  EXPECT_EQ(Device("cpu"), Device(kCPU));
  EXPECT_EQ(Device("cpu").index, 0);
  EXPECT_EQ(Device("cuda"), Device(kCUDA, 0));
  EXPECT_EQ(Device("cuda:0"), Device(kCUDA, 0));
  EXPECT_EQ(Device("cuda:1"), Device(kCUDA, 1));
  EXPECT_EQ(Device(std::string("cuda:15")).index, 15);
  EXPECT_TRUE(Device("cuda:3").is_cuda());
  EXPECT_TRUE(Device("cpu").is_cpu());
  EXPECT_EQ(Device(kCPU, 3).index, 0);  // the CPU has one index
  EXPECT_NE(Device(kCUDA, 0), Device(kCUDA, 1));
  EXPECT_NE(Device(kCUDA, 0), Device(kCPU));
  EXPECT_EQ(Device(kCPU).str(), "cpu");
  EXPECT_EQ(Device(kCUDA, 2).str(), "cuda:2");
  EXPECT_EQ(Device("cuda").str(), "cuda:0");
  std::ostringstream os;
  os << Device(kCUDA, 1) << " " << Device(kCPU);
  EXPECT_EQ(os.str(), "cuda:1 cpu");
  EXPECT_STREQ(device_type_name(kCUDA), "cuda");
  EXPECT_STREQ(device_type_name(kCPU), "cpu");
}

TEST(DeviceParsing, InvalidSpecs) {
  for (const char* spec : {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1a", " cuda", "cuda:0 ", "cuda0",
                           "cuda:1:2", "mps"}) {
    EXPECT_TRUE(throws<ValueError>([&] { Device d(spec); }, std::string("invalid device string '") + spec + "'"))
        << "'" << spec << "'";
  }
}

}  // namespace
}  // namespace rtx
