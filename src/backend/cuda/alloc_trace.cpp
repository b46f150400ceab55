// The caching allocator's trace: the buffered writer, the reader (every line checked, errors naming
// it) and the replay against a fresh CachingAllocator on a simulated device.
#include "backend/cuda/alloc_trace.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <istream>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "core/logging.h"

namespace rtx::cuda {

namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;  // written out when the buffer holds this much
constexpr const char* kMagic = "rtx-alloc-trace";

}  // namespace

// ---- writing ------------------------------------------------------------------------------------

AllocTraceWriter::AllocTraceWriter(std::ostream& out, std::string name) : out_(out), name_(std::move(name)) {}

AllocTraceWriter::AllocTraceWriter(const std::string& path)
    : owned_(std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc | std::ios::binary)),
      out_(*owned_),
      name_("'" + path + "'") {
  if (!out_) {
    failed_ = true;
    RTX_LOG_WARN("[cuda] allocation trace: cannot open {} for writing ({}); the allocator is not traced", name_,
                 std::strerror(errno));
  }
}

AllocTraceWriter::~AllocTraceWriter() { flush(); }

// Every line goes through here: formatting can only fail for want of host memory, which turns the
// writer off instead of reaching the allocation being traced.
template <typename... Args>
void AllocTraceWriter::line(fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (failed_) return;
  try {
    fmt::format_to(std::back_inserter(buffer_), format, std::forward<Args>(args)...);
  } catch (const std::exception&) {
    buffer_.clear();
    failed_ = true;
    RTX_LOG_WARN("[cuda] allocation trace to {}: out of host memory; tracing stopped", name_);
    return;
  }
  if (buffer_.size() >= kBufferBytes) write_out(false);
}

void AllocTraceWriter::header(const AllocatorConfig& config, size_t device_total) {
  line("{} {} min_block_size={} small_size={} small_buffer={} min_large_alloc={} large_buffer={} round_large={} "
       "huge_segment={} huge_split={} max_split_size={} garbage_collection_threshold={} device_total={}\n",
       kMagic, kAllocTraceVersion, CachingAllocator::kMinBlockSize, CachingAllocator::kSmallSize,
       CachingAllocator::kSmallBuffer, CachingAllocator::kMinLargeAlloc, CachingAllocator::kLargeBuffer,
       CachingAllocator::kRoundLarge, CachingAllocator::kHugeSegment, CachingAllocator::kHugeSplit,
       config.max_split_size == SIZE_MAX ? std::string("none") : std::to_string(config.max_split_size),
       config.garbage_collection_threshold, device_total);
}

void AllocTraceWriter::allocate(size_t bytes, StreamHandle stream, const void* ptr, MempoolId pool) {
  if (pool == MempoolId{}) {
    line("a {} {:x} {:x}\n", bytes, stream, reinterpret_cast<std::uintptr_t>(ptr));
  } else {
    line("a {} {:x} {:x} {:x} {:x}\n", bytes, stream, reinterpret_cast<std::uintptr_t>(ptr), pool.first, pool.second);
  }
}

void AllocTraceWriter::free(const void* ptr) { line("f {:x}\n", reinterpret_cast<std::uintptr_t>(ptr)); }

void AllocTraceWriter::record_stream(const void* ptr, StreamHandle stream) {
  line("r {:x} {:x}\n", reinterpret_cast<std::uintptr_t>(ptr), stream);
}

void AllocTraceWriter::empty_cache() { line("e\n"); }

void AllocTraceWriter::reset_peak() { line("p\n"); }

void AllocTraceWriter::begin_pool(MempoolId pool) { line("b {:x} {:x}\n", pool.first, pool.second); }

void AllocTraceWriter::end_pool(MempoolId pool) { line("n {:x} {:x}\n", pool.first, pool.second); }

void AllocTraceWriter::release_pool(MempoolId pool) { line("d {:x} {:x}\n", pool.first, pool.second); }

