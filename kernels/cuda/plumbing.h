// Build/runtime plumbing checks for the CUDA backend (private header).
#pragma once

#include "rtx/export.h"

namespace rtx::cuda::detail {

// Number of visible CUDA devices; 0 when there is no driver or no GPU.
// Never throws.
RTX_API int plumbing_probe() noexcept;

// Runs a tiny kernel on the current device and checks its result.
// Returns false when no device is available or anything fails. Never throws.
RTX_API bool plumbing_kernel_check() noexcept;

}  // namespace rtx::cuda::detail
