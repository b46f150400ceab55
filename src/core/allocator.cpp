// The allocator registry and the CPU allocator (64-byte aligned, zero-size safe; large blocks are
// 2 MiB aligned and backed by transparent huge pages, which makes first touch of a fresh output
// several times cheaper than faulting it in 4 KiB pages).
#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "core/check.h"
#include "rtx/cuda.h"

namespace rtx::detail {
namespace {

class CpuAllocator final : public Allocator {
  static constexpr size_t kHugePage = size_t{2} << 20;

 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    const size_t align = nbytes >= kHugePage ? kHugePage : 64;
    const size_t rounded = (nbytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    RTX_CHECK(p != nullptr, OutOfMemoryError, "[cpu] out of memory: could not allocate {} bytes", nbytes);
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
    return p;
  }
  void deallocate(void* ptr, size_t, Device) override { std::free(ptr); }
};

CpuAllocator g_cpu_allocator;
Allocator* g_allocators[kNumDeviceTypes] = {&g_cpu_allocator, nullptr};
Allocator* g_pinned_allocator = nullptr;

}  // namespace

Allocator* get_allocator(DeviceType type) {
  Allocator* a = g_allocators[static_cast<int>(type)];
  RTX_CHECK(a != nullptr, DeviceError, "[allocator] cannot allocate memory on {}: {}", device_type_name(type),
            cuda::is_available() ? std::string("this build registers no CUDA allocator") : cuda::unavailable_reason());
  return a;
}

void set_allocator(DeviceType type, Allocator* allocator) { g_allocators[static_cast<int>(type)] = allocator; }

Allocator* get_pinned_allocator() {
  RTX_CHECK(g_pinned_allocator != nullptr && cuda::is_available(), DeviceError,
            "[pin_memory] pinned host memory needs CUDA: {}", cuda::unavailable_reason());
  return g_pinned_allocator;
}

void set_pinned_allocator(Allocator* allocator) { g_pinned_allocator = allocator; }

}  // namespace rtx::detail
