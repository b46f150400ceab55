// Tests of the CUDA caching allocator's policy against a fake device: rounding, pools, best fit, huge
// free segments, split and merge, streams and events, out of memory, garbage collection, statistics,
// RTX_CUDA_ALLOC_CONF, and private pools for CUDA graph capture (with the trace of their calls). The
// trace and its replay are otherwise tested in test_alloc_trace.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "backend/cuda/alloc_trace.h"
#include "backend/cuda/caching_allocator.h"
#include "test_utils.h"

namespace rtx::cuda {
namespace {

using rtx::testing::throws;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr StreamHandle kStream1 = 1;
constexpr StreamHandle kStream2 = 2;
constexpr StreamHandle kStream3 = 3;

// A device of `capacity` bytes handing out fake addresses; events complete when the test says so. While
// `capturing` is set, as during a CUDA graph capture, recording, querying or waiting for an event and
// freeing a segment fail the test.
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
    EXPECT_FALSE(capturing) << "raw_free during a capture";
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
  void record_event(EventHandle event, StreamHandle stream) override {
    EXPECT_FALSE(capturing) << "record_event during a capture";
    events_.at(event) = Event{stream, false};
  }
  bool event_done(EventHandle event) override {
    EXPECT_FALSE(capturing) << "event query during a capture";
    return events_.at(event).done;
  }
  void synchronize_event(EventHandle event) override {
    EXPECT_FALSE(capturing) << "event synchronization during a capture";
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
  bool capturing = false;

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


// ---- private pools ------------------------------------------------------------------------------

// The pool a block lies in, by the snapshot ({0, 0}: the general pools).
MempoolId pool_of(const CachingAllocator& a, const void* p) {
  for (const SegmentInfo& s : a.snapshot())
    if (addr(p) >= s.address && addr(p) < s.address + s.size) return s.pool;
  ADD_FAILURE() << "no segment holds " << p;
  return {};
}

// Routes stream 1 to the pool, as a capture on stream 1 would, and marks the fake device as capturing.
void begin_capture(CachingAllocator& a, FakeDevice& dev, MempoolId id) {
  a.begin_allocate_to_pool(id, [](StreamHandle s) { return s == kStream1; });
  dev.capturing = true;
}

void end_capture(CachingAllocator& a, FakeDevice& dev, MempoolId id) {
  dev.capturing = false;
  a.end_allocate_to_pool(id);
}

TEST(CachingAllocatorPools, HandlesAreFreshAndNonZero) {
  const MempoolId x = graph_pool_handle(), y = graph_pool_handle();
  EXPECT_EQ(x.first, 0u);
  EXPECT_NE(x.second, 0u);
  EXPECT_NE(x, y);
}

TEST(CachingAllocatorPools, CaptureStreamAllocatesFromThePoolOnly) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  const MempoolId id = graph_pool_handle();
  void* general_small = a.allocate(4096, kStream1);
  void* general_large = a.allocate(5 * kMiB, kStream1);
  void* other_stream = a.allocate(4096, kStream2);
  a.free(general_small);
  a.free(general_large);
  a.free(other_stream);
  const int segments_before = dev.alloc_calls;

  begin_capture(a, dev, id);
  // Free general blocks of stream 1 fit, but the pool gets segments of its own.
  void* p = a.allocate(4096, kStream1);
  void* q = a.allocate(5 * kMiB, kStream1);
  EXPECT_EQ(dev.alloc_calls, segments_before + 2);
  EXPECT_NE(p, general_small);
  EXPECT_NE(q, general_large);
  EXPECT_EQ(pool_of(a, p), id);
  EXPECT_EQ(pool_of(a, q), id);
  // Other streams keep using the general pools.
  EXPECT_EQ(a.allocate(4096, kStream2), other_stream);
  a.free(other_stream);
  end_capture(a, dev, id);

  // Outside the capture, stream 1 is served by the general pools although the pool has free blocks.
  a.free(p);
  a.free(q);
  EXPECT_EQ(a.allocate(4096, kStream1), general_small);
  EXPECT_EQ(a.allocate(5 * kMiB, kStream1), general_large);
  void* more = a.allocate(20 * kMiB, kStream1);
  EXPECT_EQ(pool_of(a, more), MempoolId{});
  size_t pool_segments = 0;
  for (const SegmentInfo& s : a.snapshot()) {
    if (s.pool != id) continue;
    ++pool_segments;
    for (const BlockInfo& b : s.blocks) EXPECT_FALSE(b.allocated) << "a pool block served an outside allocation";
  }
  EXPECT_EQ(pool_segments, 2u);
}

TEST(CachingAllocatorPools, FreesDuringCaptureAreReusedWithinThePool) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  const MempoolId id = graph_pool_handle();
  begin_capture(a, dev, id);
  void* x = a.allocate(8192, kStream1);
  a.free(x);
  EXPECT_EQ(a.allocate(8192, kStream1), x);
  void* kept = a.allocate(16384, kStream1);  // an output of the graph, alive after the capture
  a.free(x);
  end_capture(a, dev, id);
  EXPECT_EQ(dev.alloc_calls, 1);

