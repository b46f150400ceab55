// Kernel tables of the pointwise, copy and fill families (the signatures every backend implements).
// Kernels see operands that already have the output's shape (broadcast by stride-0 views) and the
// dtypes the front-end chose; they never validate user input.
#pragma once

#include "core/dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "rtx/scalar.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

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
// dst = src elementwise, converting dtype (any pair of dtypes), both on one device.
using CopyFn = void(const Tensor& dst, const Tensor& src);
// dst = src between two devices (contiguous, one dtype); registered by the GPU backend, which handles
// both directions. Without non_blocking, the data is in dst on return.
using TransferFn = void(const Tensor& dst, const Tensor& src, bool non_blocking);
using FillFn = void(const Tensor& t, const Scalar& value);

#define RTX_UNARY(name, F, r, s, g) RTX_DECLARE_KERNEL(name##_kernel, UnaryFn);
#define RTX_BINARY(name, F, r, s, ga, gb) RTX_DECLARE_KERNEL(name##_kernel, BinaryFn);
#define RTX_COMPARE(name, F) RTX_DECLARE_KERNEL(name##_kernel, BinaryFn);
#define RTX_LOGICAL(name, F) RTX_DECLARE_KERNEL(name##_kernel, BinaryFn);
#define RTX_PREDICATE(name, F) RTX_DECLARE_KERNEL(name##_kernel, UnaryFn);
#define RTX_UNARY_FUNCTOR(name, F, t) RTX_DECLARE_KERNEL(name##_kernel, UnaryFunctorFn<fn::F>);
#define RTX_BINARY_FUNCTOR(name, F, t) RTX_DECLARE_KERNEL(name##_kernel, BinaryFunctorFn<fn::F>);
#define RTX_TERNARY_FUNCTOR(name, F, t) RTX_DECLARE_KERNEL(name##_kernel, TernaryFunctorFn<fn::F>);
#define RTX_WHERE_FUNCTOR(name, F, t) RTX_DECLARE_KERNEL(name##_kernel, WhereFunctorFn<fn::F>);
#include "rtx/pointwise.def"

RTX_DECLARE_KERNEL(copy_kernel, CopyFn);
RTX_DECLARE_KERNEL(transfer_kernel, TransferFn);
RTX_DECLARE_KERNEL(fill_kernel, FillFn);

}  // namespace rtx::kernels
