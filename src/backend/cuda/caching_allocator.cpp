// The CUDA caching allocator's policy (see docs/allocator.md): rounding, pools, best fit (huge free
// segments kept for huge requests), split and merge, cross-stream reuse through events, out-of-memory
// recovery, garbage collection, private pools for CUDA graph capture, statistics, and the calls that
// write its trace.
#include "backend/cuda/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <tuple>

#include "backend/cuda/alloc_trace.h"
#include "core/check.h"
#include "core/checked_size.h"

namespace rtx::cuda {

// A contiguous range of a segment; the segment's blocks form a doubly linked list in address order.
struct CachingAllocator::Block {
  Block(void* p, size_t n, StreamHandle s, Pool* owner) : ptr(p), size(n), stream(s), pool(owner) {}

  void* ptr;
  size_t size;
  StreamHandle stream;                   // the stream it was allocated on; reused only there
  Pool* pool;                            // the pool it returns to
  bool allocated = false;                // handed out, or freed while events are pending
  Block* prev = nullptr;                 // neighbours within the segment
  Block* next = nullptr;
  std::set<StreamHandle> stream_uses;    // other streams it was used on (record_stream)
  int pending_events = 0;                // events to complete before it returns to the pool
  uint64_t freed_at = 0;                 // clock_ when it last returned to the pool

  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(ptr); }
  bool whole_segment() const { return prev == nullptr && next == nullptr; }
};

// A private pool: its own free blocks and the number of its segments. While it has uses (graphs that
// captured into it), its segments stay with it.
struct CachingAllocator::PrivatePool {
  explicit PrivatePool(MempoolId pool_id) : id(pool_id) {}
  const MempoolId id;
  int uses = 1;
  size_t segments = 0;
  Pool small{true, this};
  Pool large{false, this};
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream, a->size, a->address()) < std::make_tuple(b->stream, b->size, b->address());
}

namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// Parses a whole number or decimal value of an option; throws ValueError naming the key.
double parse_number(const std::string& key, const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  RTX_CHECK(!value.empty() && end == begin + value.size() && errno == 0, ValueError,
            "[RTX_CUDA_ALLOC_CONF] option '{}': '{}' is not a number", key, value);
  return v;
}

}  // namespace

AllocatorConfig parse_alloc_conf(const std::string& text) {
  AllocatorConfig config;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    RTX_CHECK(colon != std::string::npos, ValueError,
              "[RTX_CUDA_ALLOC_CONF] option '{}' has no value: write it as key:value", entry);
    const std::string key = trim(entry.substr(0, colon));
    const std::string value = trim(entry.substr(colon + 1));
    if (key == "max_split_size_mb") {
      const double mb = parse_number(key, value);
      RTX_CHECK(mb > 20 && mb < static_cast<double>(SIZE_MAX / kMiB) && mb == std::floor(mb), ValueError, "[RTX_CUDA_ALLOC_CONF] max_split_size_mb must be a whole number of MiB above 20, got {}",
                value);
      config.max_split_size = static_cast<size_t>(mb) * kMiB;
    } else if (key == "garbage_collection_threshold") {
      const double threshold = parse_number(key, value);
      RTX_CHECK(threshold > 0.0 && threshold < 1.0, ValueError,
                "[RTX_CUDA_ALLOC_CONF] garbage_collection_threshold must be in (0, 1), got {}", value);
      config.garbage_collection_threshold = threshold;
    } else {
      RTX_THROW(ValueError,
                "[RTX_CUDA_ALLOC_CONF] unknown option '{}' (known: max_split_size_mb, garbage_collection_threshold)",
                key);
    }
  }
  return config;
}

MempoolId graph_pool_handle() {
  static std::atomic<uint64_t> last{0};
  return {0, ++last};
}

