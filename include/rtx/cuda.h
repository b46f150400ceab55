// The CUDA runtime as rtx exposes it: devices, streams, events, the caching allocator's memory
// statistics and CUDA graphs. The library loads and runs on machines without a GPU or driver; there is_available()
// is false and every CUDA request raises DeviceError naming the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "rtx/export.h"

namespace rtx {
class Tensor;
}

namespace rtx::cuda {

// Whether this build has the CUDA backend and a CUDA device is visible.
RTX_API bool is_available();
// Number of visible CUDA devices (0 without a build, driver or GPU).
RTX_API int device_count();
// Why CUDA is unavailable ("" when it is available), for messages and test skips.
RTX_API std::string unavailable_reason();

// What a device is.
struct DeviceProperties {
  std::string name;
  int major = 0;  // compute capability
  int minor = 0;
  int multiprocessor_count = 0;
  size_t total_memory = 0;   // bytes
  size_t l2_cache_size = 0;  // bytes
  int max_threads_per_block = 0;
  int warp_size = 0;
};

// Properties of `device` (-1: the current device).
RTX_API DeviceProperties get_device_properties(int device = -1);
// The calling thread's current device.
RTX_API int current_device();
// Makes `device` the calling thread's current device.
RTX_API void set_device(int device);

// Makes a device current for a scope and restores the previous one.
class RTX_API DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

class Event;
class Stream;

// The calling thread's current stream on `device` (-1: current); initially the default stream.
RTX_API Stream current_stream(int device = -1);

// A CUDA stream: a queue of work on one device. Streams come from a per-device pool and live as long
// as the process, so a Stream is a cheap value.
class RTX_API Stream {
 public:
  // The default (legacy) stream of `device` (-1: current), which every other blocking stream waits for.
  static Stream default_stream(int device = -1);
  // A stream from the device's pool (round robin over 32 per priority); it does not synchronize with
  // the default stream.
  static Stream create(int device = -1, bool high_priority = false);

  int device() const { return device_; }
  // The cudaStream_t.
  void* handle() const { return handle_; }
  // Whether all work queued so far has completed (never blocks).
  bool query() const;
  // Blocks the host until all work queued so far has completed.
  void synchronize() const;
  // Makes work queued later on this stream wait for `event`.
  void wait(const Event& event) const;
  bool operator==(const Stream& other) const { return device_ == other.device_ && handle_ == other.handle_; }
  bool operator!=(const Stream& other) const { return !(*this == other); }

 private:
  friend Stream current_stream(int device);
  Stream(int device, void* handle) : device_(device), handle_(handle) {}
  int device_ = 0;
  void* handle_ = nullptr;
};

// Makes `stream` the calling thread's current stream on its device.
RTX_API void set_current_stream(const Stream& stream);

// Makes a stream (and its device) current for a scope and restores the previous ones.
class RTX_API StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  DeviceGuard device_;
  Stream previous_;
};

// A CUDA event: a marker in a stream's queue, for waiting and timing. Created on first record.
class RTX_API Event {
 public:
  explicit Event(bool enable_timing = false) : timing_(enable_timing) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Marks the current end of `stream`'s queue (default: the current stream of the current device).
  void record();
  void record(const Stream& stream);
  // Whether the marked work has completed (true when never recorded).
  bool query() const;
  // Blocks the host until the marked work has completed.
  void synchronize() const;
  // Milliseconds between this event and `end` (both recorded with enable_timing, both completed).
  float elapsed_time(const Event& end) const;
  // The cudaEvent_t (null until recorded).
  void* handle() const { return handle_; }
  int device() const { return device_; }

 private:
  void* handle_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
};

// Blocks the host until all work on `device` (-1: current) has completed.
RTX_API void synchronize(int device = -1);

// ---- caching allocator --------------------------------------------------------------------------

// Counters of a device's caching allocator: current values and peaks since start or
// reset_peak_memory_stats.
struct MemoryStats {
  size_t allocated_bytes = 0;  // bytes of blocks handed out and not freed (rounded sizes)
  size_t peak_allocated_bytes = 0;
  size_t reserved_bytes = 0;  // bytes of all segments obtained from the device
  size_t peak_reserved_bytes = 0;
  size_t active_blocks = 0;  // blocks handed out and not freed
  size_t peak_active_blocks = 0;
  size_t private_pool_allocated_bytes = 0;  // of allocated_bytes, those of blocks from private pools (CUDA graphs)
  size_t private_pool_reserved_bytes = 0;   // of reserved_bytes, those of private pools' segments
  uint64_t num_allocs = 0;        // successful allocations (non-zero sizes)
  uint64_t num_raw_allocs = 0;    // segments obtained from the device (successful cudaMalloc calls)
  uint64_t num_raw_frees = 0;     // segments returned to the device
  uint64_t num_oom_retries = 0;   // times the cache was released to retry a failed device allocation
  uint64_t num_ooms = 0;          // OutOfMemoryError raised

