// Kernel auto-tuning on the GPU: a kernel with several ways to launch the same problem (cuBLASLt's
// algorithms, lanes per row, ...) times each on the call's own operands the first time a shape class
// is met on a GPU model, and keeps the fastest in the model's tuning cache (core/tuning.h), so that
// the choice is made once per model and shape class, not once per process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "backend/cuda/runtime.h"
#include "rtx/dtype.h"

namespace rtx::cuda::detail {

// The model a device's choices are kept under: "<name> sm<major><minor> <SMs>sm".
const std::string& device_model(int device);

// Which of `candidates` launches to use for `shape_class` of `kernel` (a name that changes whenever its
// candidates do). launch(c) queues candidate c on `stream` (of `device`, current), writing only the call's outputs
// from its inputs (so that it can run repeatedly), and returns false when c cannot run this problem.
// Returns the cached choice when there is one; otherwise, unless tuning is off or a CUDA graph capture
// is under way (then `fallback`, the kernel's built-in choice, which a capture makes the process's
// choice for the shape class without storing it), runs every candidate, waits for the device, stores
// and returns the fastest. The caller then launches its
// choice as usual. The trial launches are not counted in rtx::cuda::kernel_launches().
int tuned_choice(int device, cudaStream_t stream, const std::string& kernel, const std::string& shape_class,
                 int candidates, int fallback, const std::function<bool(int)>& launch);

// tuned_choice for the row kernels, which ask on every call: the shape class is the dtype, the row
// length and the rows rounded up to a power of two, and the answer is remembered for the process, so
// that a call after the first costs one lookup (no shape-class string, no cache lookup). kernel is a
// string literal.
int tuned_row_choice(int device, cudaStream_t stream, const char* kernel, DType dtype, int64_t rows, int64_t n,
                     int candidates, int fallback, const std::function<bool(int)>& launch);

}  // namespace rtx::cuda::detail
