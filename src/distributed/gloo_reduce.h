// The element types the Gloo backend moves and the reductions it hands to Gloo's algorithms: one
// element-wise function per (dtype, op), float16 and bfloat16 computed in float and rounded back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>
#include <type_traits>

#include "rtx/distributed.h"

namespace rtx::dist::gloo_detail {

using ReduceFunc = std::function<void(void*, const void*, const void*, size_t)>;

// Calls f(T{}) with the C++ type of dtype (bool reduces as logical or for SUM and MAX, and for
// PRODUCT and MIN).
template <typename F>
void with_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Bool: return f(bool{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int8: return f(int8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::Int32: return f(int32_t{});
    case DType::Int64: return f(int64_t{});
    case DType::Float16: return f(Half{});
    case DType::BFloat16: return f(BFloat16{});
    case DType::Float32: return f(float{});
    case DType::Float64: return f(double{});
  }
}

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

template <typename T, typename Op>
ReduceFunc elementwise(Op op) {
  return [op](void* c, const void* a, const void* b, size_t n) {
    T* out = static_cast<T*>(c);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(op(static_cast<Acc<T>>(x[i]), static_cast<Acc<T>>(y[i])));
  };
}

// The reduction of op on T (AVG reduces as SUM; the caller divides afterwards).
template <typename T>
ReduceFunc reduce_func(ReduceOp op) {
  using A = Acc<T>;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return elementwise<T>([](A x, A y) { return x + y; });
    case ReduceOp::Product: return elementwise<T>([](A x, A y) { return x * y; });
    case ReduceOp::Min: return elementwise<T>([](A x, A y) { return y < x ? y : x; });
    case ReduceOp::Max: return elementwise<T>([](A x, A y) { return x < y ? y : x; });
  }
  return {};
}

// Divides n elements at p by d in place (the second half of AVG).
template <typename T>
void divide(void* p, size_t n, int d) {
  T* v = static_cast<T*>(p);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<Acc<T>>(v[i]) / static_cast<Acc<T>>(d));
}

}  // namespace rtx::dist::gloo_detail
