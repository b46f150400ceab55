// Process-wide numerics settings, like PyTorch's torch.set_float32_matmul_precision and
// torch.use_deterministic_algorithms.
#pragma once

#include <string>

#include "rtx/export.h"

namespace rtx {

// How float32 matrix products may compute on the GPU: "highest" (exact float32, the default),
// "high" (TF32 tensor cores), "medium" (as "high"). Throws ValueError for anything else.
RTX_API void set_float32_matmul_precision(const std::string& precision);
RTX_API std::string get_float32_matmul_precision();

// When on, every op gives bitwise identical results run to run, and ops without a deterministic
// implementation raise Error instead of running.
RTX_API void use_deterministic_algorithms(bool on);
RTX_API bool are_deterministic_algorithms_enabled();

}  // namespace rtx
