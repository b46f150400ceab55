// Scalar math of every pointwise op, written once for CPU and GPU. Each functor's call operator is
// a template over the compute type (float for the 16-bit floats, see opmath.h), so the same functor
// serves every dtype the op's rule allows.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "rtx/export.h"

namespace rtx::fn {

template <typename T>
RTX_INLINE bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

// take ? a : b. On the host through bit masks: compilers turn a ?: whose condition is read from
// memory into a branch per element, which mispredicts on data-dependent conditions; the masks
// vectorize.
template <typename T>
RTX_INLINE T select(bool take, T a, T b) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return take ? a : b;
#else
  using U = std::conditional_t<sizeof(T) == 8, uint64_t,
                               std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  static_assert(sizeof(U) == sizeof(T), "select: no integer type of this size");
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const U mask = static_cast<U>(U(0) - static_cast<U>(take));
  const U r = static_cast<U>((ua & mask) | (ub & static_cast<U>(~mask)));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
#endif
}

// ---- exp and tanh -------------------------------------------------------------------------------
// The host's float exp: straight-line arithmetic that the compiler vectorizes (the C library's expf
// is a call per element), within 1.2 ulp of the exact value. x = n ln 2 + r with n = round(x / ln 2)
// and |r| <= ln 2 / 2 (ln 2 in two parts, so n ln 2 is exact); e^r from its degree-7 Taylor
// polynomial (truncation below 6e-9 relative); the scale 2^n applied as two normal powers of two, so
// that overflow gives infinity and results below the normal range round once to a subnormal. x is
// clamped to [-104, 89] (e^x is 0 or infinity beyond); NaN stays NaN.
inline float host_expf(float x) {
  float c = x > -104.0f ? x : -104.0f;  // NaN takes -104 (the result is NaN below)
  c = c < 89.0f ? c : 89.0f;
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  const float p = 1.0f + r * (1.0f + r * (0.5f + r * (0.16666667f + r * (0.041666668f + r * (0.008333334f +
                                    r * (0.0013888889f + r * 1.984127e-04f))))));
  const int32_t n1 = static_cast<int32_t>(n) / 2, n2 = static_cast<int32_t>(n) - n1;  // each in [-75, 64]
  const int32_t bits1 = (n1 + 127) << 23, bits2 = (n2 + 127) << 23;
  float scale1, scale2;
  std::memcpy(&scale1, &bits1, sizeof(scale1));
  std::memcpy(&scale2, &bits2, sizeof(scale2));
  const float e = (p * scale1) * scale2;
  return x != x ? x : e;
}

// The host's float tanh, within 2 ulp of the exact value: |x| < 0.625 takes an odd polynomial
// (fitted to tanh(a) / a in a^2), larger ones 1 - 2 / (e^2|x| + 1) through host_expf (2|x| clamped
// to 20: tanh rounds to 1 from 9.1 on); the sign is copied back, so tanh(-0) is -0 and NaN stays NaN.
inline float host_tanhf(float x) {
  float a = std::fabs(x);
  const float z = a * a;
  const float small = a * (1.0f + z * (-0.33333274722099304f + z * (0.1333136111497879f + z * (-0.053735554218292236f +
                                       z * (0.020629500970244408f + z * -0.0056967646814882755f)))));
  const float y = 2.0f * a < 20.0f ? 2.0f * a : 20.0f;  // NaN takes 20 (the result is NaN below)
  const float large = 1.0f - 2.0f / (host_expf(y) + 1.0f);
  a = a < 0.625f ? small : large;
  a = x != x ? x : a;
  return std::copysign(a, x);
}

// std::exp(x), with host_expf for float on the host.
template <typename T>
RTX_INLINE T exp_of(T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return std::exp(x);
#else
  if constexpr (std::is_same_v<T, float>) return host_expf(x);
  else return std::exp(x);
#endif
}

// std::tanh(x), with host_tanhf for float on the host.
template <typename T>
RTX_INLINE auto tanh_of(T x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return std::tanh(x);
#else
  if constexpr (std::is_same_v<T, float>) return host_tanhf(x);
  else return std::tanh(x);
#endif
}

// 1 / (1 + e^-y). For float on the device through the hardware's approximate exp and divide:
// within 1e-5 relative of the exact value for |y| < 87 (beyond, 0 or 1), which is enough where the
// result is rounded to a 16-bit float.
template <typename T>
RTX_INLINE T approx_sigmoid(T y) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  if constexpr (std::is_same_v<T, float>) return __fdividef(1.0f, 1.0f + __expf(-y));
#endif
  return T(1) / (T(1) + exp_of(-y));
}

