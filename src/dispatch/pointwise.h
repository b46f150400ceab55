// Kernel tables of the pointwise family: one per op of rtx/pointwise.def, generated from the table.
// Kernels see operands that already have the output's shape (broadcast by stride-0 views) and the
// dtypes the front-end chose; they never validate user input.
#pragma once

#include <string_view>

#include "core/dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// The binary ops whose float32 kernels read a bfloat16 or float16 operand as it is beside a float32
// one (a mixed-precision model's residual adds), where the others have the front-end cast it first.
constexpr bool mixed_float_operands(std::string_view op) { return op == "add" || op == "sub" || op == "mul"; }

// Whether such an op computes `out` from a and b as they are: out float32, one operand float32 and the
// other a 16-bit float.
inline bool reads_mixed_floats(DType out, DType a, DType b) {
  const auto low = [](DType t) { return t == DType::BFloat16 || t == DType::Float16; };
  return out == DType::Float32 && ((a == DType::Float32 && low(b)) || (low(a) && b == DType::Float32));
}

using UnaryFn = void(const Tensor& out, const Tensor& x);
using BinaryFn = void(const Tensor& out, const Tensor& a, const Tensor& b);
// The kernels of the table's functor ops take the functor, whose fields are the op's parameters.
template <typename F>
using UnaryFunctorFn = void(const Tensor& out, const Tensor& x, const F& f);
template <typename F>
using BinaryFunctorFn = void(const Tensor& out, const Tensor& a, const Tensor& b, const F& f);
template <typename F>
using TernaryFunctorFn = void(const Tensor& out, const Tensor& x, const Tensor& a, const Tensor& b, const F& f);
template <typename F>
using WhereFunctorFn = void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b, const F& f);
#define RTX_UNARY(name, F, r, s, g) RTX_KERNEL(name##_kernel, UnaryFn);
#define RTX_BINARY(name, F, r, s, ga, gb) RTX_KERNEL(name##_kernel, BinaryFn);
#define RTX_COMPARE(name, F) RTX_KERNEL(name##_kernel, BinaryFn);
#define RTX_LOGICAL(name, F) RTX_KERNEL(name##_kernel, BinaryFn);
#define RTX_PREDICATE(name, F) RTX_KERNEL(name##_kernel, UnaryFn);
#define RTX_UNARY_FUNCTOR(name, F, t) RTX_KERNEL(name##_kernel, UnaryFunctorFn<fn::F>);
#define RTX_BINARY_FUNCTOR(name, F, t) RTX_KERNEL(name##_kernel, BinaryFunctorFn<fn::F>);
#define RTX_TERNARY_FUNCTOR(name, F, t) RTX_KERNEL(name##_kernel, TernaryFunctorFn<fn::F>);
#define RTX_WHERE_FUNCTOR(name, F, t) RTX_KERNEL(name##_kernel, WhereFunctorFn<fn::F>);
#include "rtx/pointwise.def"

}  // namespace rtx::kernels
