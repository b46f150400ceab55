// CUDA graphs (docs/cuda_graphs.md): capture of the current side stream into a private pool of the
// caching allocator, instantiation and replay; the record of captures under way that capture.h's
// checks read; and the default generator's capture, whose counters each replay advances by writing
// the graph's device cell before launching it.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/capture.h"
#include "backend/cuda/runtime.h"
#include "core/check.h"
#include "core/generator.h"
#include "core/logging.h"
#include "core/tensor_impl.h"

namespace rtx::cuda {

struct CUDAGraph::State {
  int device = -1;
  MempoolId pool{0, 0};
  bool holds_pool = false;  // the graph holds one use of `pool` (from capture_begin until reset)
  CaptureErrorMode mode = CaptureErrorMode::kGlobal;
  cudaStream_t stream = nullptr;  // the stream being captured
  bool capturing = false;
  cudaGraphExec_t exec = nullptr;
  int64_t kernels = 0;
  // The default generator's capture: the device cell {seed, counter shift} the captured random
  // kernels read, the offset the capture started at and the counters it took.
  Tensor rng_cell;
  bool follows_rng = false;
  uint64_t rng_start = 0;
  uint64_t rng_span = 0;
};

namespace {

// A capture under way, as the checks of capture.h see it.
struct ActiveCapture {
  const CUDAGraph::State* graph;
  int device;
  CaptureErrorMode mode;
  std::thread::id thread;
};

std::mutex g_mutex;
std::vector<ActiveCapture>& active_captures() {
  static auto* captures = new std::vector<ActiveCapture>();
  return *captures;
}
std::atomic<int> g_active{0};

const char* mode_name(CaptureErrorMode mode) {
  switch (mode) {
    case CaptureErrorMode::kGlobal: return "global";
    case CaptureErrorMode::kThreadLocal: return "thread_local";
    case CaptureErrorMode::kRelaxed: return "relaxed";
  }
  return "?";
}

cudaStreamCaptureMode cuda_mode(CaptureErrorMode mode) {
  switch (mode) {
    case CaptureErrorMode::kGlobal: return cudaStreamCaptureModeGlobal;
    case CaptureErrorMode::kThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureErrorMode::kRelaxed: return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeGlobal;
}

void add_capture(const CUDAGraph::State& s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  active_captures().push_back({&s, s.device, s.mode, std::this_thread::get_id()});
  g_active.fetch_add(1, std::memory_order_release);
}

void remove_capture(const CUDAGraph::State& s) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& captures = active_captures();
  const auto it = std::find_if(captures.begin(), captures.end(), [&](const ActiveCapture& c) { return c.graph == &s; });
  if (it == captures.end()) return;
  captures.erase(it);
  g_active.fetch_sub(1, std::memory_order_release);
}

// The capture id of `stream` when it is capturing, else 0.
unsigned long long capture_id(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return status == cudaStreamCaptureStatusActive ? id : 0;
}

// The side stream GraphCapture captures on when given none (one per device, as PyTorch's).
Stream default_capture_stream(int device) {
  static std::mutex mutex;
  static auto* streams = new std::vector<std::optional<Stream>>(detail::kMaxDevices);
  std::lock_guard<std::mutex> lock(mutex);
  auto& s = (*streams)[static_cast<size_t>(device)];
  if (!s) s = Stream::create(device);
  return *s;
}

}  // namespace

// ---- the checks of capture.h ----------------------------------------------------------------------

namespace detail {

bool any_capture_active() { return g_active.load(std::memory_order_acquire) > 0; }

bool stream_capturing(cudaStream_t stream) {
  if (stream == nullptr) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;  // a stream whose capture was invalidated
  }
  return status != cudaStreamCaptureStatusNone;
}

void check_no_capture(const char* op, int device, cudaStream_t stream, const char* why) {
  if (!any_capture_active()) return;
  if (stream_capturing(stream)) {
    RTX_THROW(GraphCaptureError,
              "[{}] {}, and its stream on cuda:{} is capturing a CUDA graph, which cannot record that: run it "
              "before capture_begin or after replay(), and inside the graph keep results in device tensors",
              op, why, device);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  for (const ActiveCapture& c : active_captures()) {
    const bool forbids = c.mode == CaptureErrorMode::kGlobal ||
                         (c.mode == CaptureErrorMode::kThreadLocal && c.thread == std::this_thread::get_id());
    RTX_CHECK(!forbids, GraphCaptureError,
              "[{}] {}, while a CUDA graph is being captured on cuda:{} with capture_error_mode '{}', which forbids "
              "that{}: wait until capture_end, or capture with capture_error_mode '{}'",
              op, why, c.device, mode_name(c.mode),
              c.mode == CaptureErrorMode::kGlobal ? " on every thread" : " on the capturing thread",
              c.mode == CaptureErrorMode::kGlobal ? "thread_local' (other threads) or 'relaxed" : "relaxed");
  }
}

RelaxedCaptureScope::RelaxedCaptureScope()
    : previous_(cudaStreamCaptureModeRelaxed), active_(any_capture_active()) {
  if (active_) RTX_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_));
}

