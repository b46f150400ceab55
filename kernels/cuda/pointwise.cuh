// The CUDA pointwise launcher, shared by every unary, binary and ternary op, casts and fills:
//   cuda::pointwise<out_t, in_t...>(out, functor, inputs...)
// Inputs have out's shape (front-ends broadcast them with stride-0 views). An input may also be a
// number from the host (a 0-d CPU tensor expanded to out's shape): its value travels with the launch
// and is never read from memory. When every other operand is contiguous and aligned, each thread
// moves one 128-bit vector per operand (the tail is done element by element); otherwise dims are
// collapsed and each thread computes its operands' offsets, with 32-bit index math and
// multiply-shift division when every offset fits, 64-bit otherwise. Functors compute in opmath_t
// (float for the 16-bit floats), as on the CPU. Both kernels are dependent launches
// (kernels/cuda/dependent_launch.cuh).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/cuda/runtime.h"
#include "core/check.h"
#include "core/collapse.h"
#include "core/shape.h"
#include "kernels/common/opmath.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "rtx/tensor.h"

namespace rtx::cuda {

constexpr int kMaxDims = 16;
constexpr int kBlockSize = 256;

// Division by a fixed divisor in [1, 2^31) for dividends below 2^31: a multiply-high and a shift.
struct IntDivider {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};

// Byte offsets of N operands from a linear element index, dims innermost first.
template <int N, typename index_t>
struct OffsetCalculator {
  int dims = 0;
  index_t sizes[kMaxDims] = {};
  IntDivider dividers[kMaxDims] = {};
  index_t strides[kMaxDims][N] = {};

  __device__ __forceinline__ void offsets(index_t linear, index_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < dims; ++d) {
      index_t q;
      if constexpr (sizeof(index_t) == 4) q = dividers[d].div(linear);
      else q = linear / sizes[d];
      const index_t r = linear - q * sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
      linear = q;
    }
  }
};

template <typename T, int Vec>
struct alignas(sizeof(T) * Vec) Packed {
  using value_type = T;
  T v[Vec];
};

// One element: out = f(in...) with the inputs read in opmath_t.
template <typename Out, typename... In, typename F>
__device__ __forceinline__ Out apply(const F& f, In... in) {
  return static_cast<Out>(f(static_cast<rtx::detail::opmath_t<In>>(in)...));
}

// The inputs of a launch that are numbers from the host: bit k of mask marks input k, whose value
// is bits[k] (the bytes of one element of its type).
template <int N>
struct HostNumbers {
  uint32_t mask = 0;
  uint64_t bits[N > 0 ? N : 1] = {};

  __device__ __forceinline__ bool has(int k) const { return (mask >> k) & 1u; }
  template <typename T>
  __device__ __forceinline__ T value(int k) const {
    T v;
    memcpy(&v, &bits[k], sizeof(T));
    return v;
  }
};

// Input k's element i, or its host value.
template <typename T, int N>
__device__ __forceinline__ T input_element(const T* p, int64_t i, const HostNumbers<N>& host, int k) {
  return host.has(k) ? host.template value<T>(k) : p[i];
}
// Input k's 128-bit vector v, or its host value in every lane.
template <typename T, int Vec, int N>
__device__ __forceinline__ Packed<T, Vec> input_vector(const T* p, int64_t v, const HostNumbers<N>& host, int k) {
  if (!host.has(k)) return reinterpret_cast<const Packed<T, Vec>*>(p)[v];
  Packed<T, Vec> r;
  const T x = host.template value<T>(k);
#pragma unroll
  for (int j = 0; j < Vec; ++j) r.v[j] = x;
  return r;
}

// Vector v of out (elements v * Vec, ...; the tail past n element by element).
template <int Vec, typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void apply_vector(const F& f, int64_t n, int64_t v, const HostNumbers<sizeof...(In)>& host,
                                             std::index_sequence<I...>, Out* __restrict__ out,
                                             const In* __restrict__... in) {
  const int64_t first = v * Vec;
  if (first + Vec <= n) {
    Packed<Out, Vec> r;
    const auto compute = [&](const Packed<In, Vec>&... p) {
#pragma unroll
      for (int j = 0; j < Vec; ++j) r.v[j] = apply<Out, In...>(f, p.v[j]...);
    };
    compute(input_vector<In, Vec>(in, v, host, I)...);
    reinterpret_cast<Packed<Out, Vec>*>(out)[v] = r;
  } else {
    for (int64_t i = first; i < n; ++i) out[i] = apply<Out, In...>(f, input_element(in, i, host, I)...);
  }
}

template <int Vec, typename F, typename Out, typename... In>
__global__ void pointwise_vector_kernel(int64_t n, F f, HostNumbers<sizeof...(In)> host, Out* out, const In*... in) {
  wait_for_prior_grids();
  allow_dependents_to_launch();
  const int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  apply_vector<Vec, Out, In...>(f, n, v, host, std::index_sequence_for<In...>{}, out, in...);
}

template <int N>
struct BasePointers {
  char* p[N];
};

template <typename index_t, typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void apply_at(const F& f, const BasePointers<1 + sizeof...(In)>& base,
                                         const index_t (&off)[1 + sizeof...(In)], const HostNumbers<sizeof...(In)>& host,
                                         std::index_sequence<I...>) {
  *reinterpret_cast<Out*>(base.p[0] + off[0]) =
      apply<Out, In...>(f, input_element(reinterpret_cast<const In*>(base.p[I + 1] + off[I + 1]), 0, host, I)...);
}