void AllocTraceWriter::flush() noexcept {
  if (!failed_) write_out(true);
}

void AllocTraceWriter::write_out(bool flush_stream) noexcept {
  bool ok = false;
  errno = 0;
  try {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    if (flush_stream) out_.flush();
    ok = static_cast<bool>(out_);
  } catch (const std::exception&) {
    // a stream that throws on errors: the same failure
  }
  buffer_.clear();
  if (!ok) {
    failed_ = true;
    RTX_LOG_WARN("[cuda] allocation trace: writing to {} failed{}; tracing stopped", name_,
                 errno != 0 ? fmt::format(" ({})", std::strerror(errno)) : std::string());
  }
}

// ---- reading ------------------------------------------------------------------------------------

bool TraceHeader::same_constants() const {
  return min_block_size == CachingAllocator::kMinBlockSize && small_size == CachingAllocator::kSmallSize &&
         small_buffer == CachingAllocator::kSmallBuffer && min_large_alloc == CachingAllocator::kMinLargeAlloc &&
         large_buffer == CachingAllocator::kLargeBuffer && round_large == CachingAllocator::kRoundLarge &&
         huge_segment == CachingAllocator::kHugeSegment && huge_split == CachingAllocator::kHugeSplit;
}

namespace {

class TraceParser {
 public:
  explicit TraceParser(const std::string& name) : name_(name) {}

  [[noreturn]] void fail(const std::string& what) const {
    const std::string shown = text_.size() > 100 ? text_.substr(0, 100) + "..." : text_;
    RTX_THROW(ValueError, "[alloc_trace] {} line {}: {} (the line reads '{}')", name_, line_, what, shown);
  }

  void start_line(size_t line, std::string text) {
    line_ = line;
    text_ = std::move(text);
    fields_.clear();
    size_t start = 0;
    while (start < text_.size()) {
      const size_t space = std::min(text_.find(' ', start), text_.size());
      if (space == start) fail("fields must be separated by single spaces");
      fields_.emplace_back(text_.data() + start, space - start);
      start = space + 1;
    }
    if (!text_.empty() && text_.back() == ' ') fail("trailing space");
  }

  const std::vector<std::string_view>& fields() const { return fields_; }

  void expect_fields(size_t n, const char* form) const {
    if (fields_.size() != n) fail(fmt::format("expected '{}'", form));
  }

  template <typename T>
  T number(std::string_view field, int base, const char* what) const {
    T value{};
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value, base);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size())
      fail(fmt::format("{} '{}' is not a {} number", what, field, base == 16 ? "hexadecimal" : "decimal"));
    return value;
  }

  double real(std::string_view field, const char* what) const {
    const std::string s(field);
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || errno != 0) fail(fmt::format("{} '{}' is not a number", what, s));
    return v;
  }

 private:
  const std::string& name_;
  size_t line_ = 0;
  std::string text_;
  std::vector<std::string_view> fields_;
};

