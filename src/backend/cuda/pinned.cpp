// Page-locked host memory for asynchronous copies, cached like device memory: cudaHostAlloc is slow
// (it maps pages for the device), so freed blocks are kept by size (rounded to a power of two) and
// reused. A block an asynchronous copy used is reused only after that copy's stream has passed an
// event recorded when the copy was queued.
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/runtime.h"
#include "core/allocator.h"
#include "core/check.h"

namespace rtx::cuda {
namespace {

struct PinnedBlock {
  size_t size = 0;
  bool in_use = false;
  std::vector<cudaEvent_t> events;  // copies queued on this block that may still be running
};

class PinnedAllocator final : public rtx::detail::Allocator {
 public:
  void* allocate(size_t nbytes, Device) override {
    if (nbytes == 0) return nullptr;
    size_t size = 512;
    while (size < nbytes) size *= 2;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.lower_bound(size); it != free_.end() && it->first == size; ++it) {
      PinnedBlock& block = blocks_.at(it->second);
      if (!events_done(block)) continue;
      void* ptr = it->second;
      free_.erase(it);
      block.in_use = true;
      return ptr;
    }
    void* ptr = nullptr;
    RTX_CUDA_CHECK(cudaHostAlloc(&ptr, size, cudaHostAllocDefault));
    blocks_[ptr] = PinnedBlock{size, true, {}};
    return ptr;
  }

  void deallocate(void* ptr, size_t, Device) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    PinnedBlock& block = blocks_.at(ptr);
    block.in_use = false;
    free_.emplace(block.size, ptr);
  }

  // Marks the block holding ptr as read or written by work queued on stream.
  void record_use(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(const_cast<void*>(ptr));
    if (it == blocks_.begin()) return;
    --it;
    if (static_cast<const char*>(ptr) >= static_cast<const char*>(it->first) + it->second.size) return;
    cudaEvent_t event = nullptr;
    RTX_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    RTX_CUDA_CHECK(cudaEventRecord(event, stream));
    it->second.events.push_back(event);
  }

 private:
  // Whether every copy that used the block has completed (destroying the completed events).
  static bool events_done(PinnedBlock& block) {
    while (!block.events.empty()) {
      const cudaError_t err = cudaEventQuery(block.events.back());
      if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return false;
      }
      RTX_CUDA_CHECK(err);
      RTX_CUDA_CHECK(cudaEventDestroy(block.events.back()));
      block.events.pop_back();
    }
    return true;
  }

  std::mutex mutex_;
  std::map<void*, PinnedBlock> blocks_;  // every block, by address
  std::multimap<size_t, void*> free_;    // blocks not in use, by size
};

// Never destroyed: at process exit the driver may already be gone.
PinnedAllocator& pinned_allocator() {
  static PinnedAllocator* allocator = new PinnedAllocator();
  return *allocator;
}

}  // namespace

namespace detail {

void install_pinned_allocator() { rtx::detail::set_pinned_allocator(&pinned_allocator()); }

void record_pinned_use(const void* ptr, cudaStream_t stream) { pinned_allocator().record_use(ptr, stream); }

}  // namespace detail
}  // namespace rtx::cuda
