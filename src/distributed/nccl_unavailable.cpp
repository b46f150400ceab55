// The NCCL backend of a build without NCCL: make_nccl_group raises DistBackendError saying how to get it.
#include "rtx/distributed.h"

namespace rtx::dist {

bool is_nccl_available() { return false; }

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<Store>, int, int, Timeout, std::vector<int>) {
  throw DistBackendError(
      "[init_process_group] this build of rustytorch has no nccl backend: build it with CUDA and NCCL (the CUDA "
      "toolkit's libnccl, Debian/Ubuntu: apt-get install libnccl-dev, or NCCL_ROOT pointing at an NCCL install; "
      "CMake finds it and sets RTX_WITH_NCCL=ON), or use backend='gloo' with CPU tensors");
}

}  // namespace rtx::dist