TraceHeader parse_header(TraceParser& p) {
  const auto& f = p.fields();
  if (f.empty() || f[0] != kMagic)
    p.fail(fmt::format("not an allocation trace: the first line must start with '{}'", kMagic));
  if (f.size() < 2) p.fail("the header lacks the format version");
  TraceHeader h;
  h.version = p.number<int>(f[1], 10, "the format version");
  if (h.version != kAllocTraceVersion)
    p.fail(fmt::format("format version {} is not supported (this build reads version {})", h.version,
                       kAllocTraceVersion));
  std::map<std::string_view, size_t*> sizes = {
      {"min_block_size", &h.min_block_size},   {"small_size", &h.small_size},     {"small_buffer", &h.small_buffer},
      {"min_large_alloc", &h.min_large_alloc}, {"large_buffer", &h.large_buffer}, {"round_large", &h.round_large},
      {"huge_segment", &h.huge_segment},       {"huge_split", &h.huge_split},     {"device_total", &h.device_total}};
  std::unordered_set<std::string_view> seen;
  for (size_t i = 2; i < f.size(); ++i) {
    const size_t eq = f[i].find('=');
    if (eq == std::string_view::npos) p.fail(fmt::format("header field '{}' is not key=value", f[i]));
    const std::string_view key = f[i].substr(0, eq), value = f[i].substr(eq + 1);
    if (!seen.insert(key).second) p.fail(fmt::format("header field '{}' appears twice", key));
    if (const auto it = sizes.find(key); it != sizes.end()) {
      *it->second = p.number<size_t>(value, 10, "the header value");
    } else if (key == "max_split_size") {
      h.config.max_split_size = value == "none" ? SIZE_MAX : p.number<size_t>(value, 10, "max_split_size");
    } else if (key == "garbage_collection_threshold") {
      h.config.garbage_collection_threshold = p.real(value, "garbage_collection_threshold");
    } else {
      p.fail(fmt::format("unknown header field '{}'", key));
    }
  }
  for (const auto& [key, ptr] : sizes)
    if (!seen.count(key)) p.fail(fmt::format("the header lacks '{}'", key));
  for (const char* key : {"max_split_size", "garbage_collection_threshold"})
    if (!seen.count(key)) p.fail(fmt::format("the header lacks '{}'", key));
  return h;
}

}  // namespace

AllocTrace read_alloc_trace(std::istream& in, const std::string& name) {
  TraceParser p(name);
  AllocTrace trace;
  std::string text;
  size_t line = 0;
  std::unordered_set<std::uint64_t> live;
  struct PoolState {
    int uses = 0;
    bool allocated_to = false;
  };
  std::map<MempoolId, PoolState> pools;
  auto pool_id = [&](size_t first) {
    const auto& f = p.fields();
    return MempoolId{p.number<std::uint64_t>(f[first], 16, "the pool id"),
                     p.number<std::uint64_t>(f[first + 1], 16, "the pool id")};
  };
  while (std::getline(in, text)) {
    p.start_line(++line, std::move(text));
    if (line == 1) {
      trace.header = parse_header(p);
      continue;
    }
    const auto& f = p.fields();
    if (f.empty()) p.fail("empty line");
    TraceEvent e;
    e.line = line;
    if (f[0].size() != 1) p.fail(fmt::format("unknown event '{}' (known: a, f, r, e, p, and b, n, d for private pools)", f[0]));
    e.op = f[0][0];
    switch (e.op) {
      case 'a':
        if (f.size() != 4 && f.size() != 6)
          p.fail("expected 'a BYTES STREAM ADDRESS' or, from a private pool, 'a BYTES STREAM ADDRESS POOL POOL'");
        e.bytes = p.number<size_t>(f[1], 10, "the size");
        e.stream = p.number<StreamHandle>(f[2], 16, "the stream");
        e.address = p.number<std::uint64_t>(f[3], 16, "the address");
        if (e.bytes == 0 || e.address == 0) p.fail("an allocation needs a size and an address above 0");
        if (f.size() == 6) {
          e.pool = pool_id(4);
          if (!pools[e.pool].allocated_to)
            p.fail(fmt::format("allocation from pool ({:x}, {:x}), which is not allocated to", e.pool.first,
                               e.pool.second));
        }
        if (!live.insert(e.address).second)
          p.fail(fmt::format("address {:x} is handed out again before it was freed", e.address));
        break;
      case 'f':
        p.expect_fields(2, "f ADDRESS");
        e.address = p.number<std::uint64_t>(f[1], 16, "the address");
        if (live.erase(e.address) == 0) p.fail(fmt::format("free of address {:x}, which is not allocated", e.address));
        break;
      case 'r':
        p.expect_fields(3, "r ADDRESS STREAM");
        e.address = p.number<std::uint64_t>(f[1], 16, "the address");
        e.stream = p.number<StreamHandle>(f[2], 16, "the stream");
        if (!live.count(e.address))
          p.fail(fmt::format("record_stream of address {:x}, which is not allocated", e.address));
        break;
      case 'e':
      case 'p':
        p.expect_fields(1, e.op == 'e' ? "e" : "p");
        break;
      case 'b':
      case 'n':
      case 'd': {
        p.expect_fields(3, e.op == 'b' ? "b POOL POOL" : e.op == 'n' ? "n POOL POOL" : "d POOL POOL");
        e.pool = pool_id(1);
        if (e.pool == MempoolId{}) p.fail("the pool id (0, 0) names no private pool");
        PoolState& pool = pools[e.pool];
        const auto id = fmt::format("({:x}, {:x})", e.pool.first, e.pool.second);
        if (e.op == 'b') {
          if (pool.allocated_to) p.fail(fmt::format("begin of pool {}, which is already allocated to", id));
          ++pool.uses;
          pool.allocated_to = true;
        } else if (e.op == 'n') {
          if (!pool.allocated_to) p.fail(fmt::format("end of pool {}, which is not allocated to", id));
          pool.allocated_to = false;
        } else {
          if (pool.uses == 0 || pool.allocated_to)
            p.fail(fmt::format("release of pool {}, which has no use left or is still allocated to", id));
          --pool.uses;
        }
        break;
      }
      default:
        p.fail(fmt::format("unknown event '{}' (known: a, f, r, e, p, and b, n, d for private pools)", f[0]));
    }
    trace.events.push_back(e);
  }
  RTX_CHECK(line > 0, ValueError, "[alloc_trace] {}: empty file, not an allocation trace", name);
  return trace;
}