// ---- unary ------------------------------------------------------------------------------------
struct Neg {
  template <typename T> RTX_INLINE T operator()(T x) const { return static_cast<T>(-x); }
};
struct Abs {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(x < 0 ? -x : x);
    else return std::fabs(x);
  }
};
struct Sign {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return static_cast<T>(x != T(0));
    } else {
      if constexpr (std::is_floating_point_v<T>) { if (x != x) return x; }
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  }
};
struct Floor {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x; else return std::floor(x);
  }
};
struct Ceil {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x; else return std::ceil(x);
  }
};
// Rounds half to even, like PyTorch and numpy.
struct Round {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x; else return std::nearbyint(x);
  }
};
struct Trunc {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) return x; else return std::trunc(x);
  }
};
struct Square {
  template <typename T> RTX_INLINE T operator()(T x) const { return static_cast<T>(x * x); }
};
// NaN propagates.
struct Relu {
  template <typename T> RTX_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x; else return x < T(0) ? T(0) : x;
  }
};
struct Exp {
  template <typename T> RTX_INLINE T operator()(T x) const { return exp_of(x); }
};
struct Log {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::log(x); }
};
struct Log1p {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::log1p(x); }
};
struct Expm1 {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::expm1(x); }
};
struct Sqrt {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  template <typename T> RTX_INLINE T operator()(T x) const { return T(1) / std::sqrt(x); }
};
struct Reciprocal {
  template <typename T> RTX_INLINE T operator()(T x) const { return T(1) / x; }
};
struct Sin {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::sin(x); }
};
struct Cos {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::cos(x); }
};
struct Sigmoid {
  template <typename T> RTX_INLINE T operator()(T x) const { return T(1) / (T(1) + exp_of(-x)); }
};
struct Tanh {
  template <typename T> RTX_INLINE T operator()(T x) const { return tanh_of(x); }
};
struct Silu {
  template <typename T> RTX_INLINE T operator()(T x) const { return x / (T(1) + exp_of(-x)); }
};
struct Erf {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::erf(x); }
};
struct Erfc {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::erfc(x); }
};
struct Tan {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::tan(x); }
};
struct Asin {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::asin(x); }
};
struct Acos {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::acos(x); }
};
struct Atan {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::atan(x); }
};
struct Sinh {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::sinh(x); }
};
struct Cosh {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::cosh(x); }
};
struct Asinh {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::asinh(x); }
};
struct Acosh {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::acosh(x); }
};
struct Atanh {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::atanh(x); }
};
struct Log2 {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::log2(x); }
};
struct Log10 {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::log10(x); }
};
struct Exp2 {
  template <typename T> RTX_INLINE T operator()(T x) const { return std::exp2(x); }
};
// Exact GELU: x * Phi(x).
struct Gelu {
  template <typename T> RTX_INLINE T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  }
};
// GELU with the tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
// Where the result is rounded to a 16-bit float (`rounds_to_16bit`), the device computes it as
// x sigmoid(2u), which it is, with the hardware's approximate exp and divide: fewer instructions
// than tanh, so the 16-bit op runs at memory speed, and no cancellation in 1 + tanh(u) for very
// negative x. The host computes float the same way, as x / (1 + e^-2u) through host_expf: a third
// fewer instructions than through host_tanhf, and as accurate.
struct GeluTanh {
  bool rounds_to_16bit = false;
  template <typename T> RTX_INLINE T operator()(T x) const {
    const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    if (rounds_to_16bit) return x * approx_sigmoid(T(2) * inner);
#else
    if constexpr (std::is_same_v<T, float>) return x / (1.0f + host_expf(-2.0f * inner));
#endif
    return T(0.5) * x * (T(1) + tanh_of(inner));
  }
};
// g * d gelu(x) / dx, exact: Phi(x) + x phi(x).
struct GeluBackward {
  template <typename T> RTX_INLINE T operator()(T g, T x) const {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    const T pdf = T(0.39894228040143267794) * exp_of(T(-0.5) * x * x);
    return g * (cdf + x * pdf);
  }
};
// g * d gelu(x) / dx for the tanh approximation; with s = sigmoid(2u) = (1 + tanh(u)) / 2 it is
// g s (1 + 2 (1 - s) x du/dx), computed so on the device where the result is rounded to 16 bits and
// on the host for float (there with 1 - s as e^-2u s where s is near 1, which would cancel).
struct GeluTanhBackward {
  bool rounds_to_16bit = false;
  template <typename T> RTX_INLINE T operator()(T g, T x) const {
    const T k = T(0.79788456080286535588);
    const T inner = k * (x + T(0.044715) * x * x * x);
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    if (rounds_to_16bit) {
      const T s = approx_sigmoid(T(2) * inner);
      const T du_dx = k * (T(1) + T(3 * 0.044715) * x * x);
      return g * s * (T(1) + T(2) * (T(1) - s) * x * du_dx);
    }
#else
    if constexpr (std::is_same_v<T, float>) {
      const float e = host_expf(-2.0f * inner), s = 1.0f / (1.0f + e);
      const float one_minus_s = s > 0.5f ? e * s : 1.0f - s;  // e s where 1 - s would cancel
      const float du_dx = k * (1.0f + float(3 * 0.044715) * x * x);
      return g * s * (1.0f + 2.0f * one_minus_s * x * du_dx);
    }
#endif
    const T t = tanh_of(inner);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * k * x * (T(1) - t * t) * (T(1) + T(3 * 0.044715) * x * x));
  }
};
// The gradient of relu-like ops from the incoming gradient g and the output: g where out exceeds
// the threshold, else 0 (PyTorch's threshold_backward; a NaN output passes g, and a NaN or infinite
// g below the threshold gives 0).
struct ThresholdBackward {
  double threshold;
  template <typename T> RTX_INLINE T operator()(T g, T out) const { return out <= static_cast<T>(threshold) ? T(0) : g; }
};
struct LeakyRelu {
  double slope;
  template <typename T> RTX_INLINE T operator()(T x) const { return x > T(0) ? x : x * static_cast<T>(slope); }
};
struct Elu {
  double alpha;
  template <typename T> RTX_INLINE T operator()(T x) const { return x > T(0) ? x : static_cast<T>(alpha) * std::expm1(x); }
};
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.
struct Softplus {
  double beta, threshold;
  template <typename T> RTX_INLINE T operator()(T x) const {
    const T bx = x * static_cast<T>(beta);
    return bx > static_cast<T>(threshold) ? x : std::log1p(exp_of(bx)) / static_cast<T>(beta);
  }
};
// x clamped to [lo, hi], each bound applied only when given (has_lo, has_hi). NaN inputs stay NaN.
struct Clamp {
  double lo, hi;
  bool has_lo, has_hi;
  template <typename T> RTX_INLINE T operator()(T x) const {
    if (is_nan(x)) return x;
    if (has_lo && static_cast<double>(x) < lo) x = static_cast<T>(lo);
    if (has_hi && static_cast<double>(x) > hi) x = static_cast<T>(hi);
    return x;
  }
};
// Identity in the compute type: the functor of casts and copies.
struct Identity {
  template <typename T> RTX_INLINE T operator()(T x) const { return x; }
};

