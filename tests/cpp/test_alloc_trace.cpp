// Tests of the CUDA caching allocator's trace (src/backend/cuda/alloc_trace.h): the lines it writes,
// buffering and write failures, the reader's errors on malformed traces, record/replay round trips on
// the simulated device, and the replay of a GPT-2-shaped trace from bench/python/alloc_trace_gpt.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "backend/cuda/alloc_trace.h"
#include "test_utils.h"

namespace rtx::cuda {
namespace {

using rtx::testing::throws;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string hex(const void* p) {
  std::ostringstream out;
  out << std::hex << reinterpret_cast<std::uintptr_t>(p);
  return out.str();
}

// A file name in the temporary directory, unique to this process.
std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(::getpid()) + ".txt")).string();
}

AllocTrace parse(const std::string& text) {
  std::istringstream in(text);
  return read_alloc_trace(in, "t.trace");
}

const std::string kHeader =
    "rtx-alloc-trace 1 min_block_size=512 small_size=1048576 small_buffer=2097152 min_large_alloc=10485760 "
    "large_buffer=20971520 round_large=2097152 huge_segment=1073741824 huge_split=4 max_split_size=none "
    "garbage_collection_threshold=0 device_total=1073741824\n";

TEST(AllocTraceTest, WritesOneLinePerCall) {
  SimulatedDevice dev(kGiB);
  std::ostringstream out;  // outlives the allocator, whose destructor flushes the trace into it
  CachingAllocator a(dev, parse_alloc_conf("max_split_size_mb:64,garbage_collection_threshold:0.5"));
  a.start_trace(out);
  void* p = a.allocate(1000, 0x10);
  EXPECT_EQ(a.allocate(0, 0x10), nullptr);  // neither traced
  a.free(nullptr);
  a.record_stream(p, 0x20);
  a.free(p);
  a.reset_peak_stats();
  a.empty_cache();  // flushes
  const auto lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 6u) << out.str();
  EXPECT_EQ(lines[0],
            "rtx-alloc-trace 1 min_block_size=512 small_size=1048576 small_buffer=2097152 min_large_alloc=10485760 "
            "large_buffer=20971520 round_large=2097152 huge_segment=1073741824 huge_split=4 max_split_size=67108864 "
            "garbage_collection_threshold=0.5 device_total=1073741824");
  EXPECT_EQ(lines[1], "a 1000 10 " + hex(p));
  EXPECT_EQ(lines[2], "r " + hex(p) + " 20");
  EXPECT_EQ(lines[3], "f " + hex(p));
  EXPECT_EQ(lines[4], "p");
  EXPECT_EQ(lines[5], "e");
  // The header reads back as the allocator it describes.
  const AllocTrace t = parse(out.str());
  EXPECT_TRUE(t.header.same_constants());
  EXPECT_EQ(t.header.config.max_split_size, 64 * kMiB);
  EXPECT_DOUBLE_EQ(t.header.config.garbage_collection_threshold, 0.5);
  EXPECT_EQ(t.header.device_total, kGiB);
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].op, 'a');
  EXPECT_EQ(t.events[0].bytes, 1000u);
  EXPECT_EQ(t.events[0].stream, 0x10u);
  EXPECT_EQ(t.events[1].stream, 0x20u);
  EXPECT_EQ(t.events[4].line, 6u);
}

TEST(AllocTraceTest, BufferedUntilEmptyCacheStopOrDestruction) {
  SimulatedDevice dev(kGiB);
  std::ostringstream out;
  {
    CachingAllocator a(dev);
    a.start_trace(out);
    a.free(a.allocate(4096, 1));
    EXPECT_EQ(out.str(), "");  // still in the buffer
    a.empty_cache();
    EXPECT_EQ(lines_of(out.str()).size(), 4u);
    a.allocate(4096, 1);
    EXPECT_EQ(lines_of(out.str()).size(), 4u);
  }
  EXPECT_EQ(lines_of(out.str()).size(), 5u);  // flushed by the destructor

  std::ostringstream first, second;
  CachingAllocator a(dev);
  a.start_trace(first);
  void* p = a.allocate(4096, 1);
  void* q = a.allocate(3 * kMiB, 2);
  a.free(a.allocate(100, 1));
  a.start_trace(second);  // replaces the first trace, which is flushed
  a.free(p);
  a.stop_trace();
  a.free(a.allocate(4096, 1));  // not traced
  EXPECT_EQ(lines_of(first.str()).size(), 5u);
  // The second trace starts with the blocks handed out at the time (their block sizes), so it reads alone.
  const auto lines = lines_of(second.str());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1], "a 4096 1 " + hex(p));
  EXPECT_EQ(lines[2], "a 3145728 2 " + hex(q));
  EXPECT_EQ(lines[3], "f " + hex(p));
  EXPECT_EQ(parse(second.str()).events.size(), 3u);
  a.free(q);
}

