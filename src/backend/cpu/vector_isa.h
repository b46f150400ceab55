// Hot CPU loops built again for AVX2 and for AVX-512 and picked at run time: the library's baseline
// is plain x86-64 (SSE2), whose four-float vectors hold back loops of long float math (exp, tanh) and
// whose two-double vectors halve the speed of loops that sum float data in double. Every build gives
// the same bits: the library compiles with -ffp-contract=off, so no ISA fuses a multiply-add, vector
// lanes round like scalars, and the loops' explicit lanes fix the order of every sum.
#pragma once

#include "rtx/export.h"

namespace rtx::cpu {

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

// 16 floats at any 4-byte boundary, for loops written with explicit vectors (GCC's vector extension:
// each ISA lowers it to its own registers, four SSE, two AVX2 or one AVX-512 vector). Load and store
// through a pointer to it; pass it by reference.
using Floats16 = float __attribute__((vector_size(16 * sizeof(float)), aligned(alignof(float)), may_alias));
using Ints16 = int __attribute__((vector_size(16 * sizeof(int))));  // shuffle masks of Floats16

// The widest ISA this CPU has (AVX-512 means F, BW, DQ and VL), and the one with_vector_isa builds
// run (the widest unless set lower); exported so that tests can run the loops under each one.
RTX_API VectorIsa cpu_vector_isa();
RTX_API VectorIsa vector_isa();
// Runs with_vector_isa's loops for isa from now on, as long as the CPU has it; false if it has not.
RTX_API bool set_vector_isa(VectorIsa isa);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)

// f() with everything it calls inlined and compiled for AVX-512, or for AVX2.
template <typename F>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"), flatten)) void run_avx512(const F& f) {
  f();
}
template <typename F>
__attribute__((target("avx2"), flatten)) void run_avx2(const F& f) {
  f();
}

// f() built for vector_isa().
template <typename F>
void with_vector_isa(const F& f) {
  switch (vector_isa()) {
    case VectorIsa::kAvx512: run_avx512(f); break;
    case VectorIsa::kAvx2: run_avx2(f); break;
    case VectorIsa::kBaseline: f(); break;
  }
}

#else

template <typename F>
void with_vector_isa(const F& f) {
  f();
}

#endif

}  // namespace rtx::cpu
