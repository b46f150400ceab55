// Hot CPU loops built a second time for AVX2 and picked at run time: the library's baseline is plain
// x86-64 (SSE2), whose two-double vectors halve the speed of loops that sum float data in double.
// Both builds give the same bits: AVX2 brings no fused multiply-add (FMA is a separate target), vector
// lanes round like scalars, and the loops' explicit lanes fix the order of every sum.
#pragma once

namespace rtx::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)

// f() with everything it calls inlined and compiled for AVX2.
template <typename F>
__attribute__((target("avx2"), flatten)) void run_avx2(const F& f) {
  f();
}

inline bool cpu_has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}

// f() built for AVX2 on CPUs that have it, else for the baseline.
template <typename F>
void with_vector_isa(const F& f) {
  if (cpu_has_avx2())
    run_avx2(f);
  else
    f();
}

#else

template <typename F>
void with_vector_isa(const F& f) {
  f();
}

#endif

}  // namespace rtx::cpu
