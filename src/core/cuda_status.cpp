// CUDA availability as seen from the core library (the runtime is only touched in a CUDA build).
#include "rtx/config.h"
#include "rtx/cuda.h"
#if RTX_WITH_CUDA
#include "kernels/cuda/plumbing.h"
#endif

namespace rtx::cuda {

int device_count() {
#if RTX_WITH_CUDA
  static const int count = detail::plumbing_probe();
  return count;
#else
  return 0;
#endif
}

bool is_available() { return device_count() > 0; }

std::string unavailable_reason() {
#if RTX_WITH_CUDA
  return is_available() ? std::string() : std::string("no CUDA device or driver is visible on this machine");
#else
  return "this build of rtx has no CUDA backend (configure with RTX_WITH_CUDA=ON)";
#endif
}

}  // namespace rtx::cuda
