// Counter-based random numbers, written once for every backend: Philox4x32-10 (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC'11) and the conversions of its 32-bit words to
// the values of each random op. Everything is header-only and usable from CUDA device code, and the
// floating-point math uses only IEEE-exact operations (+, -, *, /, sqrt, explicit fma) with every
// rounded product that feeds a sum written as an fma, so no compiler contraction can change a bit:
// a backend that evaluates these functions reproduces the CPU numbers exactly.
//
// Reproducibility contract. The default generator holds (seed, offset). A random op producing n
// values takes ceil(n / k) fresh counters starting at offset (and advances offset by that count);
// value i, in row-major logical order (independent of memory layout and thread count), is
//     draw(block(seed, offset + i / k))[i % k]
// where block(seed, c) is Philox4x32-10 with key {lo32(seed), hi32(seed)} and counter
// {lo32(c), hi32(c), 0, 0}, giving four words w0..w3, and k and draw are per op:
//   uniform, 16/32-bit floats  k = 4  value j from w_j: u = (w_j >> (32 - d)) * 2^-d, d = the dtype's
//                                     mantissa digits (24 float32, 11 float16, 8 bfloat16), so the
//                                     value is exact and below 1; then fma(u, to - from, from) in double
//   uniform, float64           k = 2  value j from r = w_{2j} | w_{2j+1} << 32: u = (r >> 11) * 2^-53
//   normal, 16/32-bit floats   k = 4  values 2p, 2p+1 from (w_{2p}, w_{2p+1}) by Box-Muller:
//                                     u1 = (2^32 - w_{2p}) * 2^-32 in (0, 1], u2 = w_{2p+1} * 2^-32,
//                                     rho = sqrt(-2 log u1), value 2p = rho cos(2 pi u2), 2p+1 = rho sin(2 pi u2)
//   normal, float64            k = 2  values 0, 1 by Box-Muller from u1 = (2^53 - (r0 >> 11)) * 2^-53,
//                                     u2 = (r1 >> 11) * 2^-53 (r0 from w0, w1; r1 from w2, w3);
//                                     normals are mean + std * z as fma(std, z, mean) in double
//   randint                    k = 2  value j = low + hi64(r_j * (high - low)) with r_j from w_{2j}, w_{2j+1}
//   bernoulli                  k = 4  value j = (w_j * 2^-32 < p), compared in double
//   randperm                   k = 2  key j = r_j; the permutation is the stable argsort of the keys
//   multinomial, replacement   k = 2  sample (row, s) is logical index row * num_samples + s, with the
//                                     float64 uniform u of that index: the first category whose
//                                     cumulative weight (summed left to right in double) exceeds
//                                     u * total (the last positive category if none does)
//   multinomial, no replacement k = 2 category (row, c) is logical index row * categories + c, with
//                                     key max(log(u1) / w, -DBL_MAX) (u1 as for float64 normals;
//                                     -inf where w = 0, below every positive weight);
//                                     the samples are the num_samples largest keys, in descending
//                                     order, ties to the lower category
// Values of other dtypes are computed in double (int64 for randint) and converted with static_cast
// (through float for float16/bfloat16). log, sin and cos are the polynomials below, not libm's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "rtx/export.h"
#include "rtx/half.h"

namespace rtx::philox {

// ---- the generator --------------------------------------------------------------------------------

// Four 32-bit words: a counter or an output block.
struct Block {
  uint32_t w[4];
};

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

RTX_INLINE void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

// Philox4x32 with 10 rounds, as Random123's philox4x32_R(10, ctr, key).
RTX_INLINE Block philox4x32_10(Block ctr, uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, ctr.w[0], &hi0, &lo0);
    mulhilo(kMul1, ctr.w[2], &hi1, &lo1);
    ctr = Block{{hi1 ^ ctr.w[1] ^ key0, lo1, hi0 ^ ctr.w[3] ^ key1, lo0}};
  }
  return ctr;
}