  // Nothing outside the pool gets the kept block or the pool's free space.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pool_of(a, a.allocate(16384, kStream1)), MempoolId{});
  EXPECT_EQ(pool_of(a, kept), id);
  bool kept_allocated = false;
  for (const SegmentInfo& s : a.snapshot())
    for (const BlockInfo& b : s.blocks)
      if (b.address == addr(kept)) kept_allocated = b.allocated;
  EXPECT_TRUE(kept_allocated);
  // Freed after the capture, its block returns to the pool: the next capture into it gets it back.
  a.free(kept);
  begin_capture(a, dev, id);
  EXPECT_EQ(a.allocate(16384, kStream1), x);  // the merged free block, at the segment's start
  end_capture(a, dev, id);
  EXPECT_EQ(dev.alloc_calls, 2);  // one pool segment, one general segment
}

TEST(CachingAllocatorPools, SharedPoolIsFreedAfterItsLastReleaseAndLastBlock) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  const MempoolId id = graph_pool_handle();
  begin_capture(a, dev, id);  // the first graph
  void* first = a.allocate(5 * kMiB, kStream1);
  a.free(first);
  end_capture(a, dev, id);
  begin_capture(a, dev, id);  // a second graph sharing the pool reuses its free blocks
  void* output = a.allocate(5 * kMiB, kStream1);
  EXPECT_EQ(output, first);
  end_capture(a, dev, id);
  EXPECT_EQ(dev.alloc_calls, 1);

  a.release_pool(id);  // one graph left
  a.empty_cache();
  EXPECT_EQ(dev.free_calls, 0);
  EXPECT_EQ(a.stats().private_pool_reserved_bytes, 20 * kMiB);
  a.release_pool(id);  // none left, but a block is live
  EXPECT_TRUE(throws<ValueError>([&] { a.release_pool(id); }, "has no use left"));
  a.empty_cache();
  EXPECT_EQ(dev.free_calls, 0);
  a.free(output);
  // Still not for outside allocations.
  void* outside = a.allocate(5 * kMiB, kStream1);
  EXPECT_NE(outside, first);
  a.free(outside);
  a.empty_cache();
  EXPECT_EQ(dev.free_calls, 2);
  EXPECT_EQ(dev.live_segments(), 0u);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.private_pool_reserved_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  // The pool is forgotten; its id starts a fresh pool.
  EXPECT_TRUE(throws<ValueError>([&] { a.release_pool(id); }, "[cuda] release_pool: no private pool"));
  begin_capture(a, dev, id);
  a.free(a.allocate(4096, kStream1));
  end_capture(a, dev, id);
  a.release_pool(id);
  a.empty_cache();
  EXPECT_EQ(dev.live_segments(), 0u);
}