  // 1 - allocated / reserved: the share of reserved memory not handed out (0 when nothing is reserved).
  double fragmentation() const {
    return reserved_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(allocated_bytes) / static_cast<double>(reserved_bytes);
  }
};

// Statistics of `device`'s caching allocator (-1: current device).
RTX_API MemoryStats memory_stats(int device = -1);
// A short text table of memory_stats.
RTX_API std::string memory_summary(int device = -1);
// Sets the peaks to the current values.
RTX_API void reset_peak_memory_stats(int device = -1);
// Returns every cached, unused segment of every device to the driver.
RTX_API void empty_cache();
// Marks `tensor`'s memory as used by `stream`: when the tensor is freed, its block is reused only
// after the work queued on `stream` so far has completed.
RTX_API void record_stream(const Tensor& tensor, const Stream& stream);

// ---- CUDA graphs (docs/cuda_graphs.md) ---------------------------------------------------------

// The id of a memory pool of the caching allocator (PyTorch's MempoolId_t): {0, 0} names the general
// pools. Graphs that capture into one id share its memory.
using MempoolId = std::pair<uint64_t, uint64_t>;
// A private pool id never returned before in this process (PyTorch's graph_pool_handle): {0, n}.
RTX_API MempoolId graph_pool_handle();

// Which CUDA calls a capture refuses (PyTorch's capture_error_mode): kGlobal, calls that could break
// it from any thread; kThreadLocal, from the capturing thread; kRelaxed, only those that conflict with
// the capture itself (CUDA's cudaStreamCaptureMode).
enum class CaptureErrorMode { kGlobal, kThreadLocal, kRelaxed };

// The kernels the calling thread has launched so far, run or captured (each cuBLASLt or cuDNN call
// counted as one): the difference over a training step is what ran outside a graph.
RTX_API uint64_t kernel_launches();

// Whether the calling thread's current stream on `device` (-1: current) is capturing a graph.
RTX_API bool is_current_stream_capturing(int device = -1);

// A CUDA graph (torch.cuda.CUDAGraph): the work queued on the current stream between capture_begin
// and capture_end, replayed by replay() with the same memory. Capture runs on a side stream (never the
// default stream) after a warm-up on it; the memory allocated during capture comes from the graph's
// private pool and stays reserved for it until reset(). Random ops draw from the default generator:
// each replay draws fresh counters from it, the numbers an uncaptured run would draw. Operations that
// would wait for the device or touch host memory during capture raise GraphCaptureError.
class RTX_API CUDAGraph {
 public:
  CUDAGraph();
  ~CUDAGraph();  // reset(); a capture under way is abandoned
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  // Starts capturing the current stream of the current device. `pool` {0, 0} gives the graph a pool
  // of its own; another graph's pool() or a graph_pool_handle() shares that one.
  void capture_begin(MempoolId pool = {0, 0}, CaptureErrorMode mode = CaptureErrorMode::kGlobal);
  // Ends the capture (on the stream it began on) and instantiates the graph.
  void capture_end();
  // Abandons a capture under way (after an error inside it): the graph stays empty, its pool is released.
  void abort_capture();
  // Launches the graph on the current stream of its device.
  void replay();
  // Frees the graph and gives its pool back; the graph can capture again.
  void reset();
  // The id of the graph's private pool (after capture_begin).
  MempoolId pool() const;
  // Whether a graph has been captured and not reset.
  bool captured() const;
  // Kernel nodes of the captured graph (0 before capture_end).
  int64_t kernel_count() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// torch.cuda.graph as a scope: synchronizes the device, empties the cache, makes `stream` current (by
// default a side stream kept for captures) and begins capturing into `graph`; finish() ends the
// capture (and reports a broken one). A scope left without finish(), by an exception, abandons it.
class RTX_API GraphCapture {
 public:
  explicit GraphCapture(CUDAGraph& graph, MempoolId pool = {0, 0}, const Stream* stream = nullptr,
                        CaptureErrorMode mode = CaptureErrorMode::kGlobal);
  ~GraphCapture();  // abort() unless finished
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;
  // Ends the capture and instantiates the graph.
  void finish();
  // Abandons the capture: the graph stays empty and its pool is released.
  void abort();

 private:
  CUDAGraph& graph_;
  std::unique_ptr<StreamGuard> stream_;
  bool open_ = true;
};

}  // namespace rtx::cuda
