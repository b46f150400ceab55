// The cast rules op front-ends declare for autocast (include/rtx/autocast.h). An op with a rule
// starts with one line naming it, its own name and its parameters:
//
//   Tensor matmul(const Tensor& a, const Tensor& b) {
//     RTX_AUTOCAST(lower, matmul, a, b);
//     ...
//
// When autocast is on for the device of the op's first tensor argument, the line re-enters the op
// with its floating tensor arguments cast (lower: to the region's low dtype, float64 left alone;
// fp32: bfloat16/float16 to float32) and autocast excluded, so the ops it calls run as written and
// the rule applies once. Ops without a rule run in their inputs' dtype. Pointwise ops of the table
// declare theirs in include/rtx/pointwise.def (RTX_AUTOCAST_FP32); the Python package's composites
// through rustytorch._autocast_rule, which calls the same casts.
#pragma once

#include <optional>
#include <type_traits>

#include "rtx/autocast.h"
#include "rtx/tensor.h"

namespace rtx::autocast::detail {

// The autocast state of a thread.
struct ThreadState {
  bool enabled[kNumDeviceTypes] = {false, false};
  DType dtype[kNumDeviceTypes] = {kBFloat16, kFloat16};  // indexed by DeviceType: CPU, CUDA
  bool cache_enabled = true;
  int excluded = 0;  // open ExcludeGuards
  int depth = 0;     // open AutocastGuards
};
ThreadState& thread_state();

// Reinstates a captured autocast state for its scope (activation checkpointing replays a forward
// pass inside backward, where autocast is excluded, under the state the forward ran in).
class ReplayGuard {
 public:
  explicit ReplayGuard(const ThreadState& captured);
  ~ReplayGuard();
  ReplayGuard(const ReplayGuard&) = delete;
  ReplayGuard& operator=(const ReplayGuard&) = delete;

 private:
  ThreadState saved_;
};

// The device type of the first defined tensor among the arguments.
inline std::optional<DeviceType> first_device() { return std::nullopt; }
template <typename T, typename... Rest>
std::optional<DeviceType> first_device(const T& first, const Rest&... rest) {
  if constexpr (std::is_same_v<T, Tensor>) {
    if (first.defined()) return first.device().type;
  } else if constexpr (std::is_same_v<T, TensorList>) {
    for (const Tensor& t : first)
      if (t.defined()) return t.device().type;
  }
  return first_device(rest...);
}

inline Tensor cast_arg(const Tensor& t, DType dtype, DeviceType d) { return cast(t, dtype, d); }
inline TensorList cast_arg(const TensorList& ts, DType dtype, DeviceType d) {
  TensorList out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(cast(t, dtype, d));
  return out;
}
template <typename T>
const T& cast_arg(const T& other, DType, DeviceType) {
  return other;
}

// op re-entered with its arguments cast, autocast excluded.
template <typename Op, typename... Args>
auto call_cast(DType dtype, DeviceType d, const Op& op, const Args&... args) {
  ExcludeGuard excluded;
  return op(cast_arg(args, dtype, d)...);
}

}  // namespace rtx::autocast::detail

// The cast rule of an op (lower or fp32), first statement of its front-end; see above.
#define RTX_AUTOCAST(rule, op, ...)                                                                               \
  do {                                                                                                            \
    if (::rtx::autocast::active()) {                                                                              \
      if (const auto rtx_autocast_device = ::rtx::autocast::detail::first_device(__VA_ARGS__)) {                  \
        if (const auto rtx_autocast_dtype = ::rtx::autocast::target(::rtx::autocast::Rule::rule,                  \
                                                                    *rtx_autocast_device))                        \
          return ::rtx::autocast::detail::call_cast(                                                              \
              *rtx_autocast_dtype, *rtx_autocast_device, [](const auto&... rtx_args) { return op(rtx_args...); }, \
              __VA_ARGS__);                                                                                       \
      }                                                                                                           \
    }                                                                                                             \
  } while (0)
