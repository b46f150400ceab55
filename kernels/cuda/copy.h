// The copy and fill kernels of the CUDA backend (kernels/cuda/copy.cu), for the backend's other
// kernels that need a copy or a fill of their own operands, without going back through the registry.
#pragma once

#include "rtx/scalar.h"
#include "rtx/tensor.h"

namespace rtx::cuda {

// dst = src elementwise on one GPU (same shape, any pair of dtypes): a memcpy when nothing converts.
void copy_cuda(const Tensor& dst, const Tensor& src);
// Every element of t set to value.
void fill_cuda(const Tensor& t, const Scalar& value);
// t itself when it is contiguous, else a contiguous copy on its GPU.
Tensor contiguous_cuda(const Tensor& t);

}  // namespace rtx::cuda