TEST(CachingAllocatorPools, NoEventOrSegmentCallsDuringCaptureThenDeferredWorkRuns) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  const MempoolId id = graph_pool_handle();
  void* waiting = a.allocate(4096, kStream1);  // freed before the capture, waits for an event on stream 2
  a.record_stream(waiting, kStream2);
  a.free(waiting);
  void* used_elsewhere = a.allocate(8192, kStream1);  // freed during the capture
  a.record_stream(used_elsewhere, kStream2);
  a.free(a.allocate(30 * kMiB, kStream1));  // an entirely free segment
  EXPECT_EQ(dev.live_events(), 1u);

  begin_capture(a, dev, id);
  void* in_pool = a.allocate(4096, kStream1);
  a.record_stream(in_pool, kStream2);
  a.free(in_pool);
  a.free(used_elsewhere);
  a.empty_cache();
  a.allocate(4096, kStream3);  // a general allocation on another stream, too
  EXPECT_EQ(dev.live_events(), 1u);  // no event recorded for the frees
  EXPECT_EQ(dev.free_calls, 0);
  EXPECT_EQ(a.stats().reserved_bytes, 34 * kMiB + 2 * kMiB);
  EXPECT_EQ(a.stats().allocated_bytes, 4096u);  // freed blocks count as freed at once
  for (const SegmentInfo& s : a.snapshot())
    for (const BlockInfo& b : s.blocks)
      if (b.address == addr(used_elsewhere) || b.address == addr(in_pool)) {
        EXPECT_TRUE(b.allocated) << "a block used on another stream was reused before its events";
      }
  end_capture(a, dev, id);

  // The next allocation records the deferred events and runs the deferred empty_cache, which waits for
  // them: the blocks return to their pools and the entirely free general segments go to the device.
  a.allocate(4096, kStream3);
  EXPECT_EQ(dev.live_events(), 0u);
  EXPECT_EQ(dev.synchronize_calls, 3);
  EXPECT_EQ(dev.free_calls, 2);  // the 30 MiB segment and stream 1's small segment
  EXPECT_EQ(a.stats().reserved_bytes, 2 * kMiB + 2 * kMiB);  // stream 3's segment and the pool's
  EXPECT_EQ(layout(a)[0], (std::vector<std::pair<size_t, bool>>{{2 * kMiB, false}}));  // the pool's, kept
  EXPECT_EQ(pool_of(a, in_pool), id);
}

TEST(CachingAllocatorPools, OutOfMemoryDuringCaptureFreesNothing) {
  FakeDevice dev(48 * kMiB);
  AllocatorConfig config;
  config.garbage_collection_threshold = 0.5;
  CachingAllocator a(dev, config);
  const MempoolId id = graph_pool_handle();
  a.free(a.allocate(30 * kMiB, kStream1));  // cached, entirely free
  begin_capture(a, dev, id);
  // Past the garbage collection threshold, but no segment may be freed.
  void* small = a.allocate(4096, kStream1);
  EXPECT_EQ(a.stats().reserved_bytes, 32 * kMiB);
  try {
    a.allocate(20 * kMiB, kStream1);
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    for (const char* part : {"[cuda] out of memory: tried to allocate 20.00 MiB", "16.00 MiB free of 48.00 MiB total",
                             "32.00 MiB reserved (4.00 KiB allocated and 2.00 MiB reserved in private pools)",
                             "A CUDA graph capture is under way", "cannot be returned to the device",
                             "call empty_cache() before capturing"})
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << msg << "' lacks '" << part << "'";
  }
  EXPECT_EQ(dev.free_calls, 0);
  EXPECT_EQ(a.stats().num_ooms, 1u);
  EXPECT_EQ(a.stats().num_oom_retries, 0u);
  a.free(small);
  end_capture(a, dev, id);
  // After the capture, garbage collection releases the cached general segment (not the pool's) for a
  // request it cannot serve.
  EXPECT_NE(a.allocate(40 * kMiB, kStream1), nullptr);
  EXPECT_EQ(dev.free_calls, 1);
  EXPECT_EQ(a.stats().reserved_bytes, 42 * kMiB);
}

TEST(CachingAllocatorPools, StatsSummaryAndSnapshot) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  const MempoolId id = graph_pool_handle();
  a.allocate(1000, kStream1);
  begin_capture(a, dev, id);
  void* p = a.allocate(3 * kMiB, kStream1);
  a.allocate(512, kStream1);
  end_capture(a, dev, id);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.private_pool_allocated_bytes, 3 * kMiB + 512);
  EXPECT_EQ(s.private_pool_reserved_bytes, 22 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 3 * kMiB + 512 + 1024);
  EXPECT_EQ(s.reserved_bytes, 24 * kMiB);
  const std::string text = a.summary();
  EXPECT_NE(text.find("private pools: 3.00 MiB allocated, 22.00 MiB reserved"), std::string::npos) << text;
  size_t in_pool = 0;
  for (const SegmentInfo& seg : a.snapshot()) in_pool += seg.pool == id ? seg.size : 0;
  EXPECT_EQ(in_pool, 22 * kMiB);
  a.free(p);
  EXPECT_EQ(a.stats().private_pool_allocated_bytes, 512u);
  EXPECT_EQ(a.stats().allocated_bytes, 512u + 1024u);
}