RelaxedCaptureScope::~RelaxedCaptureScope() {
  if (active_) (void)cudaThreadExchangeStreamCaptureMode(&previous_);
}

}  // namespace detail

// ---- CUDAGraph ----------------------------------------------------------------------------------------

CUDAGraph::CUDAGraph() : state_(std::make_unique<State>()) {}

CUDAGraph::~CUDAGraph() {
  try {
    reset();
  } catch (const std::exception& e) {
    RTX_LOG_WARN("CUDAGraph: freeing the graph failed: {}", e.what());
  }
}

void CUDAGraph::capture_begin(MempoolId pool, CaptureErrorMode mode) {
  State& s = *state_;
  RTX_CHECK(!s.capturing, GraphCaptureError, "[CUDAGraph.capture_begin] this graph is already capturing");
  RTX_CHECK(s.exec == nullptr, GraphCaptureError,
            "[CUDAGraph.capture_begin] this graph already holds a capture: call reset() before capturing again");
  const int device = current_device();
  const cudaStream_t stream = detail::current_stream_handle(device);
  RTX_CHECK(stream != nullptr, GraphCaptureError,
            "[CUDAGraph.capture_begin] cannot capture the default stream of cuda:{}: capture on a side stream "
            "(`with rt.cuda.graph(g):` makes one current; or `with rt.cuda.stream(rt.cuda.Stream()):` around "
            "capture_begin), after warming the captured work up on that stream",
            device);
  RTX_CHECK(!detail::stream_capturing(stream), GraphCaptureError,
            "[CUDAGraph.capture_begin] the current stream of cuda:{} is already capturing a graph", device);
  // What the libraries would otherwise make lazily, with CUDA calls a capture refuses.
  detail::prepare_blas_for_capture(device, stream);
  detail::prepare_cudnn_for_capture(device, stream);
  DeviceGuard guard(device);
  s.device = device;
  s.mode = mode;
  s.stream = stream;
  s.pool = pool == MempoolId{0, 0} ? graph_pool_handle() : pool;
  // The cell comes from the general pools, before the graph's pool takes this stream's allocations.
  s.rng_cell = rtx::detail::make_tensor({2}, kInt64, Device(kCUDA, device));
  const std::optional<uint64_t> start =
      rtx::detail::default_generator().begin_capture(static_cast<const uint64_t*>(s.rng_cell.data_ptr()));
  s.follows_rng = start.has_value();
  s.rng_start = start.value_or(0);
  const cudaError_t err = cudaStreamBeginCapture(stream, cuda_mode(mode));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (s.follows_rng) rtx::detail::default_generator().end_capture();
    s.rng_cell = Tensor();
    RTX_THROW(GraphCaptureError, "[CUDAGraph.capture_begin] cudaStreamBeginCapture failed on cuda:{}: {}", device,
              cudaGetErrorString(err));
  }
  const unsigned long long id = capture_id(stream);
  detail::begin_allocate_to_pool(device, s.pool, [id](StreamHandle h) {
    return capture_id(reinterpret_cast<cudaStream_t>(h)) == id;
  });
  s.holds_pool = true;
  s.capturing = true;
  add_capture(s);
}

// Ends the bookkeeping of a capture (the CUDA side is ended by the caller).
static void close_capture(CUDAGraph::State& s) {
  s.capturing = false;
  remove_capture(s);
  detail::end_allocate_to_pool(s.device, s.pool);
  if (s.follows_rng) s.rng_span = rtx::detail::default_generator().end_capture();
}

