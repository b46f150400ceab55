// Tests of the CUDA caching allocator's policy against a fake device: rounding, pools, best fit, huge
// free segments, split and merge, streams and events, out of memory, garbage collection, statistics and
// RTX_CUDA_ALLOC_CONF. The trace and its replay are tested in test_alloc_trace.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "backend/cuda/caching_allocator.h"
#include "test_utils.h"

namespace rtx::cuda {
namespace {

using rtx::testing::throws;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr StreamHandle kStream1 = 1;
constexpr StreamHandle kStream2 = 2;

// A device of `capacity` bytes handing out fake addresses; events complete when the test says so.
class FakeDevice final : public DeviceMemory {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}

  void* raw_alloc(size_t bytes) override {
    ++alloc_calls;
    if (used_ + bytes > capacity_) {
      ++failed_allocs;
      return nullptr;
    }
    const std::uintptr_t address = next_address_;
    next_address_ += bytes;
    used_ += bytes;
    segments_[address] = bytes;
    return reinterpret_cast<void*>(address);
  }
  void raw_free(void* ptr) override {
    const auto it = segments_.find(reinterpret_cast<std::uintptr_t>(ptr));
    ASSERT_NE(it, segments_.end()) << "raw_free of a pointer raw_alloc did not return";
    used_ -= it->second;
    segments_.erase(it);
    ++free_calls;
  }
  MemInfo mem_get_info() override { return {capacity_ - used_, capacity_}; }
  EventHandle create_event() override {
    events_[++last_event_] = Event{};
    return last_event_;
  }
  void record_event(EventHandle event, StreamHandle stream) override { events_.at(event) = Event{stream, false}; }
  bool event_done(EventHandle event) override { return events_.at(event).done; }
  void synchronize_event(EventHandle event) override {
    events_.at(event).done = true;
    ++synchronize_calls;
  }
  void destroy_event(EventHandle event) override { ASSERT_EQ(events_.erase(event), 1u) << "unknown event"; }

  // Completes the work queued on `stream` so far.
  void complete(StreamHandle stream) {
    for (auto& [id, e] : events_)
      if (e.stream == stream) e.done = true;
  }
  size_t used() const { return used_; }
  size_t live_segments() const { return segments_.size(); }
  size_t live_events() const { return events_.size(); }
  // Events recorded on `stream` and not destroyed.
  size_t events_on(StreamHandle stream) const {
    return std::count_if(events_.begin(), events_.end(), [&](const auto& e) { return e.second.stream == stream; });
  }

  int alloc_calls = 0;
  int failed_allocs = 0;
  int free_calls = 0;
  int synchronize_calls = 0;

 private:
  struct Event {
    StreamHandle stream = 0;
    bool done = false;
  };
  size_t capacity_;
  size_t used_ = 0;
  std::uintptr_t next_address_ = std::uintptr_t{1} << 32;
  std::map<std::uintptr_t, size_t> segments_;
  std::map<EventHandle, Event> events_;
  EventHandle last_event_ = 0;
};

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

using Layout = std::vector<std::vector<std::pair<size_t, bool>>>;

// The blocks of every segment as (size, allocated) pairs, in address order.
Layout layout(const CachingAllocator& a) {
  Layout out;
  for (const SegmentInfo& s : a.snapshot()) {
    out.emplace_back();
    for (const BlockInfo& b : s.blocks) out.back().emplace_back(b.size, b.allocated);
  }
  return out;
}

TEST(CachingAllocatorTest, RoundsSizesAndPicksSegmentSizes) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(1000000), 1000448u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(11 * kMiB + 512), 12 * kMiB);
}

TEST(CachingAllocatorTest, ZeroBytesAndNullFree) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  EXPECT_EQ(a.allocate(0, kStream1), nullptr);
  a.free(nullptr);
  EXPECT_EQ(dev.alloc_calls, 0);
  EXPECT_EQ(a.stats().num_allocs, 0u);
}

