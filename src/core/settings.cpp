// Process-wide numerics settings (atomics: read on every matmul launch, written rarely).
#include "rtx/settings.h"

#include <atomic>

#include "core/check.h"

namespace rtx {
namespace {

enum class MatmulPrecision : int { Highest, High, Medium };

std::atomic<int> g_matmul_precision{static_cast<int>(MatmulPrecision::Highest)};
std::atomic<bool> g_deterministic{false};

}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  MatmulPrecision p;
  if (precision == "highest") p = MatmulPrecision::Highest;
  else if (precision == "high") p = MatmulPrecision::High;
  else if (precision == "medium") p = MatmulPrecision::Medium;
  else RTX_THROW(ValueError, "[set_float32_matmul_precision] expected \"highest\", \"high\" or \"medium\", got \"{}\"", precision);
  g_matmul_precision.store(static_cast<int>(p), std::memory_order_relaxed);
}

std::string get_float32_matmul_precision() {
  switch (static_cast<MatmulPrecision>(g_matmul_precision.load(std::memory_order_relaxed))) {
    case MatmulPrecision::High: return "high";
    case MatmulPrecision::Medium: return "medium";
    case MatmulPrecision::Highest: break;
  }
  return "highest";
}

void use_deterministic_algorithms(bool on) { g_deterministic.store(on, std::memory_order_relaxed); }
bool are_deterministic_algorithms_enabled() { return g_deterministic.load(std::memory_order_relaxed); }

}  // namespace rtx