// The output block of counter c under seed.
RTX_INLINE Block block(uint64_t seed, uint64_t c) {
  return philox4x32_10(Block{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Counters an op producing n values at k values per counter takes.
RTX_INLINE uint64_t counters_for(int64_t n, int k) {
  return static_cast<uint64_t>((n + k - 1) / k);
}

// ---- integer and uniform conversions ----------------------------------------------------------------

// Words w_{2j} (low half) and w_{2j+1} (high half) as one 64-bit word.
RTX_INLINE uint64_t word64(const Block& b, int j) {
  return static_cast<uint64_t>(b.w[2 * j]) | (static_cast<uint64_t>(b.w[2 * j + 1]) << 32);
}

// The high 64 bits of the 128-bit product a * b.
RTX_INLINE uint64_t mulhi64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xffffffffu, a_hi = a >> 32, b_lo = b & 0xffffffffu, b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo, lo_hi = a_lo * b_hi, hi_lo = a_hi * b_lo, hi_hi = a_hi * b_hi;
  const uint64_t mid = (lo_lo >> 32) + (lo_hi & 0xffffffffu) + (hi_lo & 0xffffffffu);
  return hi_hi + (lo_hi >> 32) + (hi_lo >> 32) + (mid >> 32);
}

// Mantissa digits of the floating types (how many random bits a uniform of that type gets).
template <typename T>
struct Digits;
template <> struct Digits<float> { static constexpr int value = 24; };
template <> struct Digits<double> { static constexpr int value = 53; };
template <> struct Digits<Half> { static constexpr int value = 11; };
template <> struct Digits<BFloat16> { static constexpr int value = 8; };

// Values per counter of the floating ops (uniform, normal) for a dtype with `digits` mantissa digits.
RTX_INLINE constexpr int float_per_counter(int digits) { return digits > 24 ? 2 : 4; }

// Uniform on [0, 1) from the top `digits` (<= 32) bits of w; exact in double.
RTX_INLINE double uniform32(uint32_t w, int digits) {
  return static_cast<double>(w >> (32 - digits)) * (1.0 / static_cast<double>(uint64_t{1} << digits));
}
// Uniform on (0, 1] from all bits of w.
RTX_INLINE double uniform32_open0(uint32_t w) {
  return static_cast<double>((uint64_t{1} << 32) - w) * 0x1p-32;
}
// Uniform on [0, 1) from the top 53 bits of r.
RTX_INLINE double uniform53(uint64_t r) { return static_cast<double>(r >> 11) * 0x1p-53; }
// Uniform on (0, 1] from the top 53 bits of r.
RTX_INLINE double uniform53_open0(uint64_t r) {
  return static_cast<double>((uint64_t{1} << 53) - (r >> 11)) * 0x1p-53;
}

// ---- elementary functions (portable: the same bits everywhere) --------------------------------------

RTX_INLINE uint64_t double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint64_t, x);
#else
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
#endif
}

