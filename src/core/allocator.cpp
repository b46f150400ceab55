// The allocator registry and the CPU allocator (64-byte aligned, zero-size safe).
#include "core/allocator.h"

#include <cstdlib>
#include <new>

#include "core/check.h"
#include "rtx/cuda.h"

namespace rtx::detail {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    const size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    RTX_CHECK(p != nullptr, OutOfMemoryError, "[cpu] out of memory: could not allocate {} bytes", nbytes);
    return p;
  }
  void deallocate(void* ptr, size_t, Device) override { std::free(ptr); }
};

CpuAllocator g_cpu_allocator;
Allocator* g_allocators[kNumDeviceTypes] = {&g_cpu_allocator, nullptr};

}  // namespace

Allocator* get_allocator(DeviceType type) {
  Allocator* a = g_allocators[static_cast<int>(type)];
  RTX_CHECK(a != nullptr, DeviceError, "[allocator] cannot allocate memory on {}: {}", device_type_name(type),
            cuda::is_available() ? std::string("this build registers no CUDA allocator") : cuda::unavailable_reason());
  return a;
}

void set_allocator(DeviceType type, Allocator* allocator) { g_allocators[static_cast<int>(type)] = allocator; }

}  // namespace rtx::detail
