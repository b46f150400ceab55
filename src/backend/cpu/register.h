// Registration of the CPU backend's kernels, one function per family (called from register.cpp).
#pragma once

namespace rtx::cpu {
void register_pointwise_kernels();
void register_copy_kernels();
}  // namespace rtx::cpu
