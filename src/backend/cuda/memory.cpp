// Device memory of the CUDA backend: one caching allocator per device (the policy is in
// caching_allocator.cpp) over the runtime's cudaMalloc and events, installed as rtx's CUDA allocator,
// the public memory statistics, and the private pool calls of CUDA graph capture. Allocators are made
// on first use and deliberately never destroyed: at process exit the driver may already be gone.
// RTX_CUDA_ALLOC_TRACE turns on their traces.
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <string>

#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/capture.h"
#include "backend/cuda/device_faults.h"
#include "backend/cuda/runtime.h"
#include "core/allocator.h"
#include "core/check.h"
#include "core/tensor_impl.h"

namespace rtx::cuda {
namespace {

using detail::kMaxDevices;

// DeviceMemory of one device through the CUDA runtime.
class RuntimeMemory final : public DeviceMemory {
 public:
  explicit RuntimeMemory(int device) : device_(device) {}

  void* raw_alloc(size_t bytes) override {
    DeviceGuard guard(device_);
    // During a capture the new segment goes to the graph's private pool: the allocation is meant.
    detail::RelaxedCaptureScope relaxed;
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    RTX_CUDA_CHECK(err);
    return p;
  }
  void raw_free(void* ptr) override {
    DeviceGuard guard(device_);
    RTX_CUDA_CHECK(cudaFree(ptr));
  }
  MemInfo mem_get_info() override {
    DeviceGuard guard(device_);
    detail::RelaxedCaptureScope relaxed;
    MemInfo info;
    RTX_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
    return info;
  }
  EventHandle create_event() override {
    DeviceGuard guard(device_);
    cudaEvent_t e = nullptr;
    RTX_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return reinterpret_cast<EventHandle>(e);
  }
  void record_event(EventHandle event, StreamHandle stream) override {
    DeviceGuard guard(device_);
    RTX_CUDA_CHECK(cudaEventRecord(reinterpret_cast<cudaEvent_t>(event), reinterpret_cast<cudaStream_t>(stream)));
  }
  bool event_done(EventHandle event) override {
    const cudaError_t err = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    RTX_CUDA_CHECK(err);
    return true;
  }
  void synchronize_event(EventHandle event) override {
    RTX_CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(event)));
  }
  void destroy_event(EventHandle event) override { RTX_CUDA_CHECK(cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event))); }

 private:
  int device_;
};

struct DeviceAllocator {
  std::once_flag made;
  CachingAllocator* allocator = nullptr;
};

std::array<DeviceAllocator, kMaxDevices> g_allocators;

AllocatorConfig config_from_environment() {
  const char* text = std::getenv("RTX_CUDA_ALLOC_CONF");
  return text == nullptr ? AllocatorConfig{} : parse_alloc_conf(text);
}

pid_t g_tracing_process = 0;

// Ends the traces at exit, which flushes them (the allocators themselves are never destroyed); a forked
// child leaves the files to the process that traces.
void stop_traces() {
  if (getpid() != g_tracing_process) return;
  for (DeviceAllocator& slot : g_allocators)
    if (slot.allocator != nullptr) slot.allocator->stop_trace();
}

// With RTX_CUDA_ALLOC_TRACE=PATH, cuda:0's allocator is traced into PATH and cuda:i's into PATH.i.
void trace_from_environment(CachingAllocator& allocator, int device) {
  static const char* const path = std::getenv("RTX_CUDA_ALLOC_TRACE");
  if (path == nullptr || *path == '\0') return;
  static const bool registered = [] {
    g_tracing_process = getpid();
    return std::atexit(stop_traces) == 0;
  }();
  (void)registered;
  allocator.start_trace(device == 0 ? std::string(path) : std::string(path) + "." + std::to_string(device));
}

// The caching allocator of `device` (a valid index), made on first use.
CachingAllocator& allocator_for(int device) {
  RTX_CHECK(device < kMaxDevices, DeviceError, "[cuda] device cuda:{} is beyond the {} devices rtx supports", device,
            kMaxDevices);
  DeviceAllocator& slot = g_allocators[static_cast<size_t>(device)];
  std::call_once(slot.made, [&] {
    // The device's index-fault record comes with its memory: before any kernel (or capture) on it.
    detail::fault_record(device);
    static const AllocatorConfig config = config_from_environment();
    auto* allocator = new CachingAllocator(*new RuntimeMemory(device), config);
    trace_from_environment(*allocator, device);
    slot.allocator = allocator;
  });
  return *slot.allocator;
}

// rtx's allocator for Device(kCUDA, i): blocks belong to the current stream at allocation.
class CudaAllocator final : public rtx::detail::Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    detail::check_device(device.index, "allocate");
    return allocator_for(device.index)
        .allocate(nbytes, reinterpret_cast<StreamHandle>(detail::current_stream_handle(device.index)));
  }
  void deallocate(void* ptr, size_t, Device device) override {
    if (ptr != nullptr) allocator_for(device.index).free(ptr);
  }
};

}  // namespace

namespace detail {
void install_cuda_allocator() {
  static CudaAllocator allocator;
  rtx::detail::set_allocator(kCUDA, &allocator);
}

void begin_allocate_to_pool(int device, MempoolId id, StreamFilter filter) {
  allocator_for(resolve_device(device, "begin_allocate_to_pool")).begin_allocate_to_pool(id, std::move(filter));
}

void end_allocate_to_pool(int device, MempoolId id) {
  allocator_for(resolve_device(device, "end_allocate_to_pool")).end_allocate_to_pool(id);
}

void release_pool(int device, MempoolId id) {
  allocator_for(resolve_device(device, "release_pool")).release_pool(id);
}
}  // namespace detail

MemoryStats memory_stats(int device) {
  return allocator_for(detail::resolve_device(device, "memory_stats")).stats();
}

std::string memory_summary(int device) {
  device = detail::resolve_device(device, "memory_summary");
  return "cuda:" + std::to_string(device) + " caching allocator\n" + allocator_for(device).summary();
}

void reset_peak_memory_stats(int device) {
  allocator_for(detail::resolve_device(device, "reset_peak_memory_stats")).reset_peak_stats();
}

void empty_cache() {
  for (int d = 0; d < device_count() && d < kMaxDevices; ++d) {
    if (g_allocators[static_cast<size_t>(d)].allocator != nullptr) g_allocators[static_cast<size_t>(d)].allocator->empty_cache();
  }
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  RTX_CHECK(tensor.defined() && tensor.is_cuda(), DeviceError,
            "[record_stream] expected a CUDA tensor, got {}", tensor.defined() ? fmt::format("{}", tensor.device()) : "an undefined tensor");
  RTX_CHECK(tensor.device().index == stream.device(), DeviceError,
            "[record_stream] the tensor is on {} but the stream on cuda:{}", tensor.device(), stream.device());
  void* base = tensor.impl()->storage->data();
  if (base != nullptr) allocator_for(stream.device()).record_stream(base, reinterpret_cast<StreamHandle>(stream.handle()));
}

}  // namespace rtx::cuda
