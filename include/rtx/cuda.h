// CUDA availability. The library loads and runs on machines without a GPU or driver; there these
// report no device and every CUDA request raises DeviceError.
#pragma once

#include <string>

#include "rtx/export.h"

namespace rtx::cuda {
// Whether this build has the CUDA backend and a CUDA device is visible.
RTX_API bool is_available();
// Number of visible CUDA devices (0 without a build, driver or GPU).
RTX_API int device_count();
// Why CUDA is unavailable ("" when it is available), for messages and test skips.
RTX_API std::string unavailable_reason();
}  // namespace rtx::cuda
