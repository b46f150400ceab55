// The accumulator policies of every reduction, written once for the CPU and the GPU launchers
// (src/backend/cpu/reduce_cpu.cpp, kernels/cuda/reduce.cuh). A policy has in_t (the element type),
// acc_t, init(), combine(acc, value, index) for one element (the value in value_t<in_t>, index its
// position in the reduced range), merge(acc, acc) for two partial results, and write(out offset,
// acc), which stores a result.
//
// The accumulation type is chosen here, once:
//  - integers and bool accumulate in int64, wrapping around on overflow as PyTorch does;
//  - floats accumulate in float_acc_t: double in the CPU kernels, whose loops are bound by memory
//    so the wide sums cost nothing (and sums of float32 stay exact to float32 rounding however many
//    elements they take); the element's own compute type on the GPU (float for float32 and the
//    16-bit floats, double for float64), where double arithmetic runs at a fraction of float's rate
//    and the launcher's tree of partial sums keeps the error of float sums small.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/common/opmath.h"
#include "kernels/common/pointwise_functors.h"
#include "rtx/export.h"

namespace rtx::reduce_ops {

#if defined(__CUDACC__) || defined(__HIPCC__)
constexpr bool kWideFloatAccumulation = false;
#else
constexpr bool kWideFloatAccumulation = true;
#endif

// What combine sees: float for the 16-bit floats, the element type otherwise.
template <typename T>
using value_t = detail::opmath_t<T>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<value_t<T>>;
// The type float reductions (sums, products, moments, norms, logsumexp) accumulate in.
template <typename T>
using float_acc_t = std::conditional_t<kWideFloatAccumulation, double, value_t<T>>;
// Sums, products and prefix sums: float_acc_t for floats, int64 for integers and bool.
template <typename T>
using sum_acc_t = std::conditional_t<kIsFloat<T>, float_acc_t<T>, int64_t>;
// sum/prod/cumsum results: the input's type for floats, int64 for integers and bool.
template <typename T>
using sum_out_t = std::conditional_t<kIsFloat<T>, T, int64_t>;

// Integer arithmetic wraps around (like PyTorch) instead of overflowing.
template <typename A>
RTX_INLINE A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <typename A>
RTX_INLINE A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// The identity of max (kMax) or min over V.
template <typename V, bool kMax>
RTX_INLINE V extreme_identity() {
  if constexpr (std::is_floating_point_v<V>) return kMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else return kMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
}

// Sum, and mean (kMean) dividing by count; Out is the result type.
template <typename T, typename Out = sum_out_t<T>, bool kMean = false>
struct SumOp {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  Out* out;
  acc_t count = 1;
  RTX_INLINE acc_t init() const { return acc_t(0); }
  RTX_INLINE acc_t combine(acc_t a, value_t<T> v, int64_t) const { return add(a, static_cast<acc_t>(v)); }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const { return add(a, b); }
  RTX_INLINE void write(int64_t i, acc_t a) const {
    if constexpr (kMean) out[i] = static_cast<Out>(a / count);
    else out[i] = static_cast<Out>(a);
  }
};

template <typename T>
struct ProdOp {
  using in_t = T;
  using acc_t = sum_acc_t<T>;
  sum_out_t<T>* out;
  RTX_INLINE acc_t init() const { return acc_t(1); }
  RTX_INLINE acc_t combine(acc_t a, value_t<T> v, int64_t) const { return mul(a, static_cast<acc_t>(v)); }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const { return mul(a, b); }
  RTX_INLINE void write(int64_t i, acc_t a) const { out[i] = static_cast<sum_out_t<T>>(a); }
};

// amax (kMax) / amin; a NaN wins.
template <typename T, bool kMax>
struct ExtremeOp {
  using in_t = T;
  using acc_t = value_t<T>;
  T* out;
  RTX_INLINE acc_t init() const { return extreme_identity<acc_t, kMax>(); }
  // Bitwise | keeps the select branch-free (vectorizable on the CPU).
  RTX_INLINE acc_t combine(acc_t a, acc_t v, int64_t) const { return ((kMax ? v > a : v < a) | fn::is_nan(v)) ? v : a; }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const { return combine(a, b, 0); }
  RTX_INLINE void write(int64_t i, acc_t a) const { out[i] = static_cast<T>(a); }
};

// all (kAll) / any: whether every / some element is nonzero (NaN is nonzero).
template <typename T, bool kAll>
struct LogicalOp {
  using in_t = T;
  using acc_t = bool;
  bool* out;
  RTX_INLINE acc_t init() const { return kAll; }
  RTX_INLINE acc_t combine(acc_t a, value_t<T> v, int64_t) const {
    return kAll ? (a && v != value_t<T>(0)) : (a || v != value_t<T>(0));
  }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const { return kAll ? (a && b) : (a || b); }
  RTX_INLINE void write(int64_t i, acc_t a) const { out[i] = a; }
};

enum class NormKind { Zero, One, Two, Inf, NegInf, General };

// The p-norm, with the common orders as their own kinds (General takes any other finite p).
template <typename T, NormKind K>
struct NormOp {
  using in_t = T;
  using acc_t = float_acc_t<T>;
  T* out;
  acc_t p;
  RTX_INLINE acc_t init() const { return K == NormKind::NegInf ? std::numeric_limits<acc_t>::infinity() : acc_t(0); }
  RTX_INLINE acc_t combine(acc_t a, value_t<T> v, int64_t) const {
    const acc_t m = std::fabs(static_cast<acc_t>(v));
    if constexpr (K == NormKind::Zero) return a + (m != acc_t(0) ? acc_t(1) : acc_t(0));
    else if constexpr (K == NormKind::One) return a + m;
    else if constexpr (K == NormKind::Two) return a + m * m;
    else if constexpr (K == NormKind::General) return a + std::pow(m, p);
    else return merge(a, m);
  }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const {
    if constexpr (K == NormKind::Inf) return (b > a || b != b) ? b : a;
    else if constexpr (K == NormKind::NegInf) return (b < a || b != b) ? b : a;
    else return a + b;
  }
  RTX_INLINE void write(int64_t i, acc_t a) const {
    if constexpr (K == NormKind::Two) a = std::sqrt(a);
    else if constexpr (K == NormKind::General) a = std::pow(a, acc_t(1) / p);
    out[i] = static_cast<T>(a);
  }
};

// Count, mean and sum of squared deviations (Welford; partials merge with Chan's formula).
template <typename V>
struct Moments {
  V n, mean, m2;
};

// Variance with the given divisor (max(0, count - correction)), or its square root.
template <typename T>
struct VarOp {
  using in_t = T;
  using V = float_acc_t<T>;
  using acc_t = Moments<V>;
  T* out;
  V divisor;
  bool take_sqrt;
  RTX_INLINE acc_t init() const { return {V(0), V(0), V(0)}; }
  RTX_INLINE acc_t combine(acc_t a, value_t<T> v, int64_t) const {
    const V x = static_cast<V>(v), n = a.n + V(1), d = x - a.mean, mean = a.mean + d / n;
    return {n, mean, a.m2 + d * (x - mean)};
  }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const {
    if (a.n == V(0)) return b;
    if (b.n == V(0)) return a;
    const V n = a.n + b.n, d = b.mean - a.mean;
    return {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)};
  }
  RTX_INLINE void write(int64_t i, acc_t a) const {
    const V var = a.m2 / divisor;
    out[i] = static_cast<T>(take_sqrt ? std::sqrt(var) : var);
  }
};