TEST(CachingAllocatorTest, SmallPoolCarvesTwoMiBSegments) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  void* p = a.allocate(1000, kStream1);
  void* q = a.allocate(1, kStream1);
  void* r = a.allocate(kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, 1);
  EXPECT_EQ(addr(q), addr(p) + 1024);
  EXPECT_EQ(addr(r), addr(q) + 512);
  const auto segs = a.snapshot();
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_TRUE(segs[0].small_pool);
  EXPECT_EQ(segs[0].size, 2 * kMiB);
  EXPECT_EQ(segs[0].stream, kStream1);
  EXPECT_EQ(layout(a), (Layout{{{1024, true}, {512, true}, {kMiB, true}, {kMiB - 1536, false}}}));
  // The next small request that does not fit the remainder opens a second small segment.
  a.allocate(kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, 2);
  EXPECT_EQ(a.stats().reserved_bytes, 4 * kMiB);
}

TEST(CachingAllocatorTest, LargePoolSegmentSizes) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  void* p = a.allocate(5 * kMiB, kStream1);
  void* q = a.allocate(5 * kMiB, kStream1);
  EXPECT_EQ(addr(q), addr(p) + 5 * kMiB);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * kMiB);
  a.allocate(15 * kMiB + 1, kStream1);
  EXPECT_EQ(a.stats().reserved_bytes, 36 * kMiB);
  const auto segs = a.snapshot();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_FALSE(segs[0].small_pool);
  EXPECT_EQ(segs[1].size, 16 * kMiB);
  // 16 MiB - (15 MiB + 512 B) is not more than 1 MiB: the block keeps the whole segment.
  EXPECT_EQ(layout(a)[1], (std::vector<std::pair<size_t, bool>>{{16 * kMiB, true}}));
  EXPECT_EQ(a.stats().allocated_bytes, 26 * kMiB);
}

TEST(CachingAllocatorTest, BestFitTakesSmallestThenLowestAddress) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  const size_t sizes[] = {4 * kKiB, kKiB, 2 * kKiB, kKiB, 2 * kKiB, kKiB};
  std::vector<void*> p;
  for (size_t s : sizes) p.push_back(a.allocate(s, kStream1));
  a.free(p[0]);
  a.free(p[4]);
  a.free(p[2]);
  EXPECT_EQ(a.allocate(2 * kKiB, kStream1), p[2]);  // two 2 KiB holes: the lower one
  EXPECT_EQ(a.allocate(2 * kKiB, kStream1), p[4]);
  EXPECT_EQ(a.allocate(3 * kKiB, kStream1), p[0]);  // the 4 KiB hole, not the large tail
  EXPECT_EQ(layout(a)[0][1], std::make_pair(kKiB, false));  // the split-off rest of the 4 KiB hole
  EXPECT_EQ(dev.alloc_calls, 1);
}

TEST(CachingAllocatorTest, SplitsAndMergesNeighbours) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  void* x = a.allocate(5 * kMiB, kStream1);
  void* y = a.allocate(5 * kMiB, kStream1);
  void* z = a.allocate(5 * kMiB, kStream1);
  const size_t m5 = 5 * kMiB;
  EXPECT_EQ(layout(a), (Layout{{{m5, true}, {m5, true}, {m5, true}, {m5, false}}}));
  a.free(y);
  EXPECT_EQ(layout(a), (Layout{{{m5, true}, {m5, false}, {m5, true}, {m5, false}}}));
  a.free(x);
  EXPECT_EQ(layout(a), (Layout{{{2 * m5, false}, {m5, true}, {m5, false}}}));
  a.free(z);
  EXPECT_EQ(layout(a), (Layout{{{20 * kMiB, false}}}));
  // The merged block is reusable as a whole.
  EXPECT_EQ(a.allocate(19 * kMiB, kStream1), x);
  EXPECT_EQ(dev.alloc_calls, 1);
}

TEST(CachingAllocatorTest, SplitThresholdsPerPool) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  // Small pool: a remainder of 512 bytes is split off.
  a.allocate(kMiB, kStream1);
  a.allocate(kMiB - 512, kStream1);
  EXPECT_EQ(layout(a), (Layout{{{kMiB, true}, {kMiB - 512, true}, {512, false}}}));
  // Large pool: a remainder of exactly 1 MiB is not split off.
  a.allocate(19 * kMiB, kStream1);
  EXPECT_EQ(layout(a)[1], (std::vector<std::pair<size_t, bool>>{{20 * kMiB, true}}));
  // ... but one above 1 MiB is.
  a.allocate(19 * kMiB - 512, kStream2);
  EXPECT_EQ(layout(a)[2], (std::vector<std::pair<size_t, bool>>{{19 * kMiB - 512, true}, {kMiB + 512, false}}));
}

