// The CPU backend's copy kernel, for its other kernels that convert their own operands without going
// back through the registry.
#pragma once

#include "rtx/tensor.h"

namespace rtx::cpu {

// dst = src elementwise on the CPU (same shape, any pair of dtypes).
void copy_cpu(const Tensor& dst, const Tensor& src);

}  // namespace rtx::cpu
