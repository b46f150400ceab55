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

RTX_KERNEL(copy_kernel, CopyFn);
RTX_KERNEL(transfer_kernel, TransferFn);
RTX_KERNEL(fill_kernel, FillFn);

}  // namespace rtx::kernels
