// The default random generator (seed + counter offset behind a mutex).
#include "core/generator.h"

namespace rtx::detail {

void Generator::set_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

GeneratorState Generator::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return GeneratorState{seed_, offset_};
}

void Generator::set_state(const GeneratorState& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = state.seed;
  offset_ = state.offset;
}

GeneratorState Generator::reserve(uint64_t n_counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  const GeneratorState taken{seed_, offset_};
  offset_ += n_counters;
  return taken;
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

}  // namespace rtx::detail