TEST(CachingAllocatorTest, NoReuseAcrossStreams) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  void* p = a.allocate(4096, kStream1);
  a.free(p);
  void* q = a.allocate(4096, kStream2);
  EXPECT_EQ(dev.alloc_calls, 2);
  const auto segs = a.snapshot();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_NE(segs[0].stream, segs[1].stream);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.allocate(4096, kStream1), p);
  EXPECT_EQ(dev.alloc_calls, 2);
}

TEST(CachingAllocatorTest, RecordStreamDelaysReuseUntilEventCompletes) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  void* p = a.allocate(4096, kStream1);
  a.record_stream(p, kStream1);  // its own stream: nothing to wait for
  a.record_stream(p, kStream2);
  a.free(p);
  EXPECT_EQ(dev.events_on(kStream2), 1u);
  EXPECT_EQ(dev.live_events(), 1u);
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
  void* q = a.allocate(4096, kStream1);
  EXPECT_NE(q, p);
  EXPECT_EQ(layout(a)[0][0], std::make_pair(size_t{4096}, true));  // still held for stream 2
  dev.complete(kStream2);
  a.free(q);  // q merges with the free tail only; p's block is still held until the next allocate
  EXPECT_EQ(a.allocate(4096, kStream1), p);
  EXPECT_EQ(dev.live_events(), 0u);
  EXPECT_EQ(dev.alloc_calls, 1);
}

TEST(CachingAllocatorTest, EmptyCacheWaitsForPendingEvents) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  void* p = a.allocate(4096, kStream1);
  a.record_stream(p, kStream2);
  a.free(p);
  a.empty_cache();
  EXPECT_EQ(dev.synchronize_calls, 1);
  EXPECT_EQ(dev.live_events(), 0u);
  EXPECT_EQ(dev.live_segments(), 0u);
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

TEST(CachingAllocatorTest, OversizeBlocksAreNeverSplit) {
  FakeDevice dev(1024 * kMiB);
  CachingAllocator a(dev, parse_alloc_conf("max_split_size_mb:32"));
  void* big = a.allocate(40 * kMiB, kStream1);
  a.free(big);
  // A request below max_split_size does not touch the oversize block.
  void* medium = a.allocate(5 * kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, 2);
  a.free(medium);
  // An oversize request reuses it whole, without splitting.
  EXPECT_EQ(a.allocate(36 * kMiB, kStream1), big);
  EXPECT_EQ(dev.alloc_calls, 2);
  EXPECT_EQ(a.stats().allocated_bytes, 40 * kMiB);
  a.free(big);
  // Blocks at least 20 MiB larger than an oversize request are not used for it.
  void* other = a.allocate(33 * kMiB, kStream1);
  EXPECT_EQ(other, big);
  void* huge = a.allocate(64 * kMiB, kStream1);
  a.free(huge);
  a.allocate(40 * kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, 4);
  for (const SegmentInfo& s : a.snapshot()) {
    if (s.size >= 32 * kMiB) {
      EXPECT_EQ(s.blocks.size(), 1u) << "an oversize segment was split";
    }
  }
}

TEST(CachingAllocatorTest, EntirelyFreeHugeSegmentsServeOnlyLargeRequests) {
  constexpr size_t kGiB = size_t{1} << 30;
  FakeDevice dev(16 * kGiB);
  CachingAllocator a(dev);
  void* huge = a.allocate(1536 * kMiB, kStream1);
  a.free(huge);
  // Below a quarter of the entirely free 1.5 GiB segment: a segment of its own.
  void* medium = a.allocate(200 * kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, 2);
  EXPECT_EQ(layout(a)[0], (std::vector<std::pair<size_t, bool>>{{1536 * kMiB, false}}));
  // A quarter or more splits it, and its free rest then serves any request.
  EXPECT_EQ(a.allocate(384 * kMiB, kStream1), huge);
  void* rest = a.allocate(300 * kMiB, kStream1);
  EXPECT_EQ(addr(rest), addr(huge) + 384 * kMiB);
  EXPECT_EQ(dev.alloc_calls, 2);
  a.free(huge);
  a.free(rest);
  a.free(medium);
  // Whole again: a 100 MiB request takes the 200 MiB segment, a 250 MiB one needs a new segment.
  EXPECT_EQ(a.allocate(100 * kMiB, kStream1), medium);
  void* other = a.allocate(250 * kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, 3);
  EXPECT_NE(other, huge);
  // The rule starts at 1 GiB: a 1 GiB segment serves 256 MiB, not 255.5 MiB.
  void* gib = a.allocate(kGiB, kStream2);
  a.free(gib);
  void* below = a.allocate(256 * kMiB - 512, kStream2);
  EXPECT_NE(below, gib);
  EXPECT_EQ(a.allocate(256 * kMiB, kStream2), gib);
  EXPECT_EQ(dev.alloc_calls, 5);
  for (const SegmentInfo& s : a.snapshot()) {
    if (s.address == addr(huge)) {
      EXPECT_EQ(s.blocks.size(), 1u);
    }
  }
}