std::string format_bytes(size_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

CachingAllocator::CachingAllocator(DeviceMemory& device, AllocatorConfig config) : device_(device), config_(config) {}

CachingAllocator::~CachingAllocator() {
  trace_.reset();  // flushes
  for (const auto& [event, block] : pending_) device_.destroy_event(event);
  for (const auto& [address, head] : segments_) {
    device_.raw_free(head->ptr);
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : rtx::detail::checked_round_up(bytes, kMinBlockSize, "cuda");
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return rtx::detail::checked_round_up(rounded, kRoundLarge, "cuda");
}

void* CachingAllocator::allocate(size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (captures_.empty()) {
    // Events are neither queried nor waited for during a capture: what it deferred is done now.
    if (empty_cache_deferred_) release_cached_segments();
    process_events();
  }
  const size_t size = round_size(bytes);
  Pool& pool = pool_for(size, stream);
  Block* block = find_free_block(pool, size, stream);
  if (block == nullptr) block = allocate_segment(pool, size, stream);
  if (block == nullptr) {
    // No segment may be freed during a capture.
    if (!captures_.empty()) throw_out_of_memory(bytes);
    // Give back everything cached, then try the pool (pending blocks may have returned) and the device again.
    ++stats_.num_oom_retries;
    release_cached_segments();
    block = find_free_block(pool, size, stream);
    if (block == nullptr) block = allocate_segment(pool, size, stream);
    if (block == nullptr) throw_out_of_memory(bytes);
  }
  if (should_split(block, size)) split_block(block, size);
  block->allocated = true;
  active_.emplace(block->ptr, block);

  stats_.allocated_bytes += block->size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  if (pool.owner != nullptr) stats_.private_pool_allocated_bytes += block->size;
  ++stats_.active_blocks;
  stats_.peak_active_blocks = std::max(stats_.peak_active_blocks, stats_.active_blocks);
  ++stats_.num_allocs;
  if (trace_ != nullptr) trace_->allocate(bytes, stream, block->ptr, pool.owner != nullptr ? pool.owner->id : MempoolId{});
  return block->ptr;
}

// The pool a request is served from: that of the first private pool allocated to whose filter takes
// the stream, else the general one.
CachingAllocator::Pool& CachingAllocator::pool_for(size_t size, StreamHandle stream) {
  const bool small = size <= kSmallSize;
  for (const auto& [id, filter] : captures_) {
    if (filter(stream)) {
      PrivatePool& p = *private_pools_.at(id);
      return small ? p.small : p.large;
    }
  }
  return small ? small_pool_ : large_pool_;
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, size_t size, StreamHandle stream) {
  Block key(nullptr, size, stream, &pool);
  for (auto it = pool.blocks.lower_bound(&key); it != pool.blocks.end() && (*it)->stream == stream; ++it) {
    Block* block = *it;
    // Oversize blocks serve only oversize requests, and only with bounded waste since they are never split;
    // every later block is larger still.
    if (size < config_.max_split_size && block->size >= config_.max_split_size) return nullptr;
    if (size >= config_.max_split_size && block->size >= size + kLargeBuffer) return nullptr;
    if (kept_for_huge(block, size)) continue;
    pool.blocks.erase(it);
    return block;
  }
  return nullptr;
}

// An entirely free segment of kHugeSegment bytes or more is split only for a request of at least
// 1/kHugeSplit of it. The largest tensors of a training step (a language model's logits and their
// gradient) get segments of their own in the first step; handed to smaller requests whenever they are
// free (an optimizer state made after the first step, the next step's activations), those segments
// are taken when the large tensors come back and each later step needs another one.
bool CachingAllocator::kept_for_huge(const Block* block, size_t size) {
  return block->whole_segment() && block->size >= kHugeSegment && size < block->size / kHugeSplit;
}

CachingAllocator::Block* CachingAllocator::allocate_segment(Pool& pool, size_t size, StreamHandle stream) {
  const size_t bytes = segment_size(size);
  collect_garbage(bytes);
  void* ptr = device_.raw_alloc(bytes);
  if (ptr == nullptr) return nullptr;
  auto* block = new Block(ptr, bytes, stream, &pool);
  segments_.emplace(block->address(), block);
  stats_.reserved_bytes += bytes;
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  if (pool.owner != nullptr) {
    ++pool.owner->segments;
    stats_.private_pool_reserved_bytes += bytes;
  }
  ++stats_.num_raw_allocs;
  return block;
}

bool CachingAllocator::should_split(const Block* block, size_t size) const {
  const size_t remaining = block->size - size;
  if (block->pool->small) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

// Keeps the first `size` bytes in `block` and returns the rest to the pool as a new block.
void CachingAllocator::split_block(Block* block, size_t size) {
  auto* rest = new Block(static_cast<char*>(block->ptr) + size, block->size - size, block->stream, block->pool);
  rest->prev = block;
  rest->next = block->next;
  if (rest->next != nullptr) rest->next->prev = rest;
  block->next = rest;
  block->size = size;
  rest->freed_at = clock_;
  rest->pool->blocks.insert(rest);
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = active_block(ptr, "free");
  if (trace_ != nullptr) trace_->free(ptr);
  active_.erase(ptr);
  stats_.allocated_bytes -= block->size;
  if (block->pool->owner != nullptr) stats_.private_pool_allocated_bytes -= block->size;
  --stats_.active_blocks;
  if (block->stream_uses.empty()) {
    free_block(block);
  } else if (!captures_.empty()) {
    // An event recorded now could be part of a graph, and could not be queried: the block stays out of
    // its pool until the capture is over and events are recorded then (record_deferred_events).
    deferred_.push_back(block);
  } else {
    record_events(block);
  }
}

// Records an event on each other stream the block was used on; it returns to its pool when all have completed.
void CachingAllocator::record_events(Block* block) {
  for (StreamHandle s : block->stream_uses) {
    const EventHandle event = device_.create_event();
    device_.record_event(event, s);
    pending_.emplace_back(event, block);
    ++block->pending_events;
  }
  block->stream_uses.clear();
}

void CachingAllocator::record_deferred_events() {
  for (Block* block : deferred_) record_events(block);
  deferred_.clear();
}

void CachingAllocator::record_stream(void* ptr, StreamHandle stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = active_block(ptr, "record_stream");
  if (trace_ != nullptr) trace_->record_stream(ptr, stream);
  if (stream != block->stream) block->stream_uses.insert(stream);
}

CachingAllocator::Block* CachingAllocator::active_block(void* ptr, const char* op) const {
  const auto it = active_.find(ptr);
  RTX_CHECK(it != active_.end(), ValueError,
            "[cuda] {}: pointer {} is not the start of a live block of this allocator (double free or foreign pointer?)",
            op, fmt::ptr(ptr));
  return it->second;
}

// Returns a block to its pool, merged with its free neighbours.
void CachingAllocator::free_block(Block* block) {
  block->allocated = false;
  if (block->next != nullptr && !block->next->allocated) merge_into(block, block->next);
  if (block->prev != nullptr && !block->prev->allocated) {
    Block* prev = block->prev;
    merge_into(prev, block);
    block = prev;
  }
  block->freed_at = ++clock_;
  block->pool->blocks.insert(block);
}

// Appends `src`, the free block right after `dst`, to `dst` and deletes it; the segment's first block survives.
void CachingAllocator::merge_into(Block* dst, Block* src) {
  dst->pool->blocks.erase(dst);
  src->pool->blocks.erase(src);
  dst->size += src->size;
  dst->next = src->next;
  if (dst->next != nullptr) dst->next->prev = dst;
  delete src;
}

// Neither runs during a capture; both record the events deferred by one first.
void CachingAllocator::process_events() {
  record_deferred_events();
  auto done = std::stable_partition(pending_.begin(), pending_.end(),
                                    [this](const auto& entry) { return !device_.event_done(entry.first); });
  for (auto it = done; it != pending_.end(); ++it) {
    device_.destroy_event(it->first);
    if (--it->second->pending_events == 0) free_block(it->second);
  }
  pending_.erase(done, pending_.end());
}

void CachingAllocator::synchronize_events() {
  record_deferred_events();
  for (const auto& [event, block] : pending_) {
    device_.synchronize_event(event);
    device_.destroy_event(event);
    if (--block->pending_events == 0) free_block(block);
  }
  pending_.clear();
}

// Whether a segment may go back to the device: entirely free, and of the general pools or of a private
// pool no graph uses.
bool CachingAllocator::releasable(const Block* head) const {
  const PrivatePool* owner = head->pool->owner;
  return !head->allocated && head->whole_segment() && (owner == nullptr || owner->uses == 0);
}

void CachingAllocator::release_segment(Block* head) {
  head->pool->blocks.erase(head);
  segments_.erase(head->address());
  device_.raw_free(head->ptr);
  stats_.reserved_bytes -= head->size;
  if (head->pool->owner != nullptr) {
    --head->pool->owner->segments;
    stats_.private_pool_reserved_bytes -= head->size;
  }
  ++stats_.num_raw_frees;
  delete head;
}

// Waits for all pending events, returns every releasable segment and forgets the private pools left
// without uses or segments. Never runs during a capture.
void CachingAllocator::release_cached_segments() {
  synchronize_events();
  empty_cache_deferred_ = false;
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = (it++)->second;
    if (releasable(head)) release_segment(head);
  }
  for (auto it = private_pools_.begin(); it != private_pools_.end();) {
    if (it->second->uses == 0 && it->second->segments == 0) it = private_pools_.erase(it);
    else ++it;
  }
}

// Releases least recently used free segments while reserving `needed` more bytes would pass the threshold.
// Not during a capture, which may not free segments.
void CachingAllocator::collect_garbage(size_t needed) {
  if (config_.garbage_collection_threshold <= 0.0 || !captures_.empty()) return;
  const double limit = config_.garbage_collection_threshold * static_cast<double>(device_.mem_get_info().total);
  if (static_cast<double>(stats_.reserved_bytes + needed) <= limit) return;
  std::vector<Block*> unused;
  for (const auto& [address, head] : segments_)
    if (releasable(head)) unused.push_back(head);
  std::sort(unused.begin(), unused.end(), [](const Block* a, const Block* b) { return a->freed_at < b->freed_at; });
  for (Block* head : unused) {
    if (static_cast<double>(stats_.reserved_bytes + needed) <= limit) break;
    release_segment(head);
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (captures_.empty()) release_cached_segments();
  else empty_cache_deferred_ = true;
  if (trace_ != nullptr) {
    trace_->empty_cache();
    trace_->flush();
  }
}

void CachingAllocator::begin_allocate_to_pool(MempoolId id, StreamFilter filter) {
  std::lock_guard<std::mutex> lock(mutex_);
  RTX_CHECK(id != MempoolId{}, ValueError,
            "[cuda] begin_allocate_to_pool: the pool id (0, 0) names the general pools; get one from graph_pool_handle()");
  RTX_CHECK(!allocating_to(id), ValueError, "[cuda] begin_allocate_to_pool: pool ({}, {}) is already allocated to",
            id.first, id.second);
  RTX_CHECK(filter != nullptr, ValueError, "[cuda] begin_allocate_to_pool: no stream filter for pool ({}, {})",
            id.first, id.second);
  auto& pool = private_pools_[id];
  if (pool == nullptr) pool = std::make_unique<PrivatePool>(id);
  else ++pool->uses;  // shared with earlier graphs, or taken up again after its last release
  captures_.emplace_back(id, std::move(filter));
  if (trace_ != nullptr) trace_->begin_pool(id);
}

void CachingAllocator::end_allocate_to_pool(MempoolId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = std::find_if(captures_.begin(), captures_.end(), [&](const auto& c) { return c.first == id; });
  RTX_CHECK(it != captures_.end(), ValueError, "[cuda] end_allocate_to_pool: pool ({}, {}) is not allocated to",
            id.first, id.second);
  captures_.erase(it);
  if (trace_ != nullptr) trace_->end_pool(id);
}

void CachingAllocator::release_pool(MempoolId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  PrivatePool& pool = private_pool(id, "release_pool");
  RTX_CHECK(pool.uses > 0, ValueError, "[cuda] release_pool: pool ({}, {}) has no use left to release", id.first,
            id.second);
  RTX_CHECK(!allocating_to(id), ValueError,
            "[cuda] release_pool: pool ({}, {}) is still allocated to; call end_allocate_to_pool first", id.first,
            id.second);
  --pool.uses;
  if (trace_ != nullptr) trace_->release_pool(id);
}

bool CachingAllocator::allocating_to(MempoolId id) const {
  return std::any_of(captures_.begin(), captures_.end(), [&](const auto& c) { return c.first == id; });
}

CachingAllocator::PrivatePool& CachingAllocator::private_pool(MempoolId id, const char* op) {
  const auto it = private_pools_.find(id);
  RTX_CHECK(it != private_pools_.end(), ValueError, "[cuda] {}: no private pool ({}, {})", op, id.first, id.second);
  return *it->second;
}

size_t CachingAllocator::largest_free_block() const {
  size_t largest = 0;
  for (const auto& [address, head] : segments_)
    for (const Block* b = head; b != nullptr; b = b->next)
      if (!b->allocated) largest = std::max(largest, b->size);
  return largest;
}

void CachingAllocator::throw_out_of_memory(size_t bytes) {
  ++stats_.num_ooms;
  const MemInfo info = device_.mem_get_info();
  const std::string in_private =
      stats_.private_pool_reserved_bytes == 0
          ? std::string()
          : fmt::format(" ({} allocated and {} reserved in private pools)",
                        format_bytes(stats_.private_pool_allocated_bytes),
                        format_bytes(stats_.private_pool_reserved_bytes));
  const std::string state = fmt::format(
      "tried to allocate {} ({} bytes); device: {} free of {} total; this allocator: {} allocated, {} reserved{}, "
      "largest free cached block {}",
      format_bytes(bytes), bytes, format_bytes(info.free), format_bytes(info.total),
      format_bytes(stats_.allocated_bytes), format_bytes(stats_.reserved_bytes), in_private,
      format_bytes(largest_free_block()));
  if (!captures_.empty()) {
    RTX_THROW(OutOfMemoryError,
              "[cuda] out of memory: {}. A CUDA graph capture is under way, during which cached segments cannot be "
              "returned to the device: call empty_cache() before capturing, free tensors you no longer need before "
              "it, or capture a smaller batch",
              state);
  }
  RTX_THROW(OutOfMemoryError,
            "[cuda] out of memory: {}. Free tensors you no longer need, call empty_cache(), use a smaller batch, or, "
            "if reserved is much larger than allocated (fragmentation), set RTX_CUDA_ALLOC_CONF=max_split_size_mb:N "
            "(N in MiB, above 20)",
            state);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (trace_ != nullptr) trace_->reset_peak();
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
  stats_.peak_active_blocks = stats_.active_blocks;
}

std::string CachingAllocator::summary() const {
  const MemoryStats s = stats();
  const AllocatorConfig c = config();
  std::string out = fmt::format("{:<16}{:>14}{:>14}\n", "cuda allocator", "current", "peak");
  out += fmt::format("{:<16}{:>14}{:>14}\n", "allocated", format_bytes(s.allocated_bytes),
                     format_bytes(s.peak_allocated_bytes));
  out += fmt::format("{:<16}{:>14}{:>14}\n", "reserved", format_bytes(s.reserved_bytes),
                     format_bytes(s.peak_reserved_bytes));
  out += fmt::format("{:<16}{:>14}{:>14}\n", "active blocks", s.active_blocks, s.peak_active_blocks);
  out += fmt::format("private pools: {} allocated, {} reserved (included above)\n",
                     format_bytes(s.private_pool_allocated_bytes), format_bytes(s.private_pool_reserved_bytes));
  out += fmt::format("fragmentation {:.1f}%; allocations {}, segments allocated {}, freed {}; oom retries {}, ooms {}\n",
                     100.0 * s.fragmentation(), s.num_allocs, s.num_raw_allocs, s.num_raw_frees, s.num_oom_retries,
                     s.num_ooms);
  out += fmt::format("max_split_size {}, garbage_collection_threshold {}\n",
                     c.max_split_size == SIZE_MAX ? std::string("unlimited") : format_bytes(c.max_split_size),
                     c.garbage_collection_threshold > 0.0 ? fmt::format("{}", c.garbage_collection_threshold)
                                                          : std::string("off"));
  return out;
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SegmentInfo> segments;
  for (const auto& [address, head] : segments_) {
    SegmentInfo seg;
    seg.address = address;
    seg.stream = head->stream;
    seg.small_pool = head->pool->small;
    if (head->pool->owner != nullptr) seg.pool = head->pool->owner->id;
    for (const Block* b = head; b != nullptr; b = b->next) {
      seg.blocks.push_back({b->address(), b->size, b->allocated});
      seg.size += b->size;
    }
    segments.push_back(std::move(seg));
  }
  return segments;
}

AllocatorConfig CachingAllocator::config() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return config_;
}

void CachingAllocator::set_config(const AllocatorConfig& config) {
  std::lock_guard<std::mutex> lock(mutex_);
  config_ = config;
}

void CachingAllocator::start_trace(std::ostream& out) {
  begin_trace(std::make_unique<AllocTraceWriter>(out, "the trace stream"));
}

void CachingAllocator::start_trace(const std::string& path) { begin_trace(std::make_unique<AllocTraceWriter>(path)); }

void CachingAllocator::begin_trace(std::unique_ptr<AllocTraceWriter> trace) {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.reset();
  if (trace->failed()) return;
  trace->header(config_, device_.mem_get_info().total);
  // Blocks handed out before the trace starts appear as its first allocations, and the private pools as
  // the calls that give a fresh allocator their uses, so that it reads alone.
  std::vector<const Block*> live;
  for (const auto& [ptr, block] : active_) live.push_back(block);
  std::sort(live.begin(), live.end(), [](const Block* a, const Block* b) { return a->address() < b->address(); });
  for (const auto& [id, pool] : private_pools_) {
    const bool routing = allocating_to(id);
    trace->begin_pool(id);
    for (const Block* b : live)
      if (b->pool->owner == pool.get()) trace->allocate(b->size, b->stream, b->ptr, id);
    if (!(routing && pool->uses == 1)) trace->end_pool(id);
    for (int use = 2; use <= pool->uses; ++use) {
      trace->begin_pool(id);
      if (!(routing && use == pool->uses)) trace->end_pool(id);
    }
    if (pool->uses == 0) trace->release_pool(id);
  }
  for (const Block* b : live)
    if (b->pool->owner == nullptr) trace->allocate(b->size, b->stream, b->ptr, MempoolId{});
  trace_ = std::move(trace);
}

void CachingAllocator::stop_trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.reset();
}

}  // namespace rtx::cuda