TEST(CachingAllocatorPools, Errors) {
  FakeDevice dev(64 * kMiB);
  CachingAllocator a(dev);
  const MempoolId id = graph_pool_handle();
  auto on_1 = [](StreamHandle s) { return s == kStream1; };
  EXPECT_TRUE(throws<ValueError>([&] { a.begin_allocate_to_pool({0, 0}, on_1); }, "(0, 0) names the general pools"));
  EXPECT_TRUE(throws<ValueError>([&] { a.begin_allocate_to_pool(id, nullptr); }, "no stream filter"));
  EXPECT_TRUE(throws<ValueError>([&] { a.end_allocate_to_pool(id); }, "is not allocated to"));
  EXPECT_TRUE(throws<ValueError>([&] { a.release_pool(id); }, "no private pool"));
  a.begin_allocate_to_pool(id, on_1);
  EXPECT_TRUE(throws<ValueError>([&] { a.begin_allocate_to_pool(id, on_1); }, "is already allocated to"));
  EXPECT_TRUE(throws<ValueError>([&] { a.release_pool(id); }, "call end_allocate_to_pool first"));
  a.end_allocate_to_pool(id);
  a.release_pool(id);
}

// Random allocations, frees and cross-stream uses while captures into two pools begin and end: routed
// allocations land in their pool, others never do, no illegal call happens during a capture, and the
// bookkeeping holds throughout; at the end every pool is released and all memory comes back.
TEST(CachingAllocatorPools, RandomizedCaptures) {
  FakeDevice dev(512 * kMiB);
  CachingAllocator a(dev);
  std::mt19937_64 rng(99);
  const MempoolId ids[2] = {graph_pool_handle(), graph_pool_handle()};
  int uses[2] = {0, 0};
  int capturing = -1;  // the pool stream 1 allocates to
  std::map<void*, size_t> live;
  for (int step = 0; step < 3000; ++step) {
    const unsigned op = rng() % 20;
    if (op == 0 && capturing < 0) {
      capturing = static_cast<int>(rng() % 2);
      ++uses[capturing];
      begin_capture(a, dev, ids[capturing]);
    } else if (op == 1 && capturing >= 0) {
      end_capture(a, dev, ids[capturing]);
      capturing = -1;
    } else if (op == 2 && capturing < 0) {
      const int k = static_cast<int>(rng() % 2);
      if (uses[k] > 0) {
        a.release_pool(ids[k]);
        --uses[k];
      }
    } else if (op == 3) {
      a.empty_cache();
    } else if (op < 11 || live.empty()) {
      const size_t bytes = rng() % 2 ? 1 + rng() % kMiB : 1 + rng() % (24 * kMiB);
      const StreamHandle stream = 1 + rng() % 3;
      void* p = nullptr;
      try {
        p = a.allocate(bytes, stream);
      } catch (const OutOfMemoryError&) {
        continue;  // allowed when the live blocks fill the device
      }
      live[p] = bytes;
      const MempoolId expected = capturing >= 0 && stream == kStream1 ? ids[capturing] : MempoolId{};
      ASSERT_EQ(pool_of(a, p), expected) << "at step " << step;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      if (rng() % 3 == 0) a.record_stream(it->first, 1 + rng() % 3);
      a.free(it->first);
      live.erase(it);
    }
    if (step % 53 == 0 && capturing < 0) dev.complete(1 + rng() % 3);
    check_invariants(a, dev, live);
    if (::testing::Test::HasFatalFailure()) FAIL() << "at step " << step;
  }
  if (capturing >= 0) end_capture(a, dev, ids[capturing]);
  for (int k = 0; k < 2; ++k)
    for (; uses[k] > 0; --uses[k]) a.release_pool(ids[k]);
  for (const auto& [p, bytes] : live) a.free(p);
  a.empty_cache();
  EXPECT_EQ(dev.used(), 0u);
  EXPECT_EQ(dev.live_events(), 0u);
  const MemoryStats s = a.stats();
  EXPECT_EQ(s.private_pool_reserved_bytes, 0u);
  EXPECT_EQ(s.private_pool_allocated_bytes, 0u);
}