// A stream buffer that takes `limit` bytes, then fails every write.
class FailingBuffer : public std::streambuf {
 public:
  explicit FailingBuffer(size_t limit) : limit_(limit) {}
  std::string data;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (data.size() + static_cast<size_t>(n) > limit_) return 0;
    data.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    if (data.size() + 1 > limit_) return traits_type::eof();
    data.push_back(traits_type::to_char_type(c));
    return c;
  }

 private:
  size_t limit_;
};

TEST(AllocTraceTest, WriteFailureStopsTracingWithoutThrowing) {
  for (bool exceptions : {false, true}) {
    SimulatedDevice dev(64 * kGiB);
    FailingBuffer buffer(1 << 21);  // the first 1 MiB buffer fits, the second does not
    std::ostream out(&buffer);
    if (exceptions) out.exceptions(std::ios::badbit | std::ios::failbit);
    CachingAllocator a(dev);
    a.start_trace(out);
    std::vector<void*> live;
    for (int i = 0; i < 200000; ++i) {  // ~5 MiB of trace lines
      live.push_back(a.allocate(512 + 512 * static_cast<size_t>(i % 7), 1));
      if (live.size() > 100) {
        a.free(live.front());
        live.erase(live.begin());
      }
    }
    a.empty_cache();
    EXPECT_GT(buffer.data.size(), 0u);
    EXPECT_LE(buffer.data.size(), size_t{1} << 21);
    const size_t written = buffer.data.size();
    a.free(a.allocate(4096, 1));
    a.stop_trace();
    EXPECT_EQ(buffer.data.size(), written) << "tracing went on after a failed write";
    EXPECT_EQ(a.stats().num_allocs, 200001u);
    for (void* p : live) a.free(p);
  }
  // A file that cannot be opened: a warning, and allocations go on untraced.
  SimulatedDevice dev(kGiB);
  CachingAllocator a(dev);
  a.start_trace(std::string("/nonexistent-directory/trace.txt"));
  a.free(a.allocate(4096, 1));
  a.empty_cache();
  a.stop_trace();
}

TEST(AllocTraceTest, WritesAndReadsFiles) {
  const std::string path = temp_path("rtx_alloc_trace");
  SimulatedDevice dev(kGiB);
  {
    CachingAllocator a(dev);
    a.start_trace(path);
    a.free(a.allocate(3 * kMiB, 7));
  }
  std::ifstream in(path);
  const AllocTrace t = read_alloc_trace(in, path);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].bytes, 3 * kMiB);
  EXPECT_EQ(t.events[0].stream, 7u);
  std::remove(path.c_str());
}

TEST(AllocTraceTest, MalformedTracesNameTheLine) {
  const std::string a = "a 512 0 10\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "[alloc_trace] t.trace: empty file"},
      {"hello\n", "line 1: not an allocation trace: the first line must start with 'rtx-alloc-trace'"},
      {"rtx-alloc-trace\n", "line 1: the header lacks the format version"},
      {"rtx-alloc-trace 2 device_total=1\n", "line 1: format version 2 is not supported (this build reads version 1)"},
      {"rtx-alloc-trace 1 min_block_size=512\n", "line 1: the header lacks 'device_total'"},
      {"rtx-alloc-trace 1 colour=blue\n", "line 1: unknown header field 'colour'"},
      {"rtx-alloc-trace 1 small_size\n", "line 1: header field 'small_size' is not key=value"},
      {"rtx-alloc-trace 1 small_size=1 small_size=2\n", "line 1: header field 'small_size' appears twice"},
      {"rtx-alloc-trace 1 small_size=-1\n", "line 1: the header value '-1' is not a decimal number"},
      {kHeader + "a 512 0 zz\n", "line 2: the address 'zz' is not a hexadecimal number"},
      {kHeader + "a 5x2 0 10\n", "line 2: the size '5x2' is not a decimal number"},
      {kHeader + "a 512 0\n", "line 2: expected 'a BYTES STREAM ADDRESS'"},
      {kHeader + "a 0 0 10\n", "line 2: an allocation needs a size and an address above 0"},
      {kHeader + a + "a 1024 0 10\n", "line 3: address 10 is handed out again before it was freed"},
      {kHeader + a + "f 20\n", "line 3: free of address 20, which is not allocated"},
      {kHeader + a + "r 20 1\n", "line 3: record_stream of address 20, which is not allocated"},
      {kHeader + a + "f 10\nf 10\n", "line 4: free of address 10, which is not allocated"},
      {kHeader + "e 1\n", "line 2: expected 'e'"},
      {kHeader + "x\n", "line 2: unknown event 'x' (known: a, f, r, e, p, and b, n, d for private pools)"},
      {kHeader + "alloc 512 0 10\n", "line 2: unknown event 'alloc'"},
      {kHeader + a + "\n", "line 3: empty line"},
      {kHeader + "a  512 0 10\n", "line 2: fields must be separated by single spaces"},
      {kHeader + "p \n", "line 2: trailing space"},
  };
  for (const auto& [text, message] : cases)
    EXPECT_TRUE(throws<ValueError>([&] { parse(text); }, message)) << "for the trace:\n" << text;
  EXPECT_EQ(parse(kHeader + a + "r 10 5\nf 10\ne\np\n").events.size(), 5u);
}

