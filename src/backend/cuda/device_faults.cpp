// The host side of the deferred index faults (device_faults.h): one record per device in pinned,
// mapped host memory, made once and never freed (the driver may be gone at exit), and the take and
// clear of its fault, serialized per device so that two host threads never both raise it.
#include "backend/cuda/device_faults.h"

#include <array>
#include <atomic>
#include <mutex>

#include "backend/cuda/runtime.h"
#include "core/check.h"

namespace rtx::cuda::detail {
namespace {

struct DeviceFaults {
  std::once_flag made;
  std::atomic<FaultRecord*> host{nullptr};  // the record as the host reads it; null until made
  FaultRecord* device = nullptr;           // the same memory as the device's kernels address it
  std::mutex taking;                        // serializes take_device_fault
};

DeviceFaults& faults_of(int device) {
  static std::array<DeviceFaults, kMaxDevices> all;
  RTX_CHECK(device >= 0 && device < kMaxDevices, DeviceError,
            "[cuda] device cuda:{} is beyond the {} devices rtx supports", device, kMaxDevices);
  return all[static_cast<size_t>(device)];
}

unsigned int state_of(const FaultRecord* r) { return static_cast<const volatile FaultRecord*>(r)->state; }

}  // namespace

FaultRecord* fault_record(int device) {
  DeviceFaults& f = faults_of(device);
  std::call_once(f.made, [&] {
    DeviceGuard guard(device);
    void* host = nullptr;
    RTX_CUDA_CHECK(cudaHostAlloc(&host, sizeof(FaultRecord), cudaHostAllocMapped));
    auto* record = static_cast<FaultRecord*>(host);
    *record = FaultRecord{kFaultEmpty, 0, 0, 0, 0, 0, 0};
    void* mapped = nullptr;
    RTX_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
    f.device = static_cast<FaultRecord*>(mapped);
    f.host.store(record, std::memory_order_release);
  });
  return f.device;
}

kernels::IndexFault take_device_fault(int device) {
  DeviceFaults& f = faults_of(device);
  FaultRecord* r = f.host.load(std::memory_order_acquire);
  if (r == nullptr) return {};
  std::lock_guard<std::mutex> lock(f.taking);
  if (state_of(r) != kFaultWritten) return {};
  std::atomic_thread_fence(std::memory_order_acquire);  // the fields were written before the state
  const volatile FaultRecord* v = r;
  kernels::IndexFault fault;
  fault.found = true;
  fault.value = v->value;
  fault.check.op = static_cast<kernels::IndexOp>(v->op);
  fault.check.bound = v->bound;
  fault.check.dim = v->dim;
  if (v->has_skip != 0) fault.check.skip = v->skip;
  // The fields are read before a kernel may claim the record again.
  std::atomic_thread_fence(std::memory_order_release);
  static_cast<volatile FaultRecord*>(r)->state = kFaultEmpty;
  return fault;
}

void report_device_fault(int device) {
  const FaultRecord* r = faults_of(device).host.load(std::memory_order_acquire);
  if (r == nullptr || state_of(r) != kFaultWritten) return;
  const kernels::IndexFault fault = take_device_fault(device);
  if (!fault.found) return;  // another thread took it first
  throw IndexError(fmt::format("{}; found on cuda:{} by a kernel queued earlier and reported at this synchronization "
                               "(RTX_SYNC_CHECKS=1 raises it at the op instead)",
                               kernels::index_fault_message(fault), device));
}

}  // namespace rtx::cuda::detail
