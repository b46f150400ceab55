// The CUDA API in a build without the CUDA backend: no device is visible and every request raises
// DeviceError saying how to get a build that has one.
#include "core/check.h"
#include "rtx/cuda.h"

namespace rtx::cuda {
namespace {

constexpr const char* kReason = "this build of rtx has no CUDA backend (configure with -DRTX_WITH_CUDA=ON)";

[[noreturn]] void unavailable(const char* op) { RTX_THROW(DeviceError, "[{}] CUDA is not available: {}", op, kReason); }

}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kReason; }

DeviceProperties get_device_properties(int) { unavailable("get_device_properties"); }
int current_device() { unavailable("current_device"); }
void set_device(int) { unavailable("set_device"); }
DeviceGuard::DeviceGuard(int) : previous_(0) { unavailable("DeviceGuard"); }
DeviceGuard::~DeviceGuard() = default;

Stream Stream::default_stream(int) { unavailable("Stream::default_stream"); }
Stream Stream::create(int, bool) { unavailable("Stream::create"); }
bool Stream::query() const { unavailable("Stream::query"); }
void Stream::synchronize() const { unavailable("Stream::synchronize"); }
void Stream::wait(const Event&) const { unavailable("Stream::wait"); }
Stream current_stream(int) { unavailable("current_stream"); }
void set_current_stream(const Stream&) { unavailable("set_current_stream"); }
StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()), previous_(stream) {}
StreamGuard::~StreamGuard() = default;

Event::~Event() = default;
Event::Event(Event&& other) noexcept : handle_(other.handle_), device_(other.device_), timing_(other.timing_) {}
Event& Event::operator=(Event&& other) noexcept {
  timing_ = other.timing_;
  return *this;
}
void Event::record() { unavailable("Event::record"); }
void Event::record(const Stream&) { unavailable("Event::record"); }
bool Event::query() const { unavailable("Event::query"); }
void Event::synchronize() const { unavailable("Event::synchronize"); }
float Event::elapsed_time(const Event&) const { unavailable("Event::elapsed_time"); }

void synchronize(int) { unavailable("synchronize"); }
MemoryStats memory_stats(int) { unavailable("memory_stats"); }
std::string memory_summary(int) { unavailable("memory_summary"); }
void reset_peak_memory_stats(int) { unavailable("reset_peak_memory_stats"); }
void empty_cache() {}
void record_stream(const Tensor&, const Stream&) { unavailable("record_stream"); }

uint64_t kernel_launches() { return 0; }
bool is_current_stream_capturing(int) { unavailable("is_current_stream_capturing"); }
struct CUDAGraph::State {};
CUDAGraph::CUDAGraph() : state_(std::make_unique<State>()) {}
CUDAGraph::~CUDAGraph() = default;
void CUDAGraph::capture_begin(MempoolId, CaptureErrorMode) { unavailable("CUDAGraph.capture_begin"); }
void CUDAGraph::capture_end() { unavailable("CUDAGraph.capture_end"); }
void CUDAGraph::abort_capture() {}
void CUDAGraph::replay() { unavailable("CUDAGraph.replay"); }
void CUDAGraph::reset() {}
MempoolId CUDAGraph::pool() const { unavailable("CUDAGraph.pool"); }
bool CUDAGraph::captured() const { return false; }
int64_t CUDAGraph::kernel_count() const { return 0; }
GraphCapture::GraphCapture(CUDAGraph& graph, MempoolId, const Stream*, CaptureErrorMode) : graph_(graph) {
  unavailable("graph");
}
GraphCapture::~GraphCapture() = default;
void GraphCapture::finish() {}
void GraphCapture::abort() {}

}  // namespace rtx::cuda