// ---- binary -----------------------------------------------------------------------------------
struct Add {
  template <typename T> RTX_INLINE T operator()(T a, T b) const { return static_cast<T>(a + b); }
};
struct Sub {
  template <typename T> RTX_INLINE T operator()(T a, T b) const { return static_cast<T>(a - b); }
};
struct Mul {
  template <typename T> RTX_INLINE T operator()(T a, T b) const { return static_cast<T>(a * b); }
};
// Integer division by zero gives 0 instead of trapping (only floats reach Div: it is true division).
struct Div {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return b == 0 ? T(0) : static_cast<T>(a / b);
    else return a / b;
  }
};
struct Pow {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>) {
        if (b < 0) return a == 1 ? T(1) : (a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0));
      }
      // Overflow wraps (two's complement), like PyTorch: multiply in the unsigned type.
      using U = std::make_unsigned_t<T>;
      U result = 1, base = static_cast<U>(a);
      for (T e = b; e > 0; e >>= 1) {
        if (e & 1) result = static_cast<U>(result * base);
        base = static_cast<U>(base * base);
      }
      return static_cast<T>(result);
    } else {
      return std::pow(a, b);
    }
  }
};
struct Maximum {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
    return a > b ? a : b;
  }
};
struct Minimum {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
    return a < b ? a : b;
  }
};
// Integer a % b, 0 when b is 0 and when b is -1 (the most negative a by -1 traps in hardware).
template <typename T>
RTX_INLINE T int_mod(T a, T b) {
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);
  }
  return b == 0 ? T(0) : static_cast<T>(a % b);
}
// C's fmod: the result has the sign of a. Integer b == 0 gives 0.
struct Fmod {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return int_mod(a, b);
    else return std::fmod(a, b);
  }
};
// Python's %: the result has the sign of b. Integer b == 0 gives 0.
struct Remainder {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      T r = int_mod(a, b);
      if constexpr (std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    } else {
      T r = std::fmod(a, b);
      if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
      return r;
    }
  }
};
// Python's //: the quotient rounded toward negative infinity, so a == (a // b) * b + a % b. Integer
// b == 0 gives 0; floats follow PyTorch (and CPython): the quotient is computed from fmod, so 1 // 0.1
// is 9, and a float b == 0 gives IEEE a / b.
struct FloorDivide {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        // The most negative a by -1 traps in hardware: negate in the unsigned type (it wraps).
        if (b == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
        const T q = static_cast<T>(a / b);
        return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
      } else {
        return static_cast<T>(a / b);
      }
    } else {
      if (b == T(0)) return a / b;
      const T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return std::copysign(T(0), a / b);
      T floordiv = std::floor(div);
      if (div - floordiv > T(0.5)) floordiv += T(1);
      return floordiv;
    }
  }
};
struct Atan2 {
  template <typename T> RTX_INLINE T operator()(T a, T b) const { return std::atan2(a, b); }
};
struct Hypot {
  template <typename T> RTX_INLINE T operator()(T a, T b) const { return std::hypot(a, b); }
};
// log(exp(a) + exp(b)) without overflow: the larger plus log1p(exp(-|a - b|)); equal infinities give
// themselves.
struct LogAddExp {
  template <typename T> RTX_INLINE T operator()(T a, T b) const {
    const T hi = a > b ? a : b;
    if (std::isinf(hi) && a == b) return a;
    return hi + std::log1p(std::exp(-std::fabs(a - b)));
  }
};

