// Random generators: a Philox key (the seed) and the next unused counter (the offset), shared by
// every device so that one seed gives the same numbers on CPU and GPU. Random ops take fresh counters
// from the calling thread's current generator with reserve(); see kernels/common/philox.h for how
// counters become values. rtx::Generator (rtx/ops.h) is the public handle to one.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "rtx/ops.h"

namespace rtx::detail {

// What a random kernel draws with: the seed and the first of its counters. While a CUDA graph captures
// the generator, replay_cell is that graph's device cell {seed, counter shift}, which each replay
// writes: kernels captured on the graph's stream draw with (cell[0], offset + cell[1]) instead.
struct RandomCounters {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const uint64_t* replay_cell = nullptr;
};

// PyTorch's default seed.
constexpr uint64_t kDefaultSeed = 67280421310721ull;

class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}
  // Sets the seed and restarts at counter 0.
  void set_seed(uint64_t seed);
  uint64_t seed() const;
  GeneratorState state() const;
  void set_state(const GeneratorState& state);
  // Takes n_counters fresh counters: returns the seed and the first counter's offset, and advances
  // the offset past them (atomically with respect to the other calls).
  RandomCounters reserve(uint64_t n_counters);

  // A CUDA graph's capture of this generator: from begin_capture on, reserve() hands out `cell`;
  // begin_capture returns the offset it starts at (nothing when another capture holds the generator),
  // end_capture the counters taken since (what each replay takes) and puts the offset back: as in
  // PyTorch, a capture itself draws nothing.
  std::optional<uint64_t> begin_capture(const uint64_t* cell);
  uint64_t end_capture();

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
  const uint64_t* capture_cell_ = nullptr;
  uint64_t capture_start_ = 0;
};

// The process-wide default generator.
Generator& default_generator();
// The generator random ops on this thread draw from: the innermost GeneratorGuard's, else the default.
Generator& current_generator();

}  // namespace rtx::detail
