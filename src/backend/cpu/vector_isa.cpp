// The vector ISA that the CPU loops of vector_isa.h run: the CPU's widest, detected once.
#include "backend/cpu/vector_isa.h"

#include <atomic>

namespace rtx::cpu {
namespace {

VectorIsa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return VectorIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return VectorIsa::kAvx2;
#endif
  return VectorIsa::kBaseline;
}

std::atomic<VectorIsa>& chosen() {
  static std::atomic<VectorIsa> isa{cpu_vector_isa()};
  return isa;
}

}  // namespace

VectorIsa cpu_vector_isa() {
  static const VectorIsa widest = detect();
  return widest;
}

VectorIsa vector_isa() { return chosen().load(std::memory_order_relaxed); }

bool set_vector_isa(VectorIsa isa) {
  if (static_cast<int>(isa) > static_cast<int>(cpu_vector_isa())) return false;
  chosen().store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace rtx::cpu