template <typename index_t, typename F, typename Out, typename... In>
__global__ void pointwise_strided_kernel(index_t n, F f, HostNumbers<sizeof...(In)> host,
                                         BasePointers<1 + sizeof...(In)> base,
                                         OffsetCalculator<1 + sizeof...(In), index_t> calc) {
  wait_for_prior_grids();
  allow_dependents_to_launch();
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  index_t off[1 + sizeof...(In)];
  calc.offsets(i, off);
  apply_at<index_t, Out, In...>(f, base, off, host, std::index_sequence_for<In...>{});
}

// Elements per thread on the vector path: 16 bytes of the widest operand, at most 8.
template <typename Out, typename... In>
constexpr int vector_width() {
  return static_cast<int>(std::min<size_t>({size_t{8}, 16 / sizeof(Out), (16 / sizeof(In))...}));
}

inline unsigned grid_for(int64_t threads) { return static_cast<unsigned>((threads + kBlockSize - 1) / kBlockSize); }

template <int N, typename index_t>
OffsetCalculator<N, index_t> make_offset_calculator(const rtx::detail::Geometry<N>& g) {
  OffsetCalculator<N, index_t> c;
  c.dims = static_cast<int>(g.sizes.size());
  for (int d = 0; d < c.dims; ++d) {
    const size_t src = g.sizes.size() - 1 - static_cast<size_t>(d);  // innermost first
    c.sizes[d] = static_cast<index_t>(g.sizes[src]);
    if constexpr (sizeof(index_t) == 4) c.dividers[d] = IntDivider(static_cast<uint32_t>(g.sizes[src]));
    for (int k = 0; k < N; ++k) c.strides[d][k] = static_cast<index_t>(g.strides[static_cast<size_t>(k)][src]);
  }
  return c;
}

// Whether every element and byte offset of the collapsed operands fits 32-bit index math.
template <int N>
bool fits_32bit(const rtx::detail::Geometry<N>& g, int64_t n) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (n >= kLimit) return false;
  for (int k = 0; k < N; ++k) {
    int64_t extent = 0;
    for (size_t d = 0; d < g.sizes.size(); ++d) extent += (g.sizes[d] - 1) * g.strides[static_cast<size_t>(k)][d];
    if (extent >= kLimit) return false;
  }
  return true;
}

// Marks input k as a host number in `host` when it lies on the CPU, and returns the pointer the
// kernels get for it (none for a host number).
template <typename T, int N>
const T* device_input(const Tensor& t, int k, HostNumbers<N>& host) {
  if (!t.device().is_cpu()) return static_cast<const T*>(t.data_ptr());
  RTX_CHECK(std::all_of(t.strides().begin(), t.strides().end(), [](int64_t s) { return s == 0; }), Error,
            "[cuda] a pointwise input on the CPU must be one number expanded to the output's shape, got strides {}",
            rtx::detail::shape_str(t.strides()));
  host.mask |= 1u << k;
  std::memcpy(&host.bits[k], t.data_ptr(), sizeof(T));
  return nullptr;
}

template <typename Out, typename... In, typename F, typename... Ts, size_t... I>
void pointwise_launch(const Tensor& out, const F& f, std::index_sequence<I...>, const Ts&... ins) {
  constexpr int N = 1 + static_cast<int>(sizeof...(In));
  const int64_t n = out.numel();
  detail::KernelScope scope(out.device());
  HostNumbers<sizeof...(In)> host;
  [[maybe_unused]] const std::array<const void*, sizeof...(In)> in{device_input<In>(ins, static_cast<int>(I), host)...};
  constexpr int kVec = vector_width<Out, In...>();
  const auto vectorizable = [&](const Tensor& t, const void* p, size_t bytes) {
    return p == nullptr || (t.is_contiguous() && reinterpret_cast<uintptr_t>(p) % (bytes * kVec) == 0);
  };
  if ((vectorizable(out, out.data_ptr(), sizeof(Out)) && ... && vectorizable(ins, in[I], sizeof(In)))) {
    launch_dependent(pointwise_vector_kernel<kVec, F, Out, In...>, grid_for((n + kVec - 1) / kVec), kBlockSize, scope,
                     n, f, host, static_cast<Out*>(out.data_ptr()), static_cast<const In*>(in[I])...);
    return;
  }
  const std::array<const Tensor*, N> ops{&out, &ins...};
  const rtx::detail::Geometry<N> g = rtx::detail::collapse<N>(ops);
  RTX_CHECK(g.sizes.size() <= static_cast<size_t>(kMaxDims), Error,
            "[cuda] pointwise kernels take at most {} dims that cannot be merged, got {}; call .contiguous() first",
            kMaxDims, g.sizes.size());
  const BasePointers<N> base{{static_cast<char*>(out.data_ptr()), static_cast<char*>(const_cast<void*>(in[I]))...}};
  if (fits_32bit<N>(g, n)) {
    launch_dependent(pointwise_strided_kernel<uint32_t, F, Out, In...>, grid_for(n), kBlockSize, scope,
                     static_cast<uint32_t>(n), f, host, base, make_offset_calculator<N, uint32_t>(g));
  } else {
    launch_dependent(pointwise_strided_kernel<int64_t, F, Out, In...>, grid_for(n), kBlockSize, scope, n, f, host,
                     base, make_offset_calculator<N, int64_t>(g));
  }
}

template <typename Out, typename... In, typename F, typename... Ts>
void pointwise(const Tensor& out, const F& f, const Ts&... ins) {
  static_assert(sizeof...(In) == sizeof...(Ts), "one input type per input tensor");
  if (out.numel() == 0) return;
  pointwise_launch<Out, In...>(out, f, std::index_sequence_for<In...>{}, ins...);
}

}  // namespace rtx::cuda
