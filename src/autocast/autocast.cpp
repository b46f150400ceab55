// Autocast state of each thread, its guard, and the casts the rules make, with the cache of casts of
// float32 weights (one entry per leaf; valid while the weight's version, the dtype and the grad mode
// it was made under are unchanged).
#include <unordered_map>

#include "autocast/policy.h"
#include "core/check.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx {
namespace autocast {
namespace {

struct CachedCast {
  Tensor source;  // held so that its address cannot be reused by another tensor while cached
  Tensor cast;
  uint64_t version;
  bool grad_enabled;
};

struct ThreadCache {
  std::unordered_map<const rtx::detail::TensorImpl*, CachedCast> casts;
  int64_t casts_made = 0;
};

ThreadCache& thread_cache() {
  thread_local ThreadCache cache;
  return cache;
}

int index(DeviceType d) { return static_cast<int>(d); }

}  // namespace

namespace detail {

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

ReplayGuard::ReplayGuard(const ThreadState& captured) : saved_(thread_state()) {
  ThreadState& s = thread_state();
  s = captured;
  s.excluded = 0;
  s.depth = saved_.depth + 1;
}

ReplayGuard::~ReplayGuard() {
  thread_state() = saved_;
  if (saved_.depth == 0) clear_autocast_cache();
}

}  // namespace detail

using detail::thread_state;

bool active() {
  const detail::ThreadState& s = thread_state();
  return s.excluded == 0 && (s.enabled[0] || s.enabled[1]);
}

ExcludeGuard::ExcludeGuard() { ++thread_state().excluded; }
ExcludeGuard::~ExcludeGuard() { --thread_state().excluded; }

std::optional<DType> target(Rule r, DeviceType d) {
  const detail::ThreadState& s = thread_state();
  if (s.excluded > 0 || !s.enabled[index(d)]) return std::nullopt;
  return r == Rule::lower ? s.dtype[index(d)] : kFloat32;
}

Tensor cast(const Tensor& t, DType dtype, DeviceType d) {
  if (!t.defined() || t.device().type != d || !is_floating(t.dtype()) || t.dtype() == dtype) return t;
  const bool lowering = dtype != kFloat32;
  if (lowering ? t.dtype() == kFloat64 : t.dtype() != kFloat16 && t.dtype() != kBFloat16) return t;
  ThreadCache& cache = thread_cache();
  const bool cacheable = lowering && thread_state().cache_enabled && t.dtype() == kFloat32 && t.is_leaf() &&
                         t.requires_grad();
  if (!cacheable) {
    ++cache.casts_made;
    return to_dtype(t, dtype);
  }
  const bool grad = is_grad_enabled();
  auto it = cache.casts.find(t.impl());
  if (it != cache.casts.end() && it->second.cast.dtype() == dtype && it->second.version == t.version() &&
      it->second.grad_enabled == grad)
    return it->second.cast;
  ++cache.casts_made;
  Tensor out = to_dtype(t, dtype);
  cache.casts[t.impl()] = CachedCast{t, out, t.version(), grad};
  return out;
}

}  // namespace autocast

using autocast::detail::thread_state;

bool is_autocast_enabled(DeviceType device) { return thread_state().enabled[static_cast<int>(device)]; }
DType get_autocast_dtype(DeviceType device) { return thread_state().dtype[static_cast<int>(device)]; }
bool is_autocast_cache_enabled() { return thread_state().cache_enabled; }
void clear_autocast_cache() { autocast::thread_cache().casts.clear(); }

AutocastGuard::AutocastGuard(DeviceType device, DType dtype, bool enabled, bool cache_enabled) : device_(device) {
  RTX_CHECK(dtype == kBFloat16 || dtype == kFloat16, ValueError,
            "[autocast] the low dtype must be bfloat16 or float16, got {} (autocast on {})", dtype,
            device_type_name(device));
  auto& s = thread_state();
  const int d = static_cast<int>(device);
  prev_enabled_ = s.enabled[d];
  prev_dtype_ = s.dtype[d];
  prev_cache_enabled_ = s.cache_enabled;
  s.enabled[d] = enabled;
  s.dtype[d] = dtype;
  s.cache_enabled = cache_enabled;
  ++s.depth;
}

AutocastGuard::~AutocastGuard() {
  auto& s = thread_state();
  const int d = static_cast<int>(device_);
  s.enabled[d] = prev_enabled_;
  s.dtype[d] = prev_dtype_;
  s.cache_enabled = prev_cache_enabled_;
  if (--s.depth == 0) clear_autocast_cache();
}

autocast::Stats autocast::stats() {
  const auto& cache = autocast::thread_cache();
  return {cache.casts_made, static_cast<int64_t>(cache.casts.size())};
}

}  // namespace rtx
