// Fills the CPU slots of every kernel table.
#include "backend/cpu/register.h"

namespace rtx::cpu {

void register_cpu_kernels() {
  register_pointwise_kernels();
  register_copy_kernels();
}

}  // namespace rtx::cpu