RTX_INLINE double bits_double(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(double, u);
#else
  double x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// Natural log of a positive, normal, finite x (within 1 ulp or so). With x = 2^e m, m in
// [sqrt(1/2), sqrt(2)), f = m - 1 and s = f / (2 + f): log m = f - (f^2/2 - s (f^2/2 + R)), where
// R = sum_k 2 s^(2k) / (2k + 1) is the atanh series, truncated where its terms drop below 2^-60.
RTX_INLINE double log_positive(double x) {
  const uint64_t bits = double_bits(x);
  const uint64_t mantissa = bits & 0x000fffffffffffffull;
  // Branch-free: halve m (and bump e) when it exceeds sqrt(2), whose mantissa bits these are.
  const int big = mantissa > 0x6a09e667f3bcdull;
  const int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023 + big;
  const double m = bits_double(mantissa | (static_cast<uint64_t>(1023 - big) << 52));
  const double f = m - 1.0;  // exact
  const double s = f / (2.0 + f);
  const double z = s * s;
  double r = 0x1.8618618618618p-4;  // 2/21
  r = std::fma(z, r, 0x1.af286bca1af28p-4);  // 2/19
  r = std::fma(z, r, 0x1.e1e1e1e1e1e1ep-4);  // 2/17
  r = std::fma(z, r, 0x1.1111111111111p-3);  // 2/15
  r = std::fma(z, r, 0x1.3b13b13b13b14p-3);  // 2/13
  r = std::fma(z, r, 0x1.745d1745d1746p-3);  // 2/11
  r = std::fma(z, r, 0x1.c71c71c71c71cp-3);  // 2/9
  r = std::fma(z, r, 0x1.2492492492492p-2);  // 2/7
  r = std::fma(z, r, 0x1.999999999999ap-2);  // 2/5
  r = std::fma(z, r, 0x1.5555555555555p-1);  // 2/3
  const double hfsq = (0.5 * f) * f;
  const double t = std::fma(-s, std::fma(z, r, hfsq), hfsq);  // f^2/2 - s (f^2/2 + R)
  const double log_m = f - t;
  // e ln 2 with ln 2 split so that e * hi is exact.
  const double de = static_cast<double>(e);
  return std::fma(de, 0x1.62e42fee00000p-1, std::fma(de, 0x1.a39ef35793c76p-33, log_m));
}

// sin(2 pi t) and cos(2 pi t) for t in [0, 1] with at most 53 significant bits below the binary
// point. t = q/4 + r exactly with |r| <= 1/8, then Taylor polynomials of x = 2 pi r on [-pi/4, pi/4].
RTX_INLINE void sincos_2pi(double t, double* sin_out, double* cos_out) {
  const int q = static_cast<int>(t * 4.0 + 0.5);  // t * 4 is exact
  const double x = (t - q * 0.25) * 0x1.921fb54442d18p+2;
  const double z = x * x;
  double ps = 0x1.952c77030ad4ap-49;  // 1/17!
  ps = std::fma(z, ps, -0x1.ae7f3e733b81fp-41);  // -1/15!
  ps = std::fma(z, ps, 0x1.6124613a86d09p-33);   // 1/13!
  ps = std::fma(z, ps, -0x1.ae64567f544e4p-26);  // -1/11!
  ps = std::fma(z, ps, 0x1.71de3a556c734p-19);   // 1/9!
  ps = std::fma(z, ps, -0x1.a01a01a01a01ap-13);  // -1/7!
  ps = std::fma(z, ps, 0x1.1111111111111p-7);    // 1/5!
  ps = std::fma(z, ps, -0x1.5555555555555p-3);   // -1/3!
  const double s = std::fma(x * z, ps, x);
  double pc = -0x1.6827863b97d97p-53;        // -1/18!
  pc = std::fma(z, pc, 0x1.ae7f3e733b81fp-45);    // 1/16!
  pc = std::fma(z, pc, -0x1.93974a8c07c9dp-37);   // -1/14!
  pc = std::fma(z, pc, 0x1.1eed8eff8d898p-29);    // 1/12!
  pc = std::fma(z, pc, -0x1.27e4fb7789f5cp-22);   // -1/10!
  pc = std::fma(z, pc, 0x1.a01a01a01a01ap-16);    // 1/8!
  pc = std::fma(z, pc, -0x1.6c16c16c16c17p-10);   // -1/6!
  pc = std::fma(z, pc, 0x1.5555555555555p-5);     // 1/4!
  pc = std::fma(z, pc, -0.5);                     // -1/2!
  const double c = std::fma(z, pc, 1.0);
  // Branch-free quadrant fix-up: odd quadrants swap sin and cos; then sign flips.
  const uint64_t swap = 0 - static_cast<uint64_t>(q & 1);
  const uint64_t sb = double_bits(s), cb = double_bits(c);
  *sin_out = bits_double(((sb & ~swap) | (cb & swap)) ^ (static_cast<uint64_t>(q & 2) << 62));
  *cos_out = bits_double(((cb & ~swap) | (sb & swap)) ^ (static_cast<uint64_t>((q + 1) & 2) << 62));
}

// Two independent standard normals from u1 in (0, 1] and u2 in [0, 1) (Box-Muller).
RTX_INLINE void box_muller(double u1, double u2, double* z0, double* z1) {
  const double rho = std::sqrt(-2.0 * log_positive(u1));
  double s, c;
  sincos_2pi(u2, &s, &c);
  *z0 = rho * c;
  *z1 = rho * s;
}

// ---- per-op draws: the k values of one counter's block ----------------------------------------------
// Each draw has kPerCounter (k above), value_type and operator()(block, values[k]).

// Uniform on [from, from + range) for a dtype with Digits mantissa digits.
template <int D>
struct UniformDraw {
  static constexpr int kPerCounter = float_per_counter(D);
  using value_type = double;
  double from, range;
  RTX_INLINE void operator()(const Block& b, double* v) const {
    for (int j = 0; j < kPerCounter; ++j) {
      double u;
      if constexpr (kPerCounter == 4) u = uniform32(b.w[j], D);
      else u = uniform53(word64(b, j));
      v[j] = std::fma(u, range, from);
    }
  }
};

// Normal with mean and std for a dtype with Digits mantissa digits.
template <int D>
struct NormalDraw {
  static constexpr int kPerCounter = float_per_counter(D);
  using value_type = double;
  double mean, stddev;
  RTX_INLINE void operator()(const Block& b, double* v) const {
    if constexpr (kPerCounter == 4) {
      box_muller(uniform32_open0(b.w[0]), uniform32(b.w[1], 32), &v[0], &v[1]);
      box_muller(uniform32_open0(b.w[2]), uniform32(b.w[3], 32), &v[2], &v[3]);
    } else {
      box_muller(uniform53_open0(word64(b, 0)), uniform53(word64(b, 1)), &v[0], &v[1]);
    }
    for (int j = 0; j < kPerCounter; ++j) v[j] = std::fma(stddev, v[j], mean);
  }
};

// Integers uniform on [low, low + range), range >= 1.
struct RandintDraw {
  static constexpr int kPerCounter = 2;
  using value_type = int64_t;
  int64_t low;
  uint64_t range;
  RTX_INLINE void operator()(const Block& b, int64_t* v) const {
    for (int j = 0; j < kPerCounter; ++j)
      v[j] = static_cast<int64_t>(static_cast<uint64_t>(low) + mulhi64(word64(b, j), range));
  }
};

// Uniforms on [0, 1) with 32 bits, compared against the probability of each element.
struct BernoulliDraw {
  static constexpr int kPerCounter = 4;
  using value_type = double;
  RTX_INLINE void operator()(const Block& b, double* v) const {
    for (int j = 0; j < kPerCounter; ++j) v[j] = uniform32(b.w[j], 32);
  }
};

// Raw 64-bit sort keys (randperm).
struct KeyDraw {
  static constexpr int kPerCounter = 2;
  using value_type = uint64_t;
  RTX_INLINE void operator()(const Block& b, uint64_t* v) const {
    for (int j = 0; j < kPerCounter; ++j) v[j] = word64(b, j);
  }
};

// log(u) for u uniform on (0, 1] (the exponential race of multinomial sampling without replacement).
struct LogUniformDraw {
  static constexpr int kPerCounter = 2;
  using value_type = double;
  RTX_INLINE void operator()(const Block& b, double* v) const {
    for (int j = 0; j < kPerCounter; ++j) v[j] = log_positive(uniform53_open0(word64(b, j)));
  }
};

}  // namespace rtx::philox
