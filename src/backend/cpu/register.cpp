// Fills the CPU slots of every kernel table.
#include "backend/cpu/register.h"

namespace rtx::cpu {

void register_cpu_kernels() {
  register_pointwise_kernels();
  register_copy_kernels();
  register_reduce_kernels();
  register_random_kernels();
  register_linalg_kernels();
  register_conv_kernels();
  register_pool_kernels();
  register_nn_kernels();
  register_norm_kernels();
  register_loss_kernels();
  register_index_kernels();
  register_attention_kernels();
  register_optim_kernels();
  register_amp_kernels();
}

}  // namespace rtx::cpu
