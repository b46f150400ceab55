// Library version and build facts at run time.
#pragma once

#include <string>

#include "rtx/export.h"

namespace rtx {
// "0.1.0"
RTX_API const char* version();
// Whether this build includes the CUDA backend (it may still find no GPU at run time).
RTX_API bool built_with_cuda();
// Sets the number of CPU threads used by kernels (OpenMP and BLAS).
RTX_API void set_num_threads(int n);
RTX_API int get_num_threads();
}  // namespace rtx
