// Device memory allocators, one per device type, and the pinned host allocator. The CPU allocator
// hands out 64-byte aligned blocks; the CUDA backend installs its caching allocators at load.
#pragma once

#include <cstddef>

#include "rtx/device.h"

namespace rtx::detail {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
};

Allocator* get_allocator(DeviceType type);  // throws DeviceError when none is registered
void set_allocator(DeviceType type, Allocator* allocator);
// Page-locked host memory (for asynchronous copies), installed by the CUDA backend; throws
// DeviceError when none is registered.
Allocator* get_pinned_allocator();
void set_pinned_allocator(Allocator* allocator);

}  // namespace rtx::detail
