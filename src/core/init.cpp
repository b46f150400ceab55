// What runs once when the library is loaded: logging setup and kernel registration for every backend
// in the build. The kernel tables are constant-initialized, so they exist before this runs.
#include "core/logging.h"
#include "rtx/config.h"

namespace rtx::cpu {
void register_cpu_kernels();
}
#if RTX_WITH_CUDA
namespace rtx::cuda {
void register_cuda_kernels();
}
#endif

namespace rtx::detail {
namespace {

__attribute__((constructor)) void load_library() {
  init_logging();
  cpu::register_cpu_kernels();
#if RTX_WITH_CUDA
  cuda::register_cuda_kernels();
#endif
}

}  // namespace
}  // namespace rtx::detail
