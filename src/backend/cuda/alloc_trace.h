// The caching allocator's trace: a text record of its allocate, free, record_stream, empty_cache,
// reset_peak_stats and private pool calls (written by AllocTraceWriter while tracing is on), read back by
// read_alloc_trace and replayed by replay_trace against a fresh CachingAllocator on a simulated
// device, so that the placement of a real run can be studied and changed without the GPU.
// docs/allocator.md describes the format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/caching_allocator.h"

namespace rtx::cuda {

inline constexpr int kAllocTraceVersion = 1;

// Appends trace lines to a buffer and writes it out when it is full and at flush(). A failed write
// logs one warning and turns the writer off; the members that trace a call never throw.
class AllocTraceWriter {
 public:
  // Writes to `out`, which must outlive the writer; `name` says what it is in the warning.
  AllocTraceWriter(std::ostream& out, std::string name);
  // Opens `path` for writing and owns the file; failed() tells whether that worked.
  explicit AllocTraceWriter(const std::string& path);
  ~AllocTraceWriter();
  AllocTraceWriter(const AllocTraceWriter&) = delete;
  AllocTraceWriter& operator=(const AllocTraceWriter&) = delete;

  // The first line: the format version, the allocator's constants, its settings and the device's size.
  void header(const AllocatorConfig& config, size_t device_total);
  // `pool`: the private pool the block came from ({0, 0}: the general pools).
  void allocate(size_t bytes, StreamHandle stream, const void* ptr, MempoolId pool);
  void free(const void* ptr);
  void record_stream(const void* ptr, StreamHandle stream);
  void empty_cache();
  void reset_peak();
  void begin_pool(MempoolId pool);
  void end_pool(MempoolId pool);
  void release_pool(MempoolId pool);
  // Writes the buffer and flushes the stream.
  void flush() noexcept;
  // Whether a write failed (or the file could not be opened): nothing more is written.
  bool failed() const { return failed_; }

 private:
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) noexcept;
  void write_out(bool flush_stream) noexcept;

  std::unique_ptr<std::ostream> owned_;
  std::ostream& out_;
  std::string name_;
  std::string buffer_;
  bool failed_ = false;
};

// One traced call. For 'a' (allocate): bytes, stream, address and the private pool it was served from
// ({0, 0}: the general pools); 'f' (free): address; 'r' (record_stream): address, stream; 'e'
// (empty_cache) and 'p' (reset_peak_stats): nothing; 'b' (begin_allocate_to_pool), 'n'
// (end_allocate_to_pool) and 'd' (release_pool): the pool.
struct TraceEvent {
  char op = 0;
  size_t bytes = 0;
  std::uint64_t address = 0;
  StreamHandle stream = 0;
  MempoolId pool{0, 0};
  size_t line = 0;  // 1-based line in the trace
};

// The header: the allocator the trace was recorded with.
struct RTX_API TraceHeader {
  int version = kAllocTraceVersion;
  size_t min_block_size = 0, small_size = 0, small_buffer = 0, min_large_alloc = 0, large_buffer = 0,
         round_large = 0, huge_segment = 0, huge_split = 0;
  AllocatorConfig config;
  size_t device_total = 0;

  // Whether the constants are those of this build's CachingAllocator.
  bool same_constants() const;
};

struct AllocTrace {
  TraceHeader header;
  std::vector<TraceEvent> events;
};

// Parses a trace; `name` (e.g. the path) goes into errors. Throws ValueError naming the line and what is
// wrong with it: a bad header, an unknown event, a bad number, a free or record_stream of an address that
// is not live, an address handed out twice, or a pool call the allocator would refuse (an allocation
// into or the end of a pool not allocated to, a begin of one that is, a release of one without uses or
// still allocated to).
RTX_API AllocTrace read_alloc_trace(std::istream& in, const std::string& name);

struct ReplayOptions {
  AllocatorConfig config;  // the policy's settings (the trace's own are in its header)
  // The warm-up: this fraction of the events after the last reset of the peak statistics (of the
  // whole trace when it has none).
  double warmup_fraction = 0.1;
  bool breakdown = false;  // fill ReplayResult::at_peak_reserved and at_peak_allocated
};

// Segments of one size class and how much of them is handed out.
struct SegmentClassUsage {
  std::string name;
  size_t segments = 0;
  size_t reserved = 0;
  size_t allocated = 0;
  size_t largest_free = 0;  // the largest free block in one of these segments
};

struct ReplayResult {
  size_t events = 0;
  size_t measured_from = 0;  // index of the first event after the last 'p' (0 without one)
  size_t warmup_end = 0;     // index of the first event after the warm-up
  MemoryStats stats;         // after the last event; peaks since measured_from
  uint64_t raw_allocs_after_warmup = 0;
  uint64_t retries_after_warmup = 0;
  uint64_t ooms = 0;                // allocations the replay could not fit in the device's memory
  size_t peak_reserved_event = 0;   // index of the event after which reserved memory first reached its peak
  size_t peak_allocated_event = 0;  // index of the last event after which allocated memory was at its peak
  // The segments by class right after those events (with ReplayOptions::breakdown).
  std::vector<SegmentClassUsage> at_peak_reserved, at_peak_allocated;

  double ratio() const {
    return stats.peak_allocated_bytes == 0
               ? 0.0
               : static_cast<double>(stats.peak_reserved_bytes) / static_cast<double>(stats.peak_allocated_bytes);
  }
};

// A device of `capacity` bytes (0: unlimited) handing out made-up increasing addresses, whose events are
// complete as soon as they are recorded: what a trace is replayed on.
class RTX_API SimulatedDevice final : public DeviceMemory {
 public:
  explicit SimulatedDevice(size_t capacity);
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* ptr) override;
  MemInfo mem_get_info() override;
  EventHandle create_event() override;
  void record_event(EventHandle event, StreamHandle stream) override;
  bool event_done(EventHandle event) override;
  void synchronize_event(EventHandle event) override;
  void destroy_event(EventHandle event) override;

 private:
  size_t capacity_;
  size_t used_ = 0;
  std::uintptr_t next_ = std::uintptr_t{1} << 40;
  std::unordered_map<std::uintptr_t, size_t> sizes_;
  EventHandle events_ = 0;
};

// Runs the trace against a fresh CachingAllocator over a SimulatedDevice of the trace's device_total
// bytes; trace addresses are mapped to the replay's, and each allocation goes to the pool it went to.
RTX_API ReplayResult replay_trace(const AllocTrace& trace, const ReplayOptions& options);

// The segment classes of a snapshot: small pool, 20 MiB large-pool buffers, and large segments below
// 64 MiB, below 256 MiB, below 1 GiB and above.
RTX_API std::vector<SegmentClassUsage> segment_classes(const std::vector<SegmentInfo>& segments);

}  // namespace rtx::cuda