// The pool calls are traced, a trace started while pools are in use begins with the calls that bring a
// fresh allocator to that state, and the replay puts every allocation in the pool it came from.
TEST(CachingAllocatorPools, TracedAndReplayed) {
  FakeDevice dev(256 * kMiB);
  CachingAllocator a(dev);
  const MempoolId shared = graph_pool_handle(), active = graph_pool_handle();
  begin_capture(a, dev, shared);
  void* before = a.allocate(4096, kStream1);
  end_capture(a, dev, shared);
  begin_capture(a, dev, shared);
  end_capture(a, dev, shared);
  begin_capture(a, dev, active);
  std::ostringstream out;
  a.start_trace(out);  // mid-capture: `shared` has two uses, `active` one and is allocated to
  void* p = a.allocate(5 * kMiB, kStream1);
  void* q = a.allocate(5 * kMiB, kStream2);
  end_capture(a, dev, active);
  a.free(before);
  a.free(p);
  a.release_pool(active);
  a.empty_cache();
  a.free(q);
  a.stop_trace();

  const std::string text = out.str();
  const std::string body = text.substr(text.find('\n') + 1);
  auto hex = [](std::uint64_t v) {
    std::ostringstream o;
    o << std::hex << v;
    return o.str();
  };
  const std::string s1 = hex(shared.first) + " " + hex(shared.second);
  const std::string s2 = hex(active.first) + " " + hex(active.second);
  const std::string b = hex(addr(before)), pp = hex(addr(p)), qq = hex(addr(q));
  EXPECT_EQ(body, "b " + s1 + "\na 4096 1 " + b + " " + s1 + "\nn " + s1 + "\nb " + s1 + "\nn " + s1 + "\nb " + s2 +
                      "\na 5242880 1 " + pp + " " + s2 + "\na 5242880 2 " + qq + "\nn " + s2 + "\nf " + b + "\nf " +
                      pp + "\nd " + s2 + "\ne\nf " + qq + "\n");
  std::istringstream in(text);
  const AllocTrace trace = read_alloc_trace(in, "pools.trace");
  ASSERT_EQ(trace.events.size(), 14u);
  EXPECT_EQ(trace.events[1].pool, shared);
  EXPECT_EQ(trace.events[7].pool, MempoolId{});
  const ReplayResult r = replay_trace(trace, {});
  // The replay reserved the two pools' segments and the general one, and gave the released pool's back.
  EXPECT_EQ(r.stats.peak_reserved_bytes, 2 * kMiB + 20 * kMiB + 20 * kMiB);
  EXPECT_EQ(r.stats.private_pool_reserved_bytes, 2 * kMiB);
  EXPECT_EQ(r.stats.reserved_bytes, 2 * kMiB + 20 * kMiB);

  const std::string header = text.substr(0, text.find('\n') + 1);
  const std::pair<std::string, std::string> bad[] = {
      {"a 512 1 10 0 5\n", "line 2: allocation from pool (0, 5), which is not allocated to"},
      {"b 0 5\nb 0 5\n", "line 3: begin of pool (0, 5), which is already allocated to"},
      {"n 0 5\n", "line 2: end of pool (0, 5), which is not allocated to"},
      {"b 0 5\nd 0 5\n", "line 3: release of pool (0, 5), which has no use left or is still allocated to"},
      {"b 0 0\n", "line 2: the pool id (0, 0) names no private pool"},
      {"b 0\n", "line 2: expected 'b POOL POOL'"},
      {"a 512 1 10 5\n", "line 2: expected 'a BYTES STREAM ADDRESS' or, from a private pool"},
  };
  for (const auto& [lines, message] : bad) {
    std::istringstream bad_in(header + lines);
    EXPECT_TRUE(throws<ValueError>([&] { read_alloc_trace(bad_in, "t"); }, message)) << lines;
  }
}

}  // namespace
}  // namespace rtx::cuda
