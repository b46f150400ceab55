// The CPU pointwise launcher, shared by every unary, binary and ternary op (and casts):
//   cpu::pointwise<out_t, in_t...>(out, functor, inputs...)
// Inputs have out's shape (front-ends broadcast them with stride-0 views). When every operand is
// contiguous the loop is a flat, vectorizable one; so it is when some inputs are one value broadcast
// everywhere (a scalar operand), which are read from a chunk-sized buffer of that value; otherwise
// dims are collapsed and the innermost dim runs with constant strides.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/collapse.h"
#include "kernels/common/opmath.h"
#include "rtx/tensor.h"

namespace rtx::cpu {

using detail::collapse;
using detail::Geometry;

// Functors whose math per element is long (exp, tanh): their contiguous loops are also built for
// AVX2 and AVX-512 (vector_isa.h), where the others are bound by memory and stay at the baseline.
template <typename F>
inline constexpr bool kLongMath = false;

// Calls op(ptrs) for every element, ptrs being one byte pointer per operand.
template <size_t N, typename Op>
void for_each_strided(const std::array<char*, N>& base, const Geometry<N>& g, int64_t n, int64_t grain, const Op& op) {
  const int64_t nd = static_cast<int64_t>(g.sizes.size());
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(nd);
    std::array<char*, N> p = base;
    int64_t rem = b;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % g.sizes[d];
      rem /= g.sizes[d];
      for (size_t k = 0; k < N; ++k) p[k] += idx[d] * g.strides[k][d];
    }
    const int64_t inner = g.sizes[nd - 1];
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = g.strides[k][nd - 1];
    for (int64_t i = b; i < e;) {
      const int64_t run = std::min(inner - idx[nd - 1], e - i);
      std::array<char*, N> q = p;
      for (int64_t j = 0; j < run; ++j) {
        op(q);
        for (size_t k = 0; k < N; ++k) q[k] += s[k];
      }
      i += run;
      for (size_t k = 0; k < N; ++k) p[k] += run * s[k];
      idx[nd - 1] += run;
      // Carry into outer dims.
      for (int64_t d = nd - 1; d > 0 && idx[d] == g.sizes[d]; --d) {
        for (size_t k = 0; k < N; ++k) p[k] += g.strides[k][d - 1] - g.sizes[d] * g.strides[k][d];
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  });
}

namespace loops_detail {
// The output is a fresh tensor or exactly one of the inputs (in-place ops; front-ends copy through a
// temporary when operands overlap otherwise), so iterations never depend on each other: ivdep lets
// the compiler vectorize without the runtime overlap check, which rejects the in-place case.
template <typename Out, typename... In, typename F, size_t... I>
void contiguous(Out* o, const std::tuple<const In*...>& in, int64_t b, int64_t e, const F& f, std::index_sequence<I...>) {
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
  for (int64_t i = b; i < e; ++i)
    o[i] = static_cast<Out>(f(static_cast<detail::opmath_t<In>>(std::get<I>(in)[i])...));
}

// contiguous() over [b, e) in chunks, the inputs marked uniform (one value everywhere) read from a
// buffer repeating their value, so the inner loop stays a flat one over plain arrays.
template <typename Out, typename... In, typename F, size_t... I>
void contiguous_with_uniform(Out* o, const std::tuple<const In*...>& in, const std::array<bool, sizeof...(In)>& uniform,
                             int64_t b, int64_t e, const F& f, std::index_sequence<I...> seq) {
  constexpr int64_t kChunk = 256;
  std::tuple<std::array<In, kChunk>...> repeated;
  ((uniform[I] ? std::get<I>(repeated).fill(*std::get<I>(in)) : void()), ...);
  for (int64_t c = b; c < e; c += kChunk) {
    const std::tuple<const In*...> chunk{(uniform[I] ? std::get<I>(repeated).data() : std::get<I>(in) + c)...};
    contiguous<Out, In...>(o + c, chunk, 0, std::min(kChunk, e - c), f, seq);
  }
}

// Every element of t is the same one: all strides of dims longer than 1 are 0.
inline bool is_uniform(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) != 0) return false;
  return true;
}

template <typename Out, typename... In, typename F, size_t N, size_t... I>
inline void element(const std::array<char*, N>& p, const F& f, std::index_sequence<I...>) {
  *reinterpret_cast<Out*>(p[0]) =
      static_cast<Out>(f(static_cast<detail::opmath_t<In>>(*reinterpret_cast<const In*>(p[I + 1]))...));
}
}  // namespace loops_detail

template <typename Out, typename... In, typename F, typename... Ts>
void pointwise(const Tensor& out, const F& f, const Ts&... ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one input type per input tensor");
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool contiguous = (out.is_contiguous() && ... && ins.is_contiguous());
  if (contiguous) {
    Out* o = static_cast<Out*>(out.data_ptr());
    const std::tuple<const In*...> in{static_cast<const In*>(ins.data_ptr())...};
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      const auto loop = [&] { loops_detail::contiguous<Out, In...>(o, in, b, e, f, std::index_sequence_for<In...>{}); };
      if constexpr (kLongMath<F>) with_vector_isa(loop);
      else loop();
    });
    return;
  }
  const std::array<bool, sizeof...(In)> uniform{loops_detail::is_uniform(ins)...};
  const bool flat = out.is_contiguous() && ((ins.is_contiguous() || loops_detail::is_uniform(ins)) && ...);
  if (flat) {
    Out* o = static_cast<Out*>(out.data_ptr());
    const std::tuple<const In*...> in{static_cast<const In*>(ins.data_ptr())...};
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      loops_detail::contiguous_with_uniform<Out, In...>(o, in, uniform, b, e, f, std::index_sequence_for<In...>{});
    });
    return;
  }
  constexpr size_t N = 1 + sizeof...(In);
  const std::array<const Tensor*, N> ops{&out, &ins...};
  const Geometry<N> g = collapse<N>(ops);
  std::array<char*, N> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(ins.data_ptr())...};
  for_each_strided<N>(base, g, n, kGrainSize, [&](const std::array<char*, N>& p) {
    loops_detail::element<Out, In...>(p, f, std::index_sequence_for<In...>{});
  });
}

}  // namespace rtx::cpu
