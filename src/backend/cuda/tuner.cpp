// Kernel auto-tuning on the GPU (backend/cuda/tuner.h): the device model's key, and the timing of a
// kernel's candidates with CUDA events on the caller's stream.
#include "backend/cuda/tuner.h"

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "backend/cuda/capture.h"
#include "core/logging.h"
#include "core/tuning.h"

namespace rtx::cuda::detail {
namespace {

// Two events on the stream, destroyed with the scope.
class EventPair {
 public:
  EventPair() {
    RTX_CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDefault));
    RTX_CUDA_CHECK(cudaEventCreateWithFlags(&stop_, cudaEventDefault));
  }
  ~EventPair() {
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Microseconds per launch of candidate c over reps launches after a warm-up one, or nullopt when the
// candidate cannot run (launch says so, or the launch itself fails): measure_candidates' timer.
std::optional<double> time_candidate(cudaStream_t stream, const EventPair& events, int c, int reps,
                                     const std::function<bool(int)>& launch) {
  const auto run = [&] {
    if (!launch(c)) return false;
    const cudaError_t err = cudaGetLastError();  // a launch error of this candidate only (not sticky)
    return err == cudaSuccess;
  };
  if (!run()) return std::nullopt;
  RTX_CUDA_CHECK(cudaEventRecord(events.start(), stream));
  for (int i = 0; i < reps; ++i)
    if (!run()) return std::nullopt;
  RTX_CUDA_CHECK(cudaEventRecord(events.stop(), stream));
  RTX_CUDA_CHECK(cudaEventSynchronize(events.stop()));
  float ms = 0;
  RTX_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start(), events.stop()));
  return 1000.0 * ms / reps;
}

}  // namespace

const std::string& device_model(int device) {
  static std::mutex mutex;
  static auto* models = new std::map<int, std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  std::string& m = (*models)[device];
  if (m.empty()) {
    cudaDeviceProp p{};
    RTX_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    m = fmt::format("{} sm{}{} {}sm", p.name, p.major, p.minor, p.multiProcessorCount);
  }
  return m;
}

int tuned_choice(int device, cudaStream_t stream, const std::string& kernel, const std::string& shape_class,
                 int candidates, int fallback, const std::function<bool(int)>& launch) {
  if (candidates <= 1 || !rtx::detail::tuning_enabled()) return fallback;
  rtx::detail::TuneCache& cache = rtx::detail::tune_cache_for(device_model(device));
  if (auto hit = cache.find(kernel, shape_class); hit && hit->choice < candidates) return hit->choice;
  // No waiting for the device inside a capture: the built-in choice, kept for the rest of the process
  // so that eager calls compute what the graph's replays do.
  {
    static std::mutex mutex;
    static auto* untuned = new std::set<std::array<std::string, 3>>();
    std::lock_guard<std::mutex> lock(mutex);
    const std::array<std::string, 3> key{device_model(device), kernel, shape_class};
    if (untuned->count(key) != 0) return fallback;
    if (any_capture_active()) {
      untuned->insert(key);
      return fallback;
    }
  }

  const uint64_t launches = t_kernel_launches;
  EventPair events;
  const std::optional<rtx::detail::TuneRecord> measured = rtx::detail::measure_candidates(
      candidates, fallback, [&](int c, int reps) { return time_candidate(stream, events, c, reps, launch); });
  t_kernel_launches = launches;
  if (!measured) return fallback;  // nothing ran: measured again next time
  const rtx::detail::TuneRecord& record = *measured;
  cache.store(kernel, shape_class, record);
  RTX_LOG_INFO("tuned {} [{}]: candidate {} of {} ({:.1f} us; built-in {}: {:.1f} us)", kernel, shape_class,
               record.choice, candidates, record.best_us, fallback, record.default_us);
  return record.choice;
}

int tuned_row_choice(int device, cudaStream_t stream, const char* kernel, DType dtype, int64_t rows, int64_t n,
                     int candidates, int fallback, const std::function<bool(int)>& launch) {
  if (candidates <= 1 || !rtx::detail::tuning_enabled()) return fallback;
  int64_t bucket = 1;
  while (bucket < rows) bucket <<= 1;
  using Key = std::tuple<std::string_view, int, DType, int64_t, int64_t>;
  static std::mutex mutex;
  static auto* choices = new std::map<Key, int>();
  const Key key{kernel, device, dtype, n, bucket};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = choices->find(key); it != choices->end()) return it->second;
  }
  const std::string shape_class = fmt::format("{} n={} rows<={}", dtype_name(dtype), n, bucket);
  const int choice = tuned_choice(device, stream, kernel, shape_class, candidates, fallback, launch);
  std::lock_guard<std::mutex> lock(mutex);
  return choices->emplace(key, choice).first->second;
}

}  // namespace rtx::cuda::detail
