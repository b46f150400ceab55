// The CUDA caching allocator's policy: pools of device segments split into blocks, best-fit reuse per
// stream (huge free segments kept for huge requests), deferred reuse of blocks used on other streams,
// out-of-memory recovery, statistics and a trace of its calls (alloc_trace.h). It talks to the device
// only through DeviceMemory, so it compiles without CUDA and is tested on a fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rtx/cuda.h"
#include "rtx/export.h"

namespace rtx::cuda {

// An opaque stream (a cudaStream_t on CUDA).
using StreamHandle = std::uintptr_t;
// An opaque event (a cudaEvent_t on CUDA).
using EventHandle = std::uintptr_t;

// Free and total device memory in bytes, as cudaMemGetInfo reports them.
struct MemInfo {
  size_t free = 0;
  size_t total = 0;
};

// The device operations the allocator needs; the CUDA backend implements them with the runtime API.
class RTX_API DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Allocates a segment of `bytes`; nullptr when the device is out of memory.
  virtual void* raw_alloc(size_t bytes) = 0;
  // Frees a segment returned by raw_alloc.
  virtual void raw_free(void* ptr) = 0;
  // Free and total device memory.
  virtual MemInfo mem_get_info() = 0;
  // Creates an event.
  virtual EventHandle create_event() = 0;
  // Records `event` on `stream`: it completes when the work queued on the stream so far is done.
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  // Whether the work before `event` has completed (never blocks).
  virtual bool event_done(EventHandle event) = 0;
  // Blocks until `event` has completed.
  virtual void synchronize_event(EventHandle event) = 0;
  // Destroys an event created by create_event.
  virtual void destroy_event(EventHandle event) = 0;
};

// Allocator settings, parsed from RTX_CUDA_ALLOC_CONF by parse_alloc_conf.
struct AllocatorConfig {
  // Blocks larger than this are never split (bytes; SIZE_MAX: no limit).
  size_t max_split_size = SIZE_MAX;
  // When reserved memory would exceed this fraction of device memory, the least recently used free
  // segments are released before a new one is allocated (0: off).
  double garbage_collection_threshold = 0.0;
};

// Parses "key:value,key:value" (keys max_split_size_mb, garbage_collection_threshold); throws ValueError.
RTX_API AllocatorConfig parse_alloc_conf(const std::string& text);

// A byte count for people: "512 B", "1.50 KiB", "20.00 MiB", "1.50 GiB".
RTX_API std::string format_bytes(size_t bytes);

// One block of a segment, as snapshot() reports it.
struct BlockInfo {
  std::uintptr_t address = 0;
  size_t size = 0;
  bool allocated = false;  // handed out, or freed but waiting for events of other streams
};

// One device segment and its blocks in address order.
struct SegmentInfo {
  std::uintptr_t address = 0;
  size_t size = 0;
  StreamHandle stream = 0;
  bool small_pool = false;
  std::vector<BlockInfo> blocks;
};

class AllocTraceWriter;

// A caching allocator over one device, safe to call from several threads.
class RTX_API CachingAllocator {
 public:
  static constexpr size_t kMinBlockSize = 512;              // every size is rounded up to a multiple
  static constexpr size_t kSmallSize = size_t{1} << 20;     // requests up to this use the small pool
  static constexpr size_t kSmallBuffer = size_t{2} << 20;   // segment size of the small pool
  static constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // large requests below this get kLargeBuffer
  static constexpr size_t kLargeBuffer = size_t{20} << 20;  // large pool segment for small large requests
  static constexpr size_t kRoundLarge = size_t{2} << 20;    // larger segments are multiples of this
  static constexpr size_t kHugeSegment = size_t{1} << 30;   // an entirely free segment this large ...
  static constexpr size_t kHugeSplit = 4;                   // ... serves requests of at least 1/4 of it

  explicit CachingAllocator(DeviceMemory& device, AllocatorConfig config = {});
  // Returns every segment, including those of blocks still in use, to the device.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` usable on `stream` (nullptr for 0); throws OutOfMemoryError.
  void* allocate(size_t bytes, StreamHandle stream);
  // Returns a block to the cache (nullptr is ignored); throws ValueError for an unknown pointer.
  void free(void* ptr);
  // Marks a live block as used on `stream`: on free, it is reused only after that stream's work is done.
  void record_stream(void* ptr, StreamHandle stream);
  // Waits for pending stream events and returns every entirely free segment to the device.
  void empty_cache();

  MemoryStats stats() const;
  // Sets the peaks to the current values.
  void reset_peak_stats();
  // A short multi-line table of the statistics.
  std::string summary() const;
  // All segments in address order.
  std::vector<SegmentInfo> snapshot() const;

  AllocatorConfig config() const;
  void set_config(const AllocatorConfig& config);

  // Traces every later allocate, free, record_stream, empty_cache and reset_peak_stats call into `out`
  // (which must outlive the trace) after a header line and an allocation line for every block handed
  // out at the time; see alloc_trace.h. Replaces a running trace.
  void start_trace(std::ostream& out);
  // The same into the file at `path`; if it cannot be written a warning is logged and nothing is traced.
  void start_trace(const std::string& path);
  // Flushes and ends the trace, if one runs.
  void stop_trace();

  // The size a request is rounded up to.
  static size_t round_size(size_t bytes);
  // The segment size allocated from the device for a rounded request.
  static size_t segment_size(size_t rounded);

 private:
  struct Block;
  // Orders free blocks by (stream, size, address) for best fit.
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockLess>;

  Block* find_free_block(Pool& pool, size_t size, StreamHandle stream);
  static bool kept_for_huge(const Block* block, size_t size);
  Block* allocate_segment(Pool& pool, size_t size, StreamHandle stream);
  void split_block(Block* block, size_t size);
  bool should_split(const Block* block, size_t size) const;
  void free_block(Block* block);
  void merge_into(Block* dst, Block* src);
  void process_events();
  void synchronize_events();
  void release_segment(Block* head);
  void release_cached_segments();
  void collect_garbage(size_t needed);
  size_t largest_free_block() const;
  [[noreturn]] void throw_out_of_memory(size_t bytes);
  Block* active_block(void* ptr, const char* op) const;
  void begin_trace(std::unique_ptr<AllocTraceWriter> trace);

  DeviceMemory& device_;
  AllocatorConfig config_;
  mutable std::mutex mutex_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<void*, Block*> active_;                  // blocks handed out, by address
  std::map<std::uintptr_t, Block*> segments_;                 // first block of every segment, by address
  std::vector<std::pair<EventHandle, Block*>> pending_;       // freed blocks waiting for other streams
  MemoryStats stats_;
  uint64_t clock_ = 0;  // counts blocks returned to the pools; orders free segments for garbage collection
  std::unique_ptr<AllocTraceWriter> trace_;  // null unless tracing
};

}  // namespace rtx::cuda
