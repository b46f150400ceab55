// Runtime dtype -> compile-time type, for kernels: RTX_DISPATCH_FLOATS(dtype, "op", [&] { use scalar_t; })
// Host-only; shared by the CPU and CUDA backends.
#pragma once

#include <cstdint>

#include "core/check.h"
#include "kernels/common/opmath.h"
#include "rtx/dtype.h"
#include "rtx/half.h"

#define RTX_DTYPE_CASE(enum_name, type, ...) \
  case ::rtx::DType::enum_name: {            \
    using scalar_t = type;                   \
    __VA_ARGS__();                           \
    break;                                   \
  }

#define RTX_DTYPE_DEFAULT(dtype, op) \
  default: RTX_THROW(::rtx::DTypeError, "[{}] not implemented for dtype {}", op, dtype)

// float32, float64, float16, bfloat16
#define RTX_DISPATCH_FLOATS(dtype, op, ...)               \
  switch (dtype) {                                        \
    RTX_DTYPE_CASE(Float32, float, __VA_ARGS__)           \
    RTX_DTYPE_CASE(Float64, double, __VA_ARGS__)          \
    RTX_DTYPE_CASE(Float16, ::rtx::Half, __VA_ARGS__)     \
    RTX_DTYPE_CASE(BFloat16, ::rtx::BFloat16, __VA_ARGS__) \
    RTX_DTYPE_DEFAULT(dtype, op);                         \
  }

// uint8, int8, int16, int32, int64
#define RTX_DISPATCH_INTS_CASES(...)           \
  RTX_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)  \
  RTX_DTYPE_CASE(Int8, int8_t, __VA_ARGS__)    \
  RTX_DTYPE_CASE(Int16, int16_t, __VA_ARGS__)  \
  RTX_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)  \
  RTX_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)

#define RTX_DISPATCH_FLOATS_CASES(...)                     \
  RTX_DTYPE_CASE(Float32, float, __VA_ARGS__)              \
  RTX_DTYPE_CASE(Float64, double, __VA_ARGS__)             \
  RTX_DTYPE_CASE(Float16, ::rtx::Half, __VA_ARGS__)        \
  RTX_DTYPE_CASE(BFloat16, ::rtx::BFloat16, __VA_ARGS__)

// Every type but bool.
#define RTX_DISPATCH_NUMERIC(dtype, op, ...)  \
  switch (dtype) {                            \
    RTX_DISPATCH_FLOATS_CASES(__VA_ARGS__)    \
    RTX_DISPATCH_INTS_CASES(__VA_ARGS__)      \
    RTX_DTYPE_DEFAULT(dtype, op);             \
  }

// Every type.
#define RTX_DISPATCH_ALL(dtype, op, ...)      \
  switch (dtype) {                            \
    RTX_DISPATCH_FLOATS_CASES(__VA_ARGS__)    \
    RTX_DISPATCH_INTS_CASES(__VA_ARGS__)      \
    RTX_DTYPE_CASE(Bool, bool, __VA_ARGS__)   \
    RTX_DTYPE_DEFAULT(dtype, op);             \
  }

// int32, int64 (index tensors)
#define RTX_DISPATCH_INDEX(dtype, op, ...)        \
  switch (dtype) {                                \
    RTX_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)   \
    RTX_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)   \
    RTX_DTYPE_DEFAULT(dtype, op);                 \
  }
