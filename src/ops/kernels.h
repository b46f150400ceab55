// Kernel tables of the pointwise, copy and fill families (the signatures every backend implements).
// Kernels see operands that already have the output's shape (broadcast by stride-0 views) and the
// dtypes the front-end chose; they never validate user input.
#pragma once

#include "core/dispatch.h"
#include "rtx/scalar.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

using UnaryFn = void(const Tensor& out, const Tensor& x);
using BinaryFn = void(const Tensor& out, const Tensor& a, const Tensor& b);
// Unary ops with up to two numeric parameters (gelu's approximation flag, slopes, bounds).
using UnaryParamFn = void(const Tensor& out, const Tensor& x, double p0, double p1);
using BinaryParamFn = void(const Tensor& out, const Tensor& a, const Tensor& b, double p);
using TernaryFn = void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, double p);
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
#include "rtx/pointwise.def"

RTX_DECLARE_KERNEL(gelu_kernel, UnaryParamFn);        // p0: 0 exact, 1 tanh
RTX_DECLARE_KERNEL(leaky_relu_kernel, UnaryParamFn);  // p0: slope
RTX_DECLARE_KERNEL(elu_kernel, UnaryParamFn);         // p0: alpha
RTX_DECLARE_KERNEL(softplus_kernel, UnaryParamFn);    // p0: beta, p1: threshold
RTX_DECLARE_KERNEL(clamp_kernel, UnaryParamFn);       // p0: min, p1: max (NaN: none)
RTX_DECLARE_KERNEL(lerp_kernel, BinaryParamFn);       // p: weight
RTX_DECLARE_KERNEL(gelu_backward_kernel, BinaryParamFn);  // out = g * gelu'(x) from (g, x); p as gelu's p0
RTX_DECLARE_KERNEL(where_kernel, TernaryFn);          // a: bool condition
RTX_DECLARE_KERNEL(addcmul_kernel, TernaryFn);        // p: value
RTX_DECLARE_KERNEL(addcdiv_kernel, TernaryFn);        // p: value
RTX_DECLARE_KERNEL(copy_kernel, CopyFn);
RTX_DECLARE_KERNEL(transfer_kernel, TransferFn);
RTX_DECLARE_KERNEL(fill_kernel, FillFn);

}  // namespace rtx::kernels
