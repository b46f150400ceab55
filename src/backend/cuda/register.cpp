// Installs the CUDA backend when the library loads: the caching allocator and every family's kernels.
// Nothing here touches the driver, so a machine without a GPU loads the library just the same.
#include "backend/cuda/register.h"

namespace rtx::cuda {

namespace detail {
void install_cuda_allocator();
}

void register_cuda_kernels() {
  detail::install_cuda_allocator();
  register_copy_kernels();
  register_pointwise_unary_kernels();
  register_pointwise_binary_kernels();
}

}  // namespace rtx::cuda
