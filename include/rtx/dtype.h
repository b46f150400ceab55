// Element types and PyTorch's type promotion rules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

#include "rtx/export.h"
#include "rtx/half.h"

namespace rtx {

// Ordered from the lowest to the highest promotion category: bool < integers < floats.
enum class DType : uint8_t { Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64 };
constexpr int kNumDTypes = 10;

constexpr DType kBool = DType::Bool;
constexpr DType kUInt8 = DType::UInt8;
constexpr DType kInt8 = DType::Int8;
constexpr DType kInt16 = DType::Int16;
constexpr DType kInt32 = DType::Int32;
constexpr DType kInt64 = DType::Int64;
constexpr DType kFloat16 = DType::Float16;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;

// "float32", "int64", ...
RTX_API const char* dtype_name(DType t);
RTX_API std::ostream& operator<<(std::ostream& os, DType t);

constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Int16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
// Integer types, not counting bool.
constexpr bool is_integral(DType t) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64;
}

// The largest finite value of a dtype, as a double (int64's rounds up to 2^63); its lowest is
// -largest_value for floats, -largest_value - 1 for signed integers and 0 for uint8 and bool.
constexpr double largest_value(DType t) {
  switch (t) {
    case DType::Bool: return 1.0;
    case DType::UInt8: return 255.0;
    case DType::Int8: return 127.0;
    case DType::Int16: return 32767.0;
    case DType::Int32: return 2147483647.0;
    case DType::Int64: return 9223372036854775807.0;
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    case DType::Float32: return 3.4028234663852886e38;
    case DType::Float64: return 1.7976931348623157e308;
  }
  return 0.0;
}

// The smallest type both a and b convert to without losing their category (torch.promote_types).
RTX_API DType promote_types(DType a, DType b);

// The default dtype a process starts with.
constexpr DType kDefaultFloat = DType::Float32;
// The default dtype (torch.get_default_dtype): the dtype of float tensors created without one
// (zeros, rand, arange(0.5, ...), tensor({1.5}), full with a float value) and the float type
// integer inputs become in ops such as exp or true division. Process-wide.
RTX_API DType get_default_dtype();
// Sets the default dtype; DTypeError unless dtype is a floating type.
RTX_API void set_default_dtype(DType dtype);

// C++ type <-> DType.
template <typename T>
struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <typename T>
constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace rtx
