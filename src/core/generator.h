// Random generators: a Philox key (the seed) and the next unused counter (the offset), shared by
// every device so that one seed gives the same numbers on CPU and GPU. Random ops take fresh counters
// from the calling thread's current generator with reserve(); see kernels/common/philox.h for how
// counters become values. rtx::Generator (rtx/ops.h) is the public handle to one.
#pragma once

#include <cstdint>
#include <mutex>

#include "rtx/ops.h"

namespace rtx::detail {

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
  GeneratorState reserve(uint64_t n_counters);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide default generator.
Generator& default_generator();
// The generator random ops on this thread draw from: the innermost GeneratorGuard's, else the default.
Generator& current_generator();

}  // namespace rtx::detail