// Running maximum and the sum of exp(x - maximum): one pass, no overflow.
template <typename V>
struct ExpSum {
  V max, sum;
};

template <typename T>
struct LogSumExpOp {
  using in_t = T;
  using V = float_acc_t<T>;
  using acc_t = ExpSum<V>;
  T* out;
  RTX_INLINE acc_t init() const { return {-std::numeric_limits<V>::infinity(), V(0)}; }
  RTX_INLINE acc_t combine(acc_t a, value_t<T> v, int64_t) const {
    const V x = static_cast<V>(v);
    if (x > a.max) return {x, a.sum * std::exp(a.max - x) + V(1)};
    return {a.max, a.sum + (x == a.max ? V(1) : std::exp(x - a.max))};  // a NaN x makes the sum NaN
  }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const {
    if (b.sum == V(0)) return a;
    if (a.sum == V(0)) return b;
    if (a.max == b.max) return {a.max, a.sum + b.sum};
    if (a.max > b.max) return {a.max, a.sum + b.sum * std::exp(b.max - a.max)};
    return {b.max, b.sum + a.sum * std::exp(a.max - b.max)};
  }
  RTX_INLINE void write(int64_t i, acc_t a) const { out[i] = static_cast<T>(a.max + std::log(a.sum)); }
};

template <typename V>
struct ValueIndex {
  V value;
  int64_t index;  // -1: no element yet
};

// argmax (kMax) / argmin with values: the first occurrence on ties, the first NaN when there is one.
// values and indices share their strides.
template <typename T, bool kMax>
struct ArgOp {
  using in_t = T;
  using V = value_t<T>;
  using acc_t = ValueIndex<V>;
  T* values;
  int64_t* indices;
  RTX_INLINE static bool better(V a, V b) { return kMax ? a > b : a < b; }
  RTX_INLINE acc_t init() const { return {extreme_identity<V, kMax>(), -1}; }
  RTX_INLINE acc_t combine(acc_t a, V v, int64_t i) const {
    return (a.index < 0 || better(v, a.value) || (fn::is_nan(v) && !fn::is_nan(a.value))) ? acc_t{v, i} : a;
  }
  RTX_INLINE acc_t merge(acc_t a, acc_t b) const {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    const bool a_nan = fn::is_nan(a.value), b_nan = fn::is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && better(b.value, a.value)) return b;
    if (!a_nan && better(a.value, b.value)) return a;
    return a.index <= b.index ? a : b;
  }
  RTX_INLINE void write(int64_t i, acc_t a) const {
    values[i] = static_cast<T>(a.value);
    indices[i] = a.index;
  }
};

// The reduction of a norm of order p: calls run(op) with the policy of p's kind.
template <typename T, typename Run>
void with_norm_op(T* out, double p, const Run& run) {
  using A = float_acc_t<T>;
  const A pv = static_cast<A>(p);
  if (p == 2.0) run(NormOp<T, NormKind::Two>{out, pv});
  else if (p == 1.0) run(NormOp<T, NormKind::One>{out, pv});
  else if (p == 0.0) run(NormOp<T, NormKind::Zero>{out, pv});
  else if (std::isinf(p) && p > 0) run(NormOp<T, NormKind::Inf>{out, pv});
  else if (std::isinf(p)) run(NormOp<T, NormKind::NegInf>{out, pv});
  else run(NormOp<T, NormKind::General>{out, pv});
}

// The divisor of var/std over count elements with the given correction.
inline double variance_divisor(int64_t count, int64_t correction) {
  const double d = static_cast<double>(count) - static_cast<double>(correction);
  return d > 0 ? d : 0.0;
}

}  // namespace rtx::reduce_ops
