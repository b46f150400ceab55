// What runs once when the library is loaded besides the kernel registrations (each backend file's
// RTX_REGISTER_KERNELS block): logging setup and, in a CUDA build, the CUDA backend's allocators
// (nothing touches the driver, so a machine without a GPU loads the library just the same).
#include "core/logging.h"
#include "rtx/config.h"

#if RTX_WITH_CUDA
namespace rtx::cuda::detail {
void install_cuda_allocator();
void install_pinned_allocator();
}  // namespace rtx::cuda::detail
#endif

namespace rtx::detail {
namespace {

__attribute__((constructor)) void load_library() {
  init_logging();
#if RTX_WITH_CUDA
  cuda::detail::install_cuda_allocator();
  cuda::detail::install_pinned_allocator();
#endif
}

}  // namespace
}  // namespace rtx::detail
