// Version and build facts, and the CPU threads' settings: their count (OpenMP's, which the CPU kernels
// and GEMMs use) and their handling of subnormal floats.
#include "rtx/version.h"

#include <omp.h>

#if defined(__x86_64__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

#include "core/check.h"
#include "rtx/config.h"

#if RTX_WITH_CUDNN
#include <cudnn.h>
#endif

namespace rtx {

const char* version() { return RTX_VERSION; }
bool built_with_cuda() { return RTX_WITH_CUDA != 0; }
const char* cuda_version() { return RTX_CUDA_VERSION; }
int cudnn_version() {
#if RTX_WITH_CUDNN
  return static_cast<int>(cudnnGetVersion());
#else
  return 0;
#endif
}

void set_num_threads(int n) {
  RTX_CHECK(n > 0, ValueError, "[set_num_threads] the thread count must be positive, got {}", n);
  omp_set_num_threads(n);  // OpenBLAS stays single-threaded: GEMMs are split over OpenMP's threads
}
int get_num_threads() { return omp_get_max_threads(); }

bool set_flush_denormal(bool mode) {
#if defined(__x86_64__)
  const auto apply = [mode] {
    _MM_SET_DENORMALS_ZERO_MODE(mode ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
    _MM_SET_FLUSH_ZERO_MODE(mode ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
  };
  apply();
  // Every thread of OpenMP's pool; threads it makes later copy the calling thread's mode.
#pragma omp parallel
  apply();
  return true;
#else
  (void)mode;
  return false;
#endif
}

}  // namespace rtx
