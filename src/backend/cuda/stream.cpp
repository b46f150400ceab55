// Streams and events. Streams come from per-device pools created on first use and kept for the
// life of the process (so a Stream is a plain value, and memory recorded on one never outlives it);
// each thread has its own current stream per device, the default stream until set. Stream and event
// synchronization report the device's index faults (device_faults.h).
#include <array>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/capture.h"
#include "backend/cuda/device_faults.h"
#include "backend/cuda/runtime.h"
#include "core/check.h"

namespace rtx::cuda {
namespace {

using detail::kMaxDevices;
constexpr int kPoolSize = 32;

// The streams of one device: kPoolSize of low and of high priority, made on first use.
struct StreamPool {
  std::once_flag made;
  std::array<cudaStream_t, kPoolSize> low{};
  std::array<cudaStream_t, kPoolSize> high{};
  std::atomic<uint32_t> next_low{0};
  std::atomic<uint32_t> next_high{0};
};

StreamPool& pool(int device) {
  static std::array<StreamPool, kMaxDevices> pools;
  StreamPool& p = pools[static_cast<size_t>(device)];
  std::call_once(p.made, [&] {
    DeviceGuard guard(device);
    int least = 0, greatest = 0;
    RTX_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int i = 0; i < kPoolSize; ++i) {
      RTX_CUDA_CHECK(cudaStreamCreateWithPriority(&p.low[i], cudaStreamNonBlocking, least));
      RTX_CUDA_CHECK(cudaStreamCreateWithPriority(&p.high[i], cudaStreamNonBlocking, greatest));
    }
  });
  return p;
}

// The calling thread's current stream per device (null: the default stream).
thread_local std::array<cudaStream_t, kMaxDevices> t_current_streams{};

}  // namespace

namespace detail {
cudaStream_t current_stream_handle(int device) { return t_current_streams[static_cast<size_t>(device)]; }
}  // namespace detail

Stream Stream::default_stream(int device) {
  return Stream(detail::resolve_device(device, "Stream::default_stream"), nullptr);
}

Stream Stream::create(int device, bool high_priority) {
  device = detail::resolve_device(device, "Stream::create");
  RTX_CHECK(device < kMaxDevices, DeviceError, "[Stream::create] device cuda:{} is beyond the {} devices rtx supports",
            device, kMaxDevices);
  StreamPool& p = pool(device);
  const uint32_t i = (high_priority ? p.next_high : p.next_low).fetch_add(1) % kPoolSize;
  return Stream(device, high_priority ? p.high[i] : p.low[i]);
}

bool Stream::query() const {
  detail::check_no_capture("Stream.query", device_, static_cast<cudaStream_t>(handle_), "querying a stream");
  const cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  RTX_CUDA_CHECK(err);
  return true;
}

void Stream::synchronize() const {
  detail::check_no_capture("Stream.synchronize", device_, static_cast<cudaStream_t>(handle_),
                           "synchronizing a stream waits for the device");
  DeviceGuard guard(device_);
  RTX_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
  detail::report_device_fault(device_);
}

void Stream::wait(const Event& event) const {
  if (event.handle() == nullptr) return;  // never recorded: nothing to wait for
  DeviceGuard guard(device_);
  RTX_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(handle_), static_cast<cudaEvent_t>(event.handle()), 0));
}

Stream current_stream(int device) {
  device = detail::resolve_device(device, "current_stream");
  return Stream(device, detail::current_stream_handle(device));
}

void set_current_stream(const Stream& stream) {
  detail::check_device(stream.device(), "set_current_stream");
  t_current_streams[static_cast<size_t>(stream.device())] = static_cast<cudaStream_t>(stream.handle());
}

StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()), previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}
StreamGuard::~StreamGuard() { t_current_streams[static_cast<size_t>(previous_.device())] = static_cast<cudaStream_t>(previous_.handle()); }

// ---- events -------------------------------------------------------------------------------------

Event::~Event() {
  if (handle_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

Event::Event(Event&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_), timing_(other.timing_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
    timing_ = other.timing_;
  }
  return *this;
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (handle_ == nullptr) {
    cudaEvent_t e = nullptr;
    RTX_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming));
    handle_ = e;
    device_ = stream.device();
  }
  RTX_CHECK(device_ == stream.device(), DeviceError,
            "[Event::record] the event belongs to cuda:{} but the stream to cuda:{}; use one event per device",
            device_, stream.device());
  RTX_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream.handle())));
}

bool Event::query() const {
  if (handle_ == nullptr) return true;
  detail::check_no_capture("Event.query", device_, nullptr, "querying an event");
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  RTX_CUDA_CHECK(err);
  return true;
}

void Event::synchronize() const {
  if (handle_ == nullptr) return;
  detail::check_no_capture("Event.synchronize", device_, nullptr, "synchronizing an event waits for the device");
  RTX_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
  detail::report_device_fault(device_);
}

float Event::elapsed_time(const Event& end) const {
  RTX_CHECK(timing_ && end.timing_, ValueError,
            "[Event::elapsed_time] both events need timing: create them with Event(/*enable_timing=*/true)");
  RTX_CHECK(handle_ != nullptr && end.handle_ != nullptr, ValueError,
            "[Event::elapsed_time] both events must be recorded first");
  float ms = 0.0f;
  RTX_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)));
  return ms;
}

}  // namespace rtx::cuda
