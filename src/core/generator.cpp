// Random generators (seed + counter offset behind a mutex, and the CUDA graph capturing one), the
// public Generator handle, and the per-thread current generator that GeneratorGuard sets.
#include "core/generator.h"

#include <random>
#include <utility>

namespace rtx {
namespace detail {
namespace {

// The default generator, never destroyed (random ops may run during static destruction).
const std::shared_ptr<Generator>& shared_default() {
  static const auto* generator = new std::shared_ptr<Generator>(std::make_shared<Generator>());
  return *generator;
}

// The innermost GeneratorGuard's generator on this thread (null: the default).
thread_local Generator* t_current = nullptr;

}  // namespace

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

RandomCounters Generator::reserve(uint64_t n_counters) {
  std::lock_guard<std::mutex> lock(mutex_);
  const RandomCounters taken{seed_, offset_, capture_cell_};
  offset_ += n_counters;
  return taken;
}

std::optional<uint64_t> Generator::begin_capture(const uint64_t* cell) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_cell_ != nullptr) return std::nullopt;
  capture_cell_ = cell;
  capture_start_ = offset_;
  return offset_;
}

uint64_t Generator::end_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  capture_cell_ = nullptr;
  const uint64_t taken = offset_ - capture_start_;
  offset_ = capture_start_;
  return taken;
}

Generator& default_generator() { return *shared_default(); }

Generator& current_generator() { return t_current != nullptr ? *t_current : default_generator(); }

}  // namespace detail

// ---- the public handle --------------------------------------------------------------------------

Generator::Generator(Device device) : impl_(std::make_shared<detail::Generator>()), device_(device) {}

Generator::Generator(std::shared_ptr<detail::Generator> impl, Device device)
    : impl_(std::move(impl)), device_(device) {}

Generator& Generator::manual_seed(uint64_t seed) {
  impl_->set_seed(seed);
  return *this;
}

uint64_t Generator::seed() {
  std::random_device source;
  const uint64_t seed = (static_cast<uint64_t>(source()) << 32) | source();
  impl_->set_seed(seed);
  return seed;
}

uint64_t Generator::initial_seed() const { return impl_->seed(); }
GeneratorState Generator::get_state() const { return impl_->state(); }
void Generator::set_state(const GeneratorState& state) { impl_->set_state(state); }

Generator default_generator() { return Generator(detail::shared_default(), Device(kCPU)); }

GeneratorGuard::GeneratorGuard(const Generator& generator)
    : generator_(generator), previous_(std::exchange(detail::t_current, &generator.impl())) {}

GeneratorGuard::~GeneratorGuard() { detail::t_current = previous_; }

}  // namespace rtx
