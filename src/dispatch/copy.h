// Kernel tables of the copy family: copies that convert dtypes, transfers between devices, fills.
#pragma once

#include "core/dispatch.h"
#include "rtx/scalar.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// dst = src elementwise, converting dtype (any pair of dtypes), both on one device.
using CopyFn = void(const Tensor& dst, const Tensor& src);
// dst = src between two devices (contiguous, one dtype); registered by the GPU backend, which handles
// both directions. Without non_blocking, the data is in dst on return.
using TransferFn = void(const Tensor& dst, const Tensor& src, bool non_blocking);
using FillFn = void(const Tensor& t, const Scalar& value);

// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_COPY_KERNELS(X) \
  X(copy, CopyFn)           \
  X(fill, FillFn)
RTX_COPY_KERNELS(RTX_FAMILY_KERNEL)
RTX_KERNEL(transfer_kernel, TransferFn);  // only the GPU backend has one: not in the list

}  // namespace rtx::kernels
