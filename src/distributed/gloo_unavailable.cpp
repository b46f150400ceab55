// The Gloo backend of a build without Gloo: make_gloo_group raises DistBackendError saying how to get it.
#include "rtx/distributed.h"

namespace rtx::dist {

bool is_gloo_available() { return false; }

std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<Store>, int, int, Timeout, std::vector<int>,
                                              const std::string&) {
  throw DistBackendError(
      "[init_process_group] this build of rustytorch has no gloo backend: install Gloo (Debian/Ubuntu: "
      "apt-get install libgloo-dev) and rebuild (CMake finds it and sets RTX_WITH_GLOO=ON)");
}

}  // namespace rtx::dist
