// Devices of the CUDA backend: availability, properties, the current device (mirrored per thread so
// that guards cost no driver call when the device does not change), synchronization (which reports
// the device's index faults, device_faults.h) and the error reporting every runtime call goes through.
#include "backend/cuda/runtime.h"

#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "backend/cuda/capture.h"
#include "backend/cuda/device_faults.h"
#include "core/check.h"

namespace rtx::cuda {
namespace {

struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.count = 0;
      r.reason = fmt::format("the CUDA runtime found no usable device or driver ({})", cudaGetErrorString(err));
    } else if (r.count == 0) {
      r.reason = "no CUDA device is visible on this machine";
    }
    return r;
  }();
  return p;
}

// The calling thread's current device as last set through rtx (-1: not read yet).
thread_local int t_current_device = -1;

}  // namespace

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

namespace detail {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  const std::string msg =
      fmt::format("[cuda] {} failed: {} ({}) at {}:{}", call, cudaGetErrorString(err), cudaGetErrorName(err), file, line);
  if (err == cudaErrorMemoryAllocation) throw OutOfMemoryError(msg);
  switch (err) {  // calls that a CUDA graph capture refused
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
      throw GraphCaptureError(msg + " (an operation a CUDA graph capture under way cannot record)");
    default:
      throw Error(msg);
  }
}

void check_device(int device, const char* op) {
  RTX_CHECK(is_available(), DeviceError, "[{}] CUDA is not available: {}", op, unavailable_reason());
  RTX_CHECK(device >= 0 && device < device_count(), DeviceError,
            "[{}] device cuda:{} does not exist: {} CUDA device(s) visible (cuda:0 to cuda:{})", op, device,
            device_count(), device_count() - 1);
}

bool supports_dependent_launch(int device) {
#if defined(__HIP_PLATFORM_AMD__) || defined(RTX_USE_HIP)
  (void)device;
  return false;
#else
  static const std::vector<bool> supported = [] {
    std::vector<bool> r(static_cast<size_t>(device_count()));
    for (int d = 0; d < device_count(); ++d) {
      int major = 0;
      RTX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d));
      r[static_cast<size_t>(d)] = major >= 9;
    }
    return r;
  }();
  return supported[static_cast<size_t>(device)];
#endif
}

int resolve_device(int device, const char* op) {
  if (device == -1) return current_device();
  check_device(device, op);
  return device;
}

}  // namespace detail

int current_device() {
  if (t_current_device < 0) {
    detail::check_device(0, "current_device");
    int d = 0;
    RTX_CUDA_CHECK(cudaGetDevice(&d));
    t_current_device = d;
  }
  return t_current_device;
}

void set_device(int device) {
  if (device == t_current_device) return;
  detail::check_device(device, "set_device");
  RTX_CUDA_CHECK(cudaSetDevice(device));
  t_current_device = device;
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()) { set_device(device); }
DeviceGuard::~DeviceGuard() {
  if (previous_ != t_current_device) (void)cudaSetDevice(previous_);
  t_current_device = previous_;
}

DeviceProperties get_device_properties(int device) {
  device = detail::resolve_device(device, "get_device_properties");
  cudaDeviceProp p{};
  RTX_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties r;
  r.name = p.name;
  r.major = p.major;
  r.minor = p.minor;
  r.multiprocessor_count = p.multiProcessorCount;
  r.total_memory = p.totalGlobalMem;
  r.l2_cache_size = static_cast<size_t>(p.l2CacheSize);
  r.max_threads_per_block = p.maxThreadsPerBlock;
  r.warp_size = p.warpSize;
  return r;
}

void synchronize(int device) {
  device = detail::resolve_device(device, "synchronize");
  detail::check_no_capture("synchronize", device, detail::current_stream_handle(device),
                           "synchronizing the device waits for it");
  DeviceGuard guard(device);
  RTX_CUDA_CHECK(cudaDeviceSynchronize());
  detail::report_device_fault(device);
}

}  // namespace rtx::cuda