struct Eq { template <typename T> RTX_INLINE bool operator()(T a, T b) const { return a == b; } };
struct Ne { template <typename T> RTX_INLINE bool operator()(T a, T b) const { return a != b; } };
struct Lt { template <typename T> RTX_INLINE bool operator()(T a, T b) const { return a < b; } };
struct Le { template <typename T> RTX_INLINE bool operator()(T a, T b) const { return a <= b; } };
struct Gt { template <typename T> RTX_INLINE bool operator()(T a, T b) const { return a > b; } };
struct Ge { template <typename T> RTX_INLINE bool operator()(T a, T b) const { return a >= b; } };

struct LogicalAnd { RTX_INLINE bool operator()(bool a, bool b) const { return a && b; } };
struct LogicalOr { RTX_INLINE bool operator()(bool a, bool b) const { return a || b; } };
struct LogicalXor { RTX_INLINE bool operator()(bool a, bool b) const { return a != b; } };

struct LogicalNot { template <typename T> RTX_INLINE bool operator()(T x) const { return !static_cast<bool>(x); } };
struct IsNan { template <typename T> RTX_INLINE bool operator()(T x) const { return is_nan(x); } };
struct IsInf {
  template <typename T> RTX_INLINE bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::isinf(x); else return false;
  }
};
struct IsFinite {
  template <typename T> RTX_INLINE bool operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::isfinite(x); else return true;
  }
};

// ---- ternary ----------------------------------------------------------------------------------
struct Where {
  template <typename T> RTX_INLINE T operator()(bool c, T a, T b) const { return select(c, a, b); }
};
// x + value * t1 * t2
struct Addcmul {
  double value;
  template <typename T> RTX_INLINE T operator()(T x, T a, T b) const { return static_cast<T>(x + static_cast<T>(value) * a * b); }
};
// x + value * t1 / t2
struct Addcdiv {
  double value;
  template <typename T> RTX_INLINE T operator()(T x, T a, T b) const { return static_cast<T>(x + static_cast<T>(value) * a / b); }
};
// x + weight * (end - x)
struct Lerp {
  double weight;
  template <typename T> RTX_INLINE T operator()(T x, T end) const {
    const T w = static_cast<T>(weight);
    return w < T(0.5) ? x + w * (end - x) : end - (end - x) * (T(1) - w);
  }
};

}  // namespace rtx::fn