TEST(CachingAllocatorTest, HugeSegmentIsReleasedWhenTheDeviceIsFull) {
  FakeDevice dev(1600 * kMiB);
  CachingAllocator a(dev);
  a.free(a.allocate(1536 * kMiB, kStream1));
  // No room for a new 100 MiB segment beside the huge one: it is returned to the device, then the
  // request gets its segment.
  EXPECT_NE(a.allocate(100 * kMiB, kStream1), nullptr);
  EXPECT_EQ(dev.failed_allocs, 1);
  EXPECT_EQ(a.stats().num_oom_retries, 1u);
  EXPECT_EQ(a.stats().num_ooms, 0u);
  EXPECT_EQ(a.stats().reserved_bytes, 100 * kMiB);
}

TEST(CachingAllocatorTest, EmptyCacheReleasesOnlyWholeFreeSegments) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  void* live = a.allocate(5 * kMiB, kStream1);   // 20 MiB segment, partly used
  a.free(a.allocate(4096, kStream1));           // small segment, entirely free
  a.free(a.allocate(30 * kMiB, kStream1));      // large segment, entirely free
  EXPECT_EQ(a.stats().reserved_bytes, 52 * kMiB);
  a.empty_cache();
  EXPECT_EQ(dev.free_calls, 2);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * kMiB);
  EXPECT_EQ(a.stats().num_raw_frees, 2u);
  ASSERT_EQ(a.snapshot().size(), 1u);
  EXPECT_EQ(a.snapshot()[0].address, addr(live));
  a.free(live);
  a.empty_cache();
  EXPECT_EQ(dev.used(), 0u);
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

TEST(CachingAllocatorTest, DestructorReturnsAllSegments) {
  FakeDevice dev(256 * kMiB);
  {
    CachingAllocator a(dev);
    a.allocate(5 * kMiB, kStream1);
    void* p = a.allocate(4096, kStream2);
    a.record_stream(p, kStream1);
    a.free(p);
  }
  EXPECT_EQ(dev.live_segments(), 0u);
  EXPECT_EQ(dev.live_events(), 0u);
}

TEST(CachingAllocatorTest, OutOfMemoryRetriesAfterReleasingCache) {
  FakeDevice dev(48 * kMiB);
  CachingAllocator a(dev);
  a.free(a.allocate(12 * kMiB, kStream1));
  a.free(a.allocate(12 * kMiB, kStream2));
  EXPECT_EQ(a.stats().reserved_bytes, 24 * kMiB);
  void* p = a.allocate(30 * kMiB, kStream1);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(dev.failed_allocs, 1);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_oom_retries, 1u);
  EXPECT_EQ(s.num_ooms, 0u);
  EXPECT_EQ(s.num_raw_frees, 2u);
  EXPECT_EQ(s.reserved_bytes, 30 * kMiB);
}