// Records a random run of the allocator on the simulated device (two streams, cross-stream uses, blocks
// from 512 B to 1.5 GiB, cache releases and a reset of the peaks), then replays the trace.
TEST(AllocTraceTest, ReplayReproducesTheRecordedRun) {
  SimulatedDevice dev(64 * kGiB);
  std::ostringstream out;
  CachingAllocator live(dev, parse_alloc_conf("max_split_size_mb:96"));
  live.start_trace(out);
  std::mt19937_64 rng(7);
  std::vector<void*> blocks;
  std::vector<MemoryStats> before;  // the live statistics before each traced call
  size_t reset_at = 0;
  for (int step = 0; step < 6000; ++step) {
    if (step == 2000) {
      before.push_back(live.stats());
      live.reset_peak_stats();
      reset_at = before.size();
    }
    const unsigned op = rng() % 40;
    before.push_back(live.stats());
    if (op < 16 || blocks.empty()) {
      size_t bytes = 0;
      switch (rng() % 5) {
        case 0: bytes = 1 + rng() % 4096; break;
        case 1: bytes = 1 + rng() % kMiB; break;
        case 2: bytes = kMiB + rng() % (12 * kMiB); break;
        case 3: bytes = 1 + rng() % (160 * kMiB); break;
        default: bytes = 300 * kMiB + rng() % (1200 * kMiB); break;
      }
      blocks.push_back(live.allocate(bytes, 1 + rng() % 2));
    } else if (op < 34) {
      const size_t i = rng() % blocks.size();
      live.free(blocks[i]);
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 39) {
      live.record_stream(blocks[rng() % blocks.size()], 1 + rng() % 3);
    } else {
      live.empty_cache();
    }
  }
  live.stop_trace();
  const AllocTrace trace = parse(out.str());
  ASSERT_EQ(trace.events.size(), before.size());
  ASSERT_EQ(trace.header.device_total, 64 * kGiB);

  ReplayOptions options;
  options.config = trace.header.config;
  options.warmup_fraction = 0.25;
  const ReplayResult r = replay_trace(trace, options);
  const MemoryStats expected = live.stats(), got = r.stats;
  EXPECT_EQ(got.allocated_bytes, expected.allocated_bytes);
  EXPECT_EQ(got.peak_allocated_bytes, expected.peak_allocated_bytes);
  EXPECT_EQ(got.reserved_bytes, expected.reserved_bytes);
  EXPECT_EQ(got.peak_reserved_bytes, expected.peak_reserved_bytes);
  EXPECT_EQ(got.active_blocks, expected.active_blocks);
  EXPECT_EQ(got.peak_active_blocks, expected.peak_active_blocks);
  EXPECT_EQ(got.num_allocs, expected.num_allocs);
  EXPECT_EQ(got.num_raw_allocs, expected.num_raw_allocs);
  EXPECT_EQ(got.num_raw_frees, expected.num_raw_frees);
  EXPECT_EQ(got.num_oom_retries, expected.num_oom_retries);
  EXPECT_GT(expected.num_raw_frees, 0u);
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_EQ(r.events, before.size());
  ASSERT_GT(reset_at, 0u);
  EXPECT_EQ(r.measured_from, reset_at);
  EXPECT_EQ(r.warmup_end, reset_at + (before.size() - reset_at) / 4);
  EXPECT_EQ(r.raw_allocs_after_warmup, expected.num_raw_allocs - before[r.warmup_end].num_raw_allocs);
  EXPECT_GT(r.raw_allocs_after_warmup, 0u);
  EXPECT_DOUBLE_EQ(r.ratio(), static_cast<double>(expected.peak_reserved_bytes) /
                                  static_cast<double>(expected.peak_allocated_bytes));
  for (void* p : blocks) live.free(p);
}

