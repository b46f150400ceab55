// Library version and build facts at run time.
#pragma once

#include <string>

#include "rtx/export.h"

namespace rtx {
// "0.1.0"
RTX_API const char* version();
// Whether this build includes the CUDA backend (it may still find no GPU at run time).
RTX_API bool built_with_cuda();
// The version of the CUDA toolkit the CUDA backend was built with, e.g. "13.0"; "" without the backend.
RTX_API const char* cuda_version();
// The version of the cuDNN library in use, as cudnnGetVersion gives it (e.g. 90100 for 9.1.0); 0 in a
// build without cuDNN.
RTX_API int cudnn_version();
// Sets the number of CPU threads used by kernels (OpenMP and BLAS).
RTX_API void set_num_threads(int n);
RTX_API int get_num_threads();
// Like torch.set_flush_denormal: with mode on, CPU float arithmetic reads subnormal float32 and float64
// inputs as zero and writes subnormal results as zero (x86's DAZ and FTZ), which spares the slow
// path some CPUs take on every subnormal value; off restores IEEE behaviour. It applies to the calling
// thread and the library's CPU worker threads (threads made later take the caller's mode), not to the
// GPU. Returns false, changing nothing, on a CPU without these modes.
RTX_API bool set_flush_denormal(bool mode);
}  // namespace rtx