TEST(CachingAllocatorTest, OutOfMemoryErrorExplains) {
  FakeDevice dev(48 * kMiB);
  CachingAllocator a(dev);
  void* live = a.allocate(5 * kMiB, kStream1);  // 20 MiB segment with a 15 MiB free tail
  a.free(a.allocate(5 * kMiB, kStream2));       // a 20 MiB segment cached for stream 2
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { a.allocate(30 * kMiB, kStream1); },
                                       "[cuda] out of memory: tried to allocate 30.00 MiB"));
  try {
    a.allocate(30 * kMiB, kStream1);
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[cuda] out of memory:", 0), 0u) << msg;
    for (const char* part : {"28.00 MiB free of 48.00 MiB total", "5.00 MiB allocated", "20.00 MiB reserved",
                             "largest free cached block 15.00 MiB", "empty_cache()", "smaller batch",
                             "RTX_CUDA_ALLOC_CONF=max_split_size_mb:N"})
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << msg << "' lacks '" << part << "'";
  }
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.num_ooms, 2u);
  EXPECT_EQ(s.num_oom_retries, 2u);
  EXPECT_EQ(s.reserved_bytes, 20 * kMiB);
  // The allocator stays usable, and frees of unknown pointers are errors.
  EXPECT_NE(a.allocate(20 * kMiB, kStream1), nullptr);
  a.free(live);
  EXPECT_TRUE(throws<ValueError>([&] { a.free(live); }, "[cuda] free: pointer"));
  EXPECT_TRUE(throws<ValueError>([&] { a.record_stream(live, kStream2); }, "[cuda] record_stream: pointer"));
  EXPECT_TRUE(throws<OutOfMemoryError>([&] { a.allocate(SIZE_MAX - 4, kStream1); }, "[cuda] out of memory:"));
}

TEST(CachingAllocatorTest, GarbageCollectionReleasesLeastRecentlyFreedSegments) {
  FakeDevice dev(100 * kMiB);
  AllocatorConfig config;
  config.garbage_collection_threshold = 0.5;
  CachingAllocator a(dev, config);
  void* x = a.allocate(20 * kMiB, kStream1);
  void* y = a.allocate(20 * kMiB, kStream1);
  a.free(x);
  a.free(y);
  a.allocate(30 * kMiB, kStream1);  // 40 + 30 MiB would pass 50 MiB: x's segment (freed first) goes
  EXPECT_EQ(dev.failed_allocs, 0);
  EXPECT_EQ(a.stats().num_raw_frees, 1u);
  EXPECT_EQ(a.stats().reserved_bytes, 50 * kMiB);
  const auto segs = a.snapshot();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].address, addr(y));
}

TEST(CachingAllocatorTest, StatsPeaksAndFragmentation) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  void* p = a.allocate(1000, kStream1);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 1.0 - 1024.0 / (2.0 * kMiB));
  void* q = a.allocate(5 * kMiB, kStream1);
  a.free(q);
  s = a.stats();
  EXPECT_EQ(s.allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_allocated_bytes, 1024u + 5 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 22 * kMiB);
  EXPECT_EQ(s.active_blocks, 1u);
  EXPECT_EQ(s.peak_active_blocks, 2u);
  EXPECT_EQ(s.num_allocs, 2u);
  EXPECT_EQ(s.num_raw_allocs, 2u);
  a.empty_cache();
  a.reset_peak_stats();
  s = a.stats();
  EXPECT_EQ(s.peak_allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.peak_active_blocks, 1u);
  const std::string text = a.summary();
  for (const char* part : {"allocated", "1.00 KiB", "reserved", "2.00 MiB", "active blocks", "fragmentation 100.0%",
                           "segments allocated 2, freed 1", "max_split_size unlimited"})
    EXPECT_NE(text.find(part), std::string::npos) << "'" << text << "' lacks '" << part << "'";
  a.free(p);
  EXPECT_DOUBLE_EQ(a.stats().fragmentation(), 1.0);
  a.empty_cache();
  EXPECT_DOUBLE_EQ(a.stats().fragmentation(), 0.0);
}

TEST(CachingAllocatorTest, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(20 * kMiB), "20.00 MiB");
  EXPECT_EQ(format_bytes(3 * (size_t{1} << 29)), "1.50 GiB");
  EXPECT_EQ(format_bytes(size_t{5} << 40), "5.00 TiB");
}

TEST(CachingAllocatorConfig, Parses) {
  AllocatorConfig c = parse_alloc_conf("");
  EXPECT_EQ(c.max_split_size, SIZE_MAX);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);
  c = parse_alloc_conf("max_split_size_mb:128,garbage_collection_threshold:0.8");
  EXPECT_EQ(c.max_split_size, 128 * kMiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.8);
  c = parse_alloc_conf(" max_split_size_mb : 64 ,");
  EXPECT_EQ(c.max_split_size, 64 * kMiB);
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  a.set_config(c);
  EXPECT_EQ(a.config().max_split_size, 64 * kMiB);
  EXPECT_NE(a.summary().find("max_split_size 64.00 MiB"), std::string::npos);
}