TEST(AllocTraceTest, ReplayOptionsAndBreakdown) {
  // 30 MiB, 30 MiB and 50 MiB on a 100 MiB device: the third does not fit, and its free is skipped.
  const std::string text =
      "rtx-alloc-trace 1 min_block_size=512 small_size=1048576 small_buffer=2097152 min_large_alloc=10485760 "
      "large_buffer=20971520 round_large=2097152 huge_segment=1073741824 huge_split=4 max_split_size=none "
      "garbage_collection_threshold=0 device_total=104857600\n"
      "a 31457280 0 100\na 31457280 0 200\na 52428800 0 300\nf 300\nf 100\na 2048 0 400\n";
  const AllocTrace trace = parse(text);
  ReplayOptions options;
  options.config = trace.header.config;
  options.breakdown = true;
  const ReplayResult r = replay_trace(trace, options);
  EXPECT_EQ(r.ooms, 1u);
  EXPECT_EQ(r.stats.num_ooms, 1u);
  EXPECT_EQ(r.stats.num_oom_retries, 1u);
  EXPECT_EQ(r.stats.peak_reserved_bytes, 62 * kMiB);  // the two segments and a small-pool one
  EXPECT_EQ(r.stats.peak_allocated_bytes, 60 * kMiB);
  EXPECT_EQ(r.stats.allocated_bytes, 30 * kMiB + 2048);
  EXPECT_EQ(r.peak_reserved_event, 5u);
  EXPECT_EQ(r.peak_allocated_event, 3u);  // the last event still at 60 MiB: the skipped free
  ASSERT_EQ(r.at_peak_allocated.size(), 6u);
  EXPECT_EQ(r.at_peak_allocated[2].name, "large pool, other segments < 64 MiB");
  EXPECT_EQ(r.at_peak_allocated[2].segments, 2u);
  EXPECT_EQ(r.at_peak_allocated[2].reserved, 60 * kMiB);
  EXPECT_EQ(r.at_peak_allocated[2].allocated, 60 * kMiB);
  EXPECT_EQ(r.at_peak_allocated[0].segments, 0u);
  // Replayed with garbage collection (the policy's settings, not the trace's), the last allocation
  // first returns the free 30 MiB segment.
  options.config = parse_alloc_conf("garbage_collection_threshold:0.5");
  const ReplayResult gc = replay_trace(trace, options);
  EXPECT_EQ(gc.stats.peak_reserved_bytes, 60 * kMiB);
  EXPECT_EQ(gc.stats.reserved_bytes, 32 * kMiB);
  EXPECT_EQ(gc.stats.num_raw_frees, 1u);
  EXPECT_EQ(gc.ooms, 1u);
  options.warmup_fraction = 1.5;
  EXPECT_TRUE(
      throws<ValueError>([&] { replay_trace(trace, options); }, "the warm-up fraction must be in [0, 1], got 1.5"));
}

// A trace of the shape of GPT-2 training steps of varying batch and context (4 of GPT-2 124M's 12 blocks,
// 30 steps), written by bench/python/alloc_trace_gpt.py. Before the rule that keeps entirely free huge
// segments for huge requests, this replayed to 1.47x and a device allocation after the warm-up: a
// 1.5 GiB segment for the logits' gradient, the logits segments having been taken by smaller blocks.
TEST(AllocTraceTest, GptShapedTraceSettles) {
  const std::string path = temp_path("rtx_gpt_trace");
  const std::string command =
      "python3 " RTX_SOURCE_DIR "/bench/python/alloc_trace_gpt.py --out " + path +
      " --layers 4 --shapes 8:1024,1:128,4:1024,4:128,2:512,4:512,4:512,8:1024,2:128,8:256,8:256,1:1024,4:128,"
      "2:1024,1:512,1:256,8:128,1:1024,4:256,4:1024,8:1024,4:512,2:1024,4:256,4:128,2:256,4:128,2:1024,2:512,1:128"
      " 2>/dev/null";
  if (std::system("python3 -c pass") != 0) GTEST_SKIP() << "no python3 to run bench/python/alloc_trace_gpt.py";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(path);
  const AllocTrace trace = read_alloc_trace(in, path);
  std::remove(path.c_str());
  ReplayOptions options;
  options.config = trace.header.config;
  options.warmup_fraction = 1.0 / 3.0;  // the first 10 steps
  const ReplayResult r = replay_trace(trace, options);
  EXPECT_NEAR(static_cast<double>(r.stats.peak_allocated_bytes) / kGiB, 5.58, 0.01);
  EXPECT_LE(r.ratio(), 1.17);
  EXPECT_EQ(r.raw_allocs_after_warmup, 0u);
  EXPECT_EQ(r.retries_after_warmup, 0u);
}

}  // namespace
}  // namespace rtx::cuda