void CUDAGraph::capture_end() {
  State& s = *state_;
  RTX_CHECK(s.capturing, GraphCaptureError,
            "[CUDAGraph.capture_end] no capture is under way: call capture_begin first");
  RTX_CHECK(detail::current_stream_handle(s.device) == s.stream, GraphCaptureError,
            "[CUDAGraph.capture_end] the current stream of cuda:{} is not the one the capture began on: end the "
            "capture inside the same stream context",
            s.device);
  DeviceGuard guard(s.device);
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(s.stream, &graph);
  close_capture(s);
  if (err != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    reset();
    RTX_THROW(GraphCaptureError,
              "[CUDAGraph.capture_end] the capture on cuda:{} was broken: {} (a CUDA call that a capture cannot "
              "record ran during it: a synchronization, a host copy or an allocation outside rtx, from this thread "
              "or, with capture_error_mode 'global', from another)",
              s.device, cudaGetErrorString(err));
  }
  size_t n = 0;
  RTX_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) RTX_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  s.kernels = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    RTX_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) ++s.kernels;
  }
  const cudaError_t made = cudaGraphInstantiate(&s.exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    (void)cudaGetLastError();
    s.exec = nullptr;
    reset();
    RTX_THROW(GraphCaptureError, "[CUDAGraph.capture_end] instantiating the captured graph failed on cuda:{}: {}",
              s.device, cudaGetErrorString(made));
  }
}

void CUDAGraph::abort_capture() {
  State& s = *state_;
  if (!s.capturing) return;
  DeviceGuard guard(s.device);
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(s.stream, &graph) != cudaSuccess) (void)cudaGetLastError();
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  close_capture(s);
  reset();
}

void CUDAGraph::replay() {
  State& s = *state_;
  RTX_CHECK(s.exec != nullptr, GraphCaptureError,
            "[CUDAGraph.replay] {}", s.capturing ? "the graph is still capturing: call capture_end first"
                                                 : "nothing is captured: capture the graph first (or it was reset)");
  DeviceGuard guard(s.device);
  const cudaStream_t stream = detail::current_stream_handle(s.device);
  if (s.follows_rng && s.rng_span > 0) {
    // The counters an uncaptured run would take now: the captured kernels' offsets shift onto them.
    const rtx::detail::RandomCounters now = rtx::detail::default_generator().reserve(s.rng_span);
    detail::write_replay_cell(static_cast<uint64_t*>(s.rng_cell.data_ptr()), now.seed, now.offset - s.rng_start,
                              stream);
  }
  RTX_CUDA_CHECK(cudaGraphLaunch(s.exec, stream));
}

void CUDAGraph::reset() {
  State& s = *state_;
  if (s.capturing) {
    abort_capture();
    return;
  }
  if (s.exec != nullptr) {
    DeviceGuard guard(s.device);
    RTX_CUDA_CHECK(cudaGraphExecDestroy(s.exec));
    s.exec = nullptr;
  }
  if (s.holds_pool) {
    s.holds_pool = false;
    detail::release_pool(s.device, s.pool);
  }
  s.kernels = 0;
  s.rng_cell = Tensor();
  s.follows_rng = false;
  s.rng_span = 0;
}

MempoolId CUDAGraph::pool() const {
  RTX_CHECK(state_->holds_pool, GraphCaptureError,
            "[CUDAGraph.pool] the graph has no pool yet: its pool is chosen by capture_begin");
  return state_->pool;
}

bool CUDAGraph::captured() const { return state_->exec != nullptr; }
int64_t CUDAGraph::kernel_count() const { return state_->kernels; }

uint64_t kernel_launches() { return detail::t_kernel_launches; }

bool is_current_stream_capturing(int device) {
  device = detail::resolve_device(device, "is_current_stream_capturing");
  return detail::stream_capturing(detail::current_stream_handle(device));
}

// ---- GraphCapture -------------------------------------------------------------------------------------

GraphCapture::GraphCapture(CUDAGraph& graph, MempoolId pool, const Stream* stream, CaptureErrorMode mode)
    : graph_(graph) {
  const int device = stream != nullptr ? stream->device() : current_device();
  // What the caller queued before the capture is done, and cached memory goes back to the device, so
  // that the capture starts from a quiet device with its pool to fill.
  synchronize(device);
  empty_cache();
  stream_ = std::make_unique<StreamGuard>(stream != nullptr ? *stream : default_capture_stream(device));
  graph_.capture_begin(pool, mode);
}

GraphCapture::~GraphCapture() {
  try {
    abort();
  } catch (const std::exception& e) {
    RTX_LOG_WARN("GraphCapture: abandoning the capture failed: {}", e.what());
  }
}

void GraphCapture::finish() {
  if (!open_) return;
  open_ = false;
  try {
    graph_.capture_end();
  } catch (...) {
    graph_.abort_capture();
    stream_.reset();
    throw;
  }
  stream_.reset();
}

void GraphCapture::abort() {
  if (!open_) return;
  open_ = false;
  graph_.abort_capture();
  stream_.reset();
}

}  // namespace rtx::cuda
