// The CUDA caching allocator's policy: pools of device segments split into blocks, best-fit reuse per
// stream (huge free segments kept for huge requests), deferred reuse of blocks used on other streams,
// out-of-memory recovery, private pools for CUDA graph capture, statistics and a trace of its calls
// (alloc_trace.h). It talks to the device only through DeviceMemory, so it compiles without CUDA and is
// tested on a fake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// Says whether an allocation on a stream goes to the private pool being allocated to (for a capture:
// whether the stream is capturing into that graph).
using StreamFilter = std::function<bool(StreamHandle)>;

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
  MempoolId pool{0, 0};  // the private pool it belongs to; {0, 0}: the general pools
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
  // Waits for pending stream events and returns every entirely free segment of the general pools and of
  // the private pools no longer in use to the device. During a capture this is deferred to the first
  // allocate or empty_cache after it.
  void empty_cache();

  // Private pools (docs/allocator.md, "Private pools"). Until end_allocate_to_pool(id), allocations on
  // the streams `filter` accepts come from the private pool `id` (made on first use) and its own new
  // segments; the pool's segments serve nothing else, ever. Adds a use of the pool. While any pool is
  // allocated to, a stream capture is taken to be under way: no event is recorded, queried or waited
  // for and no segment is freed; those calls are deferred until it ends. `filter` is called with the
  // allocator's lock held and must not call the allocator. Throws ValueError for the id {0, 0} or a
  // pool already allocated to.
  void begin_allocate_to_pool(MempoolId id, StreamFilter filter);
  // Stops routing allocations to the pool; throws ValueError if it is not allocated to.
  void end_allocate_to_pool(MempoolId id);
  // Drops a use of the pool (a graph reset or destroyed). Once no use is left, empty_cache and the
  // out-of-memory retry return its entirely free segments to the device (blocks still handed out keep
  // theirs until freed), and the pool is forgotten when it holds none. Throws ValueError for a pool
  // that has no use left or is still allocated to.
  void release_pool(MempoolId id);

  MemoryStats stats() const;
  // Sets the peaks to the current values.
  void reset_peak_stats();
  // A short multi-line table of the statistics.
  std::string summary() const;
  // All segments in address order.
  std::vector<SegmentInfo> snapshot() const;

  AllocatorConfig config() const;
  void set_config(const AllocatorConfig& config);

  // Traces every later allocate, free, record_stream, empty_cache, reset_peak_stats and private pool
  // call into `out` (which must outlive the trace) after a header line, the pool calls that bring a
  // fresh allocator's private pools to their present uses, and an allocation line for every block handed
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
  struct PrivatePool;
  // Orders free blocks by (stream, size, address) for best fit.
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  // The free blocks of one size class of the general pools or of a private pool.
  struct Pool {
    Pool(bool is_small, PrivatePool* private_pool) : small(is_small), owner(private_pool) {}
    std::set<Block*, BlockLess> blocks;
    const bool small;
    PrivatePool* const owner;  // the private pool it belongs to; null for the general pools
  };

  Pool& pool_for(size_t size, StreamHandle stream);
  Block* find_free_block(Pool& pool, size_t size, StreamHandle stream);
  static bool kept_for_huge(const Block* block, size_t size);
  Block* allocate_segment(Pool& pool, size_t size, StreamHandle stream);
  void split_block(Block* block, size_t size);
  bool should_split(const Block* block, size_t size) const;
  void free_block(Block* block);
  void merge_into(Block* dst, Block* src);
  void record_events(Block* block);
  void record_deferred_events();
  void process_events();
  void synchronize_events();
  bool releasable(const Block* head) const;
  void release_segment(Block* head);
  void release_cached_segments();
  void collect_garbage(size_t needed);
  bool allocating_to(MempoolId id) const;
  PrivatePool& private_pool(MempoolId id, const char* op);
  size_t largest_free_block() const;
  [[noreturn]] void throw_out_of_memory(size_t bytes);
  Block* active_block(void* ptr, const char* op) const;
  void begin_trace(std::unique_ptr<AllocTraceWriter> trace);

  DeviceMemory& device_;
  AllocatorConfig config_;
  mutable std::mutex mutex_;
  Pool small_pool_{true, nullptr};
  Pool large_pool_{false, nullptr};
  std::unordered_map<void*, Block*> active_;                  // blocks handed out, by address
  std::map<std::uintptr_t, Block*> segments_;                 // first block of every segment, by address
  std::vector<std::pair<EventHandle, Block*>> pending_;       // freed blocks waiting for other streams
  std::map<MempoolId, std::unique_ptr<PrivatePool>> private_pools_;  // until released and empty
  std::vector<std::pair<MempoolId, StreamFilter>> captures_;  // pools allocated to, in the order begun
  std::vector<Block*> deferred_;         // freed during a capture while used on other streams: no events yet
  bool empty_cache_deferred_ = false;    // empty_cache was called during a capture
  MemoryStats stats_;
  uint64_t clock_ = 0;  // counts blocks returned to the pools; orders free segments for garbage collection
  std::unique_ptr<AllocTraceWriter> trace_;  // null unless tracing
};

namespace detail {
// The private pool calls on the caching allocator of `device` (-1: the current device), for CUDA graph
// capture; defined by the CUDA backend (memory.cpp). The filter is called with the allocator's lock
// held: it may query a stream's capture status but must not allocate or free device memory.
RTX_API void begin_allocate_to_pool(int device, MempoolId id, StreamFilter filter);
RTX_API void end_allocate_to_pool(int device, MempoolId id);
RTX_API void release_pool(int device, MempoolId id);
}  // namespace detail

}  // namespace rtx::cuda