// ---- replay -------------------------------------------------------------------------------------

SimulatedDevice::SimulatedDevice(size_t capacity) : capacity_(capacity == 0 ? SIZE_MAX : capacity) {}

void* SimulatedDevice::raw_alloc(size_t bytes) {
  if (bytes > capacity_ - used_) return nullptr;
  const std::uintptr_t address = next_;
  next_ += bytes;
  used_ += bytes;
  sizes_.emplace(address, bytes);
  return reinterpret_cast<void*>(address);
}

void SimulatedDevice::raw_free(void* ptr) {
  const auto it = sizes_.find(reinterpret_cast<std::uintptr_t>(ptr));
  RTX_CHECK(it != sizes_.end(), ValueError, "[alloc_trace] the simulated device did not allocate {}", fmt::ptr(ptr));
  used_ -= it->second;
  sizes_.erase(it);
}

MemInfo SimulatedDevice::mem_get_info() { return {capacity_ - used_, capacity_}; }
EventHandle SimulatedDevice::create_event() { return ++events_; }
void SimulatedDevice::record_event(EventHandle, StreamHandle) {}
bool SimulatedDevice::event_done(EventHandle) { return true; }
void SimulatedDevice::synchronize_event(EventHandle) {}
void SimulatedDevice::destroy_event(EventHandle) {}

namespace {

// A fresh allocator running trace events in order.
class Replayer {
 public:
  Replayer(const AllocTrace& trace, const AllocatorConfig& config)
      : device_(trace.header.device_total), allocator_(device_, config) {}

  // Runs one event; false when an allocation did not fit the device.
  bool run(const TraceEvent& e) {
    switch (e.op) {
      case 'a':
        routed_to_ = e.pool;
        try {
          addresses_[e.address] = allocator_.allocate(e.bytes, e.stream);
        } catch (const OutOfMemoryError&) {
          addresses_[e.address] = nullptr;  // the program got no block: its free and uses are skipped
          return false;
        }
        break;
      case 'f': {
        const auto it = addresses_.find(e.address);
        allocator_.free(it->second);
        addresses_.erase(it);
        break;
      }
      case 'r': {
        void* p = addresses_.at(e.address);
        if (p != nullptr) allocator_.record_stream(p, e.stream);
        break;
      }
      case 'e':
        allocator_.empty_cache();
        break;
      case 'p':
        allocator_.reset_peak_stats();
        break;
      case 'b':
        // The recorded filter's answers are in the allocation lines: each names the pool it came from.
        allocator_.begin_allocate_to_pool(e.pool, [this, id = e.pool](StreamHandle) { return routed_to_ == id; });
        break;
      case 'n':
        allocator_.end_allocate_to_pool(e.pool);
        break;
      case 'd':
        allocator_.release_pool(e.pool);
        break;
    }
    return true;
  }

