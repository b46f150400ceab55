// Autocast (automatic mixed precision): inside an AutocastGuard's scope, ops on tensors of that
// device type run in the dtype their cast rule picks. Matrix products, convolutions and attention run
// in the region's low dtype (bfloat16 or float16); ops that need range (softmax, norms, losses,
// exp/log/pow, sum/prod/cumsum) run in float32; every other op runs in its inputs' dtype (ops with
// several inputs promote to the widest, as outside a region). The state is per thread.
//
//   rtx::AutocastGuard bf16(rtx::kCUDA, rtx::kBFloat16);
//   Tensor logits = model(x);          // matmuls in bfloat16
//   Tensor loss = rtx::cross_entropy(logits, y);  // float32
//
// A float32 leaf that requires grad (a weight) is cast to the low dtype once per region and the cast
// reused (the cast cache, emptied when the outermost region ends); casts are differentiable, so
// gradients reach float32 parameters in float32. Backward passes run without autocast: each
// gradient op runs in the dtype its forward op ran in.
#pragma once

#include <cstdint>
#include <optional>

#include "rtx/device.h"
#include "rtx/dtype.h"
#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx {

// Whether autocast is on for a device type on this thread, and the low dtype it uses (float16 on
// CUDA and bfloat16 on the CPU until set, as in PyTorch).
RTX_API bool is_autocast_enabled(DeviceType device);
RTX_API DType get_autocast_dtype(DeviceType device);
RTX_API bool is_autocast_cache_enabled();
// Empties the cast cache of this thread (the outermost AutocastGuard does it on exit).
RTX_API void clear_autocast_cache();

// Enables (or, with enabled = false, disables) autocast to dtype for device's type for its scope, and
// restores the previous state on exit; regions nest. dtype must be bfloat16 or float16 (ValueError).
class RTX_API AutocastGuard {
 public:
  AutocastGuard(DeviceType device, DType dtype, bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

namespace autocast {

// What autocast did on this thread: casts made (cache hits excluded) and weights now in the cache.
struct Stats {
  int64_t casts = 0;
  int64_t cached = 0;
};
RTX_API Stats stats();

// Cast rules, for ops written outside the library (the library's own ops declare theirs with
// RTX_AUTOCAST): lower runs an op in the region's low dtype, fp32 in float32.
enum class Rule { lower, fp32 };
// Whether any rule can apply on this thread (some region open, not inside an op that applied one).
RTX_API bool active();
// The dtype rule r casts to on device type d, or nothing when autocast is off there.
RTX_API std::optional<DType> target(Rule r, DeviceType d);
// t cast to dtype when autocast casts it (a floating tensor on device type d: not float64 when
// lowering, only 16-bit floats for fp32); float32 leaves requiring grad go through the cast cache.
RTX_API Tensor cast(const Tensor& t, DType dtype, DeviceType d);
// Turns autocast off for its scope: an op runs its body with cast arguments under it, so the ops it
// calls run as written. Backward passes and the recorded path of in-place ops run under it too.
class RTX_API ExcludeGuard {
 public:
  ExcludeGuard();
  ~ExcludeGuard();
  ExcludeGuard(const ExcludeGuard&) = delete;
  ExcludeGuard& operator=(const ExcludeGuard&) = delete;
};

}  // namespace autocast
}  // namespace rtx
