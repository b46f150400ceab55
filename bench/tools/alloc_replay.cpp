// rtx_alloc_replay: replays a CUDA caching-allocator trace (written with RTX_CUDA_ALLOC_TRACE=PATH)
// against this build's allocator policy on a simulated device, and prints peak reserved and allocated
// memory, device allocations and retries (in all and after the warm-up) and, with --breakdown, how the
// segments were used when reserved memory peaked.
//
//   rtx_alloc_replay TRACE [--warmup-fraction F] [--max-split-size-mb N] [--garbage-collection-threshold T]
//                    [--breakdown]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/alloc_trace.h"
#include "rtx/error.h"

namespace {

using namespace rtx::cuda;

constexpr const char* kUsage =
    "usage: rtx_alloc_replay TRACE [--warmup-fraction F] [--max-split-size-mb N] "
    "[--garbage-collection-threshold T] [--breakdown]\n"
    "  TRACE                             a trace written with RTX_CUDA_ALLOC_TRACE=TRACE\n"
    "  --warmup-fraction F               the warm-up: this fraction of the events after the last reset of the\n"
    "                                    peak statistics (default 0.1)\n"
    "  --max-split-size-mb N             replay with max_split_size_mb:N instead of the trace's setting\n"
    "  --garbage-collection-threshold T  replay with garbage_collection_threshold:T instead of the trace's\n"
    "  --breakdown                       the segments by size class when reserved memory reached its peak\n"
    "                                    and when allocated memory was last at its peak\n";

std::string settings(const AllocatorConfig& c) {
  return fmt::format("max_split_size {}, garbage_collection_threshold {}",
                     c.max_split_size == SIZE_MAX ? std::string("none") : format_bytes(c.max_split_size),
                     c.garbage_collection_threshold > 0.0 ? fmt::format("{}", c.garbage_collection_threshold)
                                                          : std::string("off"));
}

void print_classes(const std::string& when, const std::vector<SegmentClassUsage>& classes) {
  fmt::print("\nsegments {}:\n", when);
  fmt::print("{:<38}{:>9}{:>13}{:>13}{:>13}{:>14}\n", "segment class", "segments", "reserved", "allocated", "free",
             "largest free");
  for (const SegmentClassUsage& c : classes) {
    if (c.segments == 0) continue;
    fmt::print("{:<38}{:>9}{:>13}{:>13}{:>13}{:>14}\n", c.name, c.segments, format_bytes(c.reserved),
               format_bytes(c.allocated), format_bytes(c.reserved - c.allocated), format_bytes(c.largest_free));
  }
}

int run(int argc, char** argv) {
  std::string path;
  ReplayOptions options;
  std::optional<size_t> max_split_size;  // settings replacing the trace's
  std::optional<double> gc_threshold;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw rtx::ValueError(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--warmup-fraction") {
      const std::string v = value();
      char* end = nullptr;
      options.warmup_fraction = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') throw rtx::ValueError(fmt::format("--warmup-fraction: '{}' is not a number", v));
    } else if (arg == "--max-split-size-mb") {
      max_split_size = parse_alloc_conf("max_split_size_mb:" + value()).max_split_size;
    } else if (arg == "--garbage-collection-threshold") {
      gc_threshold = parse_alloc_conf("garbage_collection_threshold:" + value()).garbage_collection_threshold;
    } else if (arg == "--breakdown") {
      options.breakdown = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw rtx::ValueError(fmt::format("unknown option '{}'\n{}", arg, kUsage));
    } else if (path.empty()) {
      path = arg;
    } else {
      throw rtx::ValueError(fmt::format("one trace at a time (got '{}' and '{}')", path, arg));
    }
  }
  if (path.empty()) throw rtx::ValueError(fmt::format("no trace given\n{}", kUsage));

  std::ifstream in(path, std::ios::binary);
  if (!in) throw rtx::ValueError(fmt::format("cannot open '{}'", path));
  const AllocTrace trace = read_alloc_trace(in, path);
  options.config = trace.header.config;
  if (max_split_size) options.config.max_split_size = *max_split_size;
  if (gc_threshold) options.config.garbage_collection_threshold = *gc_threshold;
  const ReplayResult r = replay_trace(trace, options);
  const rtx::cuda::MemoryStats& s = r.stats;

  fmt::print("trace                {} ({} events), recorded with {}, device {}\n", path, r.events,
             settings(trace.header.config),
             trace.header.device_total == 0 ? std::string("of unknown size") : format_bytes(trace.header.device_total));
  if (!trace.header.same_constants())
    fmt::print("                     (recorded with other allocator constants than this build's)\n");
  fmt::print("replayed with        {}\n", settings(options.config));
  fmt::print("measured             from event {} ({}); warm-up until event {}\n", r.measured_from,
             r.measured_from == 0 ? "the start" : "after the last reset of the peak statistics", r.warmup_end);
  fmt::print("peak allocated       {}\n", format_bytes(s.peak_allocated_bytes));
  fmt::print("peak reserved        {} (at event {})\n", format_bytes(s.peak_reserved_bytes), r.peak_reserved_event);
  fmt::print("reserved/allocated   {:.3f}\n", r.ratio());
  fmt::print("device allocations   {} ({} after the warm-up), device frees {}\n", s.num_raw_allocs,
             r.raw_allocs_after_warmup, s.num_raw_frees);
  fmt::print("allocation retries   {} ({} after the warm-up); allocations that did not fit the device: {}\n",
             s.num_oom_retries, r.retries_after_warmup, r.ooms);
  if (options.breakdown) {
    print_classes(fmt::format("when reserved memory reached its peak (after event {})", r.peak_reserved_event),
                  r.at_peak_reserved);
    print_classes(fmt::format("when allocated memory was last at its peak (after event {})", r.peak_allocated_event),
                  r.at_peak_allocated);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rtx_alloc_replay: %s\n", e.what());
    return 2;
  }
}