  CachingAllocator& allocator() { return allocator_; }

 private:
  SimulatedDevice device_;
  CachingAllocator allocator_;
  std::unordered_map<std::uint64_t, void*> addresses_;
  MempoolId routed_to_{0, 0};  // the pool of the allocation being replayed
};

}  // namespace

std::vector<SegmentClassUsage> segment_classes(const std::vector<SegmentInfo>& segments) {
  constexpr size_t kMiB = size_t{1} << 20;
  std::vector<SegmentClassUsage> classes = {{"small pool (2 MiB segments)"},
                                            {"large pool, 20 MiB buffers"},
                                            {"large pool, other segments < 64 MiB"},
                                            {"large pool, 64 MiB - 256 MiB"},
                                            {"large pool, 256 MiB - 1 GiB"},
                                            {"large pool, >= 1 GiB"}};
  for (const SegmentInfo& s : segments) {
    size_t c = 0;
    if (!s.small_pool) {
      c = s.size == CachingAllocator::kLargeBuffer ? 1 : s.size < 64 * kMiB ? 2 : s.size < 256 * kMiB ? 3
                                                                              : s.size < 1024 * kMiB ? 4 : 5;
    }
    SegmentClassUsage& u = classes[c];
    ++u.segments;
    u.reserved += s.size;
    for (const BlockInfo& b : s.blocks) {
      if (b.allocated) u.allocated += b.size;
      else u.largest_free = std::max(u.largest_free, b.size);
    }
  }
  return classes;
}

ReplayResult replay_trace(const AllocTrace& trace, const ReplayOptions& options) {
  RTX_CHECK(options.warmup_fraction >= 0.0 && options.warmup_fraction <= 1.0, ValueError,
            "[alloc_trace] the warm-up fraction must be in [0, 1], got {}", options.warmup_fraction);
  ReplayResult r;
  const auto& events = trace.events;
  r.events = events.size();
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].op == 'p') r.measured_from = i + 1;
  r.warmup_end = r.measured_from + static_cast<size_t>(options.warmup_fraction *
                                                       static_cast<double>(events.size() - r.measured_from));
  Replayer replay(trace, options.config);
  MemoryStats at_warmup;
  size_t peak_reserved = 0, peak_allocated = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i == r.warmup_end) at_warmup = replay.allocator().stats();
    if (!replay.run(events[i])) ++r.ooms;
    const MemoryStats s = replay.allocator().stats();
    if (i < r.measured_from) continue;
    if (s.reserved_bytes > peak_reserved) {
      peak_reserved = s.reserved_bytes;
      r.peak_reserved_event = i;
    }
    if (s.allocated_bytes >= peak_allocated) {
      peak_allocated = s.allocated_bytes;
      r.peak_allocated_event = i;
    }
  }
  r.stats = replay.allocator().stats();
  if (r.warmup_end < events.size()) {
    r.raw_allocs_after_warmup = r.stats.num_raw_allocs - at_warmup.num_raw_allocs;
    r.retries_after_warmup = r.stats.num_oom_retries - at_warmup.num_oom_retries;
  }
  if (options.breakdown && !events.empty()) {
    Replayer again(trace, options.config);
    const size_t last = std::max(r.peak_reserved_event, r.peak_allocated_event);
    for (size_t i = 0; i <= last; ++i) {
      again.run(events[i]);
      if (i == r.peak_reserved_event) r.at_peak_reserved = segment_classes(again.allocator().snapshot());
      if (i == r.peak_allocated_event) r.at_peak_allocated = segment_classes(again.allocator().snapshot());
    }
  }
  return r;
}

}  // namespace rtx::cuda
