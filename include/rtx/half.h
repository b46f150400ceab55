// 16-bit floating point storage types (IEEE half and bfloat16), convertible to and from float on
// host and device. Arithmetic is done in float: every operator converts, computes and rounds back.
// On NVIDIA GPUs the conversions are the hardware's cvt instructions (round to nearest even, as the
// portable code below, which the host and AMD GPUs run); only NaN payloads may differ.
#pragma once

#include <cstdint>
#include <cstring>

#include "rtx/export.h"

namespace rtx {

namespace detail {

RTX_INLINE uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint32_t, f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

RTX_INLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(float, u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// IEEE binary16 <-> binary32, round to nearest even, with subnormals, infinities and NaN.
RTX_INLINE float half_bits_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    // Subnormal half: value = mant * 2^-24.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

RTX_INLINE uint16_t float_to_half_bits(float f) {
#if defined(__CUDA_ARCH__)
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    // Scale into the subnormal range with float arithmetic: exact rounding by the FPU.
    const float a = bits_float(absx);
    const float scaled = a * 16777216.0f;  // 2^24
    // Round half to even.
    uint32_t m = static_cast<uint32_t>(scaled);
    const float rem = scaled - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  const uint32_t mant_odd = (absx >> 13) & 1u;
  const uint32_t rounded = absx + 0xfffu + mant_odd;
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
#endif
}

RTX_INLINE float bf16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

RTX_INLINE uint16_t float_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7fffu + lsb) >> 16);
#endif
}

}  // namespace detail

struct Half {
  uint16_t bits = 0;
  Half() = default;
  RTX_INLINE Half(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT: implicit like float
  RTX_INLINE operator float() const { return detail::half_bits_to_float(bits); }
  static RTX_INLINE Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  RTX_INLINE BFloat16(float f) : bits(detail::float_to_bf16_bits(f)) {}  // NOLINT
  RTX_INLINE operator float() const { return detail::bf16_bits_to_float(bits); }
  static RTX_INLINE BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

}  // namespace rtx
