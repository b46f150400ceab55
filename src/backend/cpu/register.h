// Registration of the CPU backend's kernels, one function per family (called from register.cpp).
#pragma once

namespace rtx::cpu {
void register_pointwise_kernels();
void register_copy_kernels();
void register_reduce_kernels();
void register_random_kernels();
void register_linalg_kernels();
void register_conv_kernels();
void register_pool_kernels();
void register_nn_kernels();
void register_norm_kernels();
void register_loss_kernels();
void register_index_kernels();
void register_attention_kernels();
void register_optim_kernels();
void register_amp_kernels();
}  // namespace rtx::cpu
