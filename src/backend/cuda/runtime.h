// Internal runtime helpers of the CUDA backend: device checks, the current device and stream as the
// kernels see them, and the scope every kernel launch runs in.
#pragma once

#include "kernels/cuda/check.h"
#include "rtx/cuda.h"
#include "rtx/device.h"

namespace rtx::cuda::detail {

// The most devices the backend's per-device tables (stream pools, allocators) hold.
constexpr int kMaxDevices = 64;

// Throws DeviceError (naming `op`) unless CUDA is available and `device` is a visible device index.
void check_device(int device, const char* op);
// -1 becomes the current device; anything else is checked.
int resolve_device(int device, const char* op);
// The calling thread's current stream on `device` (a valid index).
cudaStream_t current_stream_handle(int device);
// Marks the pinned host block holding ptr as used by work queued on stream (so it is not reused
// before that work completes); no effect for other memory.
void record_pinned_use(const void* ptr, cudaStream_t stream);

// Whether kernels on `device` (a valid index) can be launched as programmatic dependent launches
// (kernels/cuda/dependent_launch.cuh): compute capability 9.0 and up.
bool supports_dependent_launch(int device);

// The device and stream a kernel on `device` runs with: the device is current for the scope.
class KernelScope {
 public:
  explicit KernelScope(Device device)
      : guard_(device.index), device_(device.index), stream_(current_stream_handle(device.index)) {}
  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }

 private:
  DeviceGuard guard_;
  int device_;
  cudaStream_t stream_;
};

}  // namespace rtx::cuda::detail
