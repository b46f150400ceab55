// The CUDA caching allocator's policy (see docs/allocator.md): rounding, pools, best fit (huge free
// segments kept for huge requests), split and merge, cross-stream reuse through events, out-of-memory
// recovery, garbage collection, statistics, and the calls that write its trace.
#include "backend/cuda/caching_allocator.h"

#include <algorithm>
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
  return bytes < kMinBlockSize ? kMinBlockSize : detail::checked_round_up(bytes, kMinBlockSize, "cuda");
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return detail::checked_round_up(rounded, kRoundLarge, "cuda");
}

void* CachingAllocator::allocate(size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  process_events();
  const size_t size = round_size(bytes);
  Pool& pool = size <= kSmallSize ? small_pool_ : large_pool_;
  Block* block = find_free_block(pool, size, stream);
  if (block == nullptr) block = allocate_segment(pool, size, stream);
  if (block == nullptr) {
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
  ++stats_.active_blocks;
  stats_.peak_active_blocks = std::max(stats_.peak_active_blocks, stats_.active_blocks);
  ++stats_.num_allocs;
  if (trace_ != nullptr) trace_->allocate(bytes, stream, block->ptr);
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, size_t size, StreamHandle stream) {
  Block key(nullptr, size, stream, &pool);
  for (auto it = pool.lower_bound(&key); it != pool.end() && (*it)->stream == stream; ++it) {
    Block* block = *it;
    // Oversize blocks serve only oversize requests, and only with bounded waste since they are never split;
    // every later block is larger still.
    if (size < config_.max_split_size && block->size >= config_.max_split_size) return nullptr;
    if (size >= config_.max_split_size && block->size >= size + kLargeBuffer) return nullptr;
    if (kept_for_huge(block, size)) continue;
    pool.erase(it);
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
  ++stats_.num_raw_allocs;
  return block;
}

bool CachingAllocator::should_split(const Block* block, size_t size) const {
  const size_t remaining = block->size - size;
  if (block->pool == &small_pool_) return remaining >= kMinBlockSize;
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
  rest->pool->insert(rest);
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Block* block = active_block(ptr, "free");
  if (trace_ != nullptr) trace_->free(ptr);
  active_.erase(ptr);
  stats_.allocated_bytes -= block->size;
  --stats_.active_blocks;
  if (block->stream_uses.empty()) {
    free_block(block);
    return;
  }
  for (StreamHandle s : block->stream_uses) {
    const EventHandle event = device_.create_event();
    device_.record_event(event, s);
    pending_.emplace_back(event, block);
    ++block->pending_events;
  }
  block->stream_uses.clear();
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
  block->pool->insert(block);
}

// Appends `src`, the free block right after `dst`, to `dst` and deletes it; the segment's first block survives.
void CachingAllocator::merge_into(Block* dst, Block* src) {
  dst->pool->erase(dst);
  src->pool->erase(src);
  dst->size += src->size;
  dst->next = src->next;
  if (dst->next != nullptr) dst->next->prev = dst;
  delete src;
}

void CachingAllocator::process_events() {
  auto done = std::stable_partition(pending_.begin(), pending_.end(),
                                    [this](const auto& entry) { return !device_.event_done(entry.first); });
  for (auto it = done; it != pending_.end(); ++it) {
    device_.destroy_event(it->first);
    if (--it->second->pending_events == 0) free_block(it->second);
  }
  pending_.erase(done, pending_.end());
}

void CachingAllocator::synchronize_events() {
  for (const auto& [event, block] : pending_) {
    device_.synchronize_event(event);
    device_.destroy_event(event);
    if (--block->pending_events == 0) free_block(block);
  }
  pending_.clear();
}

void CachingAllocator::release_segment(Block* head) {
  head->pool->erase(head);
  segments_.erase(head->address());
  device_.raw_free(head->ptr);
  stats_.reserved_bytes -= head->size;
  ++stats_.num_raw_frees;
  delete head;
}

void CachingAllocator::release_cached_segments() {
  synchronize_events();
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = (it++)->second;
    if (!head->allocated && head->whole_segment()) release_segment(head);
  }
}

// Releases least recently used free segments while reserving `needed` more bytes would pass the threshold.
void CachingAllocator::collect_garbage(size_t needed) {
  if (config_.garbage_collection_threshold <= 0.0) return;
  const double limit = config_.garbage_collection_threshold * static_cast<double>(device_.mem_get_info().total);
  if (static_cast<double>(stats_.reserved_bytes + needed) <= limit) return;
  std::vector<Block*> unused;
  for (const auto& [address, head] : segments_)
    if (!head->allocated && head->whole_segment()) unused.push_back(head);
  std::sort(unused.begin(), unused.end(), [](const Block* a, const Block* b) { return a->freed_at < b->freed_at; });
  for (Block* head : unused) {
    if (static_cast<double>(stats_.reserved_bytes + needed) <= limit) break;
    release_segment(head);
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_segments();
  if (trace_ != nullptr) {
    trace_->empty_cache();
    trace_->flush();
  }
}

size_t CachingAllocator::largest_free_block() const {
  size_t largest = 0;
  for (const Pool* pool : {&small_pool_, &large_pool_})
    for (const Block* b : *pool) largest = std::max(largest, b->size);
  return largest;
}

void CachingAllocator::throw_out_of_memory(size_t bytes) {
  ++stats_.num_ooms;
  const MemInfo info = device_.mem_get_info();
  RTX_THROW(OutOfMemoryError,
            "[cuda] out of memory: tried to allocate {} ({} bytes); device: {} free of {} total; this allocator: {} "
            "allocated, {} reserved, largest free cached block {}. Free tensors you no longer need, call "
            "empty_cache(), use a smaller batch, or, if reserved is much larger than allocated (fragmentation), set "
            "RTX_CUDA_ALLOC_CONF=max_split_size_mb:N (N in MiB, above 20)",
            format_bytes(bytes), bytes, format_bytes(info.free), format_bytes(info.total),
            format_bytes(stats_.allocated_bytes), format_bytes(stats_.reserved_bytes),
            format_bytes(largest_free_block()));
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
    seg.small_pool = head->pool == &small_pool_;
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
  // Blocks handed out before the trace starts appear as its first allocations, so that it reads alone.
  std::vector<const Block*> live;
  for (const auto& [ptr, block] : active_) live.push_back(block);
  std::sort(live.begin(), live.end(), [](const Block* a, const Block* b) { return a->address() < b->address(); });
  for (const Block* b : live) trace->allocate(b->size, b->stream, b->ptr);
  trace_ = std::move(trace);
}

void CachingAllocator::stop_trace() {
  std::lock_guard<std::mutex> lock(mutex_);
  trace_.reset();
}

}  // namespace rtx::cuda
