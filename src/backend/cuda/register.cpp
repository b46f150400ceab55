// Installs the CUDA backend when the library loads: the caching allocator and every family's kernels.
// Nothing here touches the driver, so a machine without a GPU loads the library just the same.
#include "backend/cuda/register.h"

namespace rtx::cuda {

namespace detail {
void install_cuda_allocator();
void install_pinned_allocator();
}

void register_cuda_kernels() {
  detail::install_cuda_allocator();
  detail::install_pinned_allocator();
  register_copy_kernels();
  register_pointwise_unary_kernels();
  register_pointwise_binary_kernels();
  register_random_kernels();
  register_index_kernels();
  register_sort_kernels();
  register_linalg_kernels();
  register_conv_kernels();
  register_pool_kernels();
  register_reduce_kernels();
  register_nn_kernels();
  register_norm_kernels();
  register_loss_kernels();
  register_attention_kernels();
  register_optim_kernels();
  register_amp_kernels();
}

}  // namespace rtx::cuda