TEST(CachingAllocatorConfig, Errors) {
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("max_split_size_mb:128,foo:1"); }, "unknown option 'foo'"));
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("max_split_size_mb"); }, "'max_split_size_mb' has no value"));
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("max_split_size_mb:abc"); }, "'abc' is not a number"));
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("max_split_size_mb:20"); }, "whole number of MiB above 20"));
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("max_split_size_mb:25.5"); }, "whole number of MiB above 20"));
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("garbage_collection_threshold:1.5"); }, "must be in (0, 1)"));
  EXPECT_TRUE(throws<ValueError>([] { parse_alloc_conf("garbage_collection_threshold:"); }, "is not a number"));
}

// Checks the allocator's bookkeeping against the fake device and the test's own record of live blocks.
void check_invariants(const CachingAllocator& a, const FakeDevice& dev, const std::map<void*, size_t>& live) {
  const MemoryStats s = a.stats();
  const auto segs = a.snapshot();
  size_t reserved = 0, allocated = 0, found = 0;
  std::uintptr_t prev_end = 0;
  for (const SegmentInfo& seg : segs) {
    ASSERT_GE(seg.address, prev_end) << "segments overlap";
    prev_end = seg.address + seg.size;
    reserved += seg.size;
    std::uintptr_t at = seg.address;
    bool prev_free = false;
    for (const BlockInfo& b : seg.blocks) {
      ASSERT_EQ(b.address, at) << "blocks do not tile their segment";
      at += b.size;
      ASSERT_FALSE(prev_free && !b.allocated) << "two neighbouring free blocks were not merged";
      prev_free = !b.allocated;
      const auto it = live.find(reinterpret_cast<void*>(b.address));
      if (it == live.end()) continue;
      ASSERT_TRUE(b.allocated);
      ASSERT_GE(b.size, CachingAllocator::round_size(it->second));
      allocated += b.size;
      ++found;
    }
  }
  ASSERT_EQ(found, live.size()) << "a live block is missing from the snapshot";
  ASSERT_EQ(reserved, s.reserved_bytes);
  ASSERT_EQ(reserved, dev.used());
  ASSERT_EQ(allocated, s.allocated_bytes);
  ASSERT_EQ(live.size(), s.active_blocks);
}

TEST(CachingAllocatorTest, RandomizedStress) {
  FakeDevice dev(512 * kMiB);
  CachingAllocator a(dev, parse_alloc_conf("max_split_size_mb:40"));
  std::mt19937_64 rng(1234);
  std::map<void*, size_t> live;
  auto random_size = [&]() -> size_t {
    switch (rng() % 4) {
      case 0: return 1 + rng() % 4096;
      case 1: return 1 + rng() % kMiB;
      case 2: return kMiB + rng() % (12 * kMiB);
      default: return 1 + rng() % (64 * kMiB);
    }
  };
  for (int step = 0; step < 4000; ++step) {
    const unsigned op = rng() % 10;  // 0-3 allocate, 4 record_stream and free, 5-8 free, 9 record_stream
    if (op < 4 || live.empty()) {
      const size_t bytes = random_size();
      try {
        void* p = a.allocate(bytes, 1 + rng() % 3);
        ASSERT_EQ(live.count(p), 0u) << "a live block was handed out twice";
        live[p] = bytes;
      } catch (const OutOfMemoryError&) {
        // Allowed when the live blocks fill the device; the invariants must still hold.
      }
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      if (op == 4 || op == 9) a.record_stream(it->first, 1 + rng() % 3);
      if (op < 9) {
        a.free(it->first);
        live.erase(it);
      }
    }
    if (step % 97 == 0) dev.complete(1 + rng() % 3);
    if (step % 1000 == 999) a.empty_cache();
    check_invariants(a, dev, live);
    if (::testing::Test::HasFatalFailure()) FAIL() << "at step " << step;
  }
  EXPECT_GT(a.stats().num_allocs, 1000u);
  EXPECT_GT(a.stats().num_raw_frees, 0u);
  for (const auto& [p, bytes] : live) a.free(p);
  a.empty_cache();
  EXPECT_EQ(dev.used(), 0u);
  EXPECT_EQ(dev.live_events(), 0u);
  EXPECT_EQ(a.stats().allocated_bytes, 0u);
}

}  // namespace
}  // namespace rtx::cuda
