// The allocator registry and the CPU allocator (64-byte aligned, zero-size safe). Large blocks are
// 2 MiB aligned and backed by transparent huge pages, which makes first touch of a fresh output
// several times cheaper than faulting it in 4 KiB pages; freed large blocks are kept by size (up to
// kCachedBytes in all) and handed to the next request of that size, so the same-sized buffers of
// every training step stop faulting in fresh pages.
#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/check.h"
#include "core/checked_size.h"
#include "rtx/cuda.h"

namespace rtx::detail {
namespace {

class CpuAllocator final : public Allocator {
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kCachedBytes = size_t{1} << 30;

 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    const size_t align = nbytes >= kHugePage ? kHugePage : 64;
    const size_t rounded = checked_round_up(nbytes, align, "cpu");
    if (align == kHugePage) {
      std::lock_guard<std::mutex> lock(cache_.mutex);
      auto it = cache_.blocks.find(rounded);
      if (it != cache_.blocks.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cache_.bytes -= rounded;
        return p;
      }
    }
    void* p = std::aligned_alloc(align, rounded);
    RTX_CHECK(p != nullptr, OutOfMemoryError, "[cpu] out of memory: could not allocate {} bytes", nbytes);
#ifdef MADV_HUGEPAGE
    if (align == kHugePage) (void)madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
#endif
    return p;
  }
  void deallocate(void* ptr, size_t nbytes, Device) override {
    if (ptr != nullptr && nbytes >= kHugePage) {
      const size_t rounded = checked_round_up(nbytes, kHugePage, "cpu");
      std::lock_guard<std::mutex> lock(cache_.mutex);
      if (cache_.bytes + rounded <= kCachedBytes) {
        cache_.blocks[rounded].push_back(ptr);
        cache_.bytes += rounded;
        return;
      }
    }
    std::free(ptr);
  }

 private:
  // Never destroyed: tensors freed during static destruction still find it, and the cached blocks
  // stay reachable (not leaks) at exit.
  struct Cache {
    std::mutex mutex;
    std::unordered_map<size_t, std::vector<void*>> blocks;
    size_t bytes = 0;
  };
  Cache& cache_ = *new Cache;
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
