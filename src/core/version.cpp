// Version and build facts, thread count (OpenMP's, which the CPU kernels and GEMMs use).
#include "rtx/version.h"

#include <omp.h>

#include "core/check.h"
#include "rtx/config.h"

namespace rtx {

const char* version() { return RTX_VERSION; }
bool built_with_cuda() { return RTX_WITH_CUDA != 0; }

void set_num_threads(int n) {
  RTX_CHECK(n > 0, ValueError, "[set_num_threads] the thread count must be positive, got {}", n);
  omp_set_num_threads(n);  // OpenBLAS stays single-threaded: GEMMs are split over OpenMP's threads
}
int get_num_threads() { return omp_get_max_threads(); }

}  // namespace rtx
