// The process-wide default float dtype (torch.set_default_dtype): an atomic, read by every creation
// op that picks a float dtype and by the promotion of integers to floats, written rarely.
#include <atomic>

#include "core/check.h"

namespace rtx {
namespace {

std::atomic<DType> g_default_dtype{kDefaultFloat};

}  // namespace

DType get_default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }

void set_default_dtype(DType dtype) {
  RTX_CHECK(is_floating(dtype), DTypeError,
            "[set_default_dtype] only floating-point types can be the default dtype, got {}", dtype);
  g_default_dtype.store(dtype, std::memory_order_relaxed);
}

}  // namespace rtx
