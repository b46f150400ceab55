// Registration of the CUDA backend's kernels, one function per family (called from register.cpp).
#pragma once

namespace rtx::cuda {
void register_copy_kernels();
void register_pointwise_unary_kernels();
void register_pointwise_binary_kernels();
}  // namespace rtx::cuda
