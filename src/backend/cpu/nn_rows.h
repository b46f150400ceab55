// Helpers the CPU kernels of the nn, norm and loss families share: work grains, fixed-block
// reductions (the same result for any number of threads), unit-stride dispatch, lane sums in double,
// one-pass shifted moments and the max / log-sum-exp of a slice.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/parallel.h"
#include "kernels/common/opmath.h"
#include "kernels/common/pointwise_functors.h"
#include "rtx/tensor.h"

namespace rtx::cpu::rows {

using detail::opmath_t;
using Unit = std::integral_constant<int64_t, 1>;

// Items per parallel task so that one task does about kGrainSize elements of work.
inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work_per_item));
}

// f(begin, end) over fixed blocks of [0, n), combined in block order (the same result for any
// number of threads).
template <typename T, typename F, typename Combine>
T blocked_reduce(int64_t n, int64_t block, T init, const F& f, const Combine& combine) {
  const int64_t blocks = (n + block - 1) / block;
  std::vector<T> partial(static_cast<size_t>(blocks), init);
  parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) partial[i] = f(i * block, std::min(n, (i + 1) * block));
  });
  T r = init;
  for (const T& p : partial) r = combine(r, p);
  return r;
}

// Calls f(stride) with a compile-time 1 when stride is 1, so that unit-stride loops vectorize.
template <typename F>
void with_stride(int64_t stride, const F& f) {
  if (stride == 1)
    f(Unit{});
  else
    f(stride);
}

// Sums of f(k) = (a, b) over k in [0, n) in double, kept in kLanes partial sums per quantity: one
// running sum would make the loop wait on each add, independent lanes let it vectorize. Lanes combine
// in a fixed order, so results depend only on the data.
class PairSums {
 public:
  template <typename F>
  void add(int64_t n, const F& f) {
    int64_t k = 0;
    for (; k + kLanes <= n; k += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) {
        const auto [va, vb] = f(k + l);
        a_[l] += va;
        b_[l] += vb;
      }
    }
    for (int64_t l = 0; k < n; ++k, ++l) {
      const auto [va, vb] = f(k);
      a_[l] += va;
      b_[l] += vb;
    }
  }
  double a() const { return total(a_); }
  double b() const { return total(b_); }

 private:
  static constexpr int64_t kLanes = 16;
  static double total(const std::array<double, kLanes>& v) {
    double t = 0;
    for (double x : v) t += x;
    return t;
  }
  std::array<double, kLanes> a_{}, b_{};
};

// The mean and biased variance of value(k) over k in [0, n) in one pass: sums of d = value - shift and
// d^2 with the first value as the shift, which keeps (sum d)^2 / n from cancelling against sum d^2
// when the mean is large against the spread. Runs add value(k) for k in [0, len) of each run.
struct Moments {
  double mean, var;
};
template <typename Runs>
Moments shifted_moments_of_runs(int64_t count, double shift, const Runs& runs) {
  PairSums sums;
  runs([&](int64_t len, const auto& value) {
    sums.add(len, [&](int64_t k) {
      const double d = value(k) - shift;
      return std::pair<double, double>{d, d * d};
    });
  });
  const double n = static_cast<double>(count), s1 = sums.a();
  return {shift + s1 / n, std::max(0.0, (sums.b() - s1 * s1 / n) / n)};
}
template <typename F>
Moments shifted_moments(int64_t n, const F& value) {
  return shifted_moments_of_runs(n, n > 0 ? value(0) : 0.0, [&](const auto& run) { run(n, value); });
}

// The sum of f(k) over k in [0, n) in double, in kLanes partial sums combined in a fixed order (see
// PairSums): the loop vectorizes, and the result depends only on the data.
template <typename F>
double lane_sum(int64_t n, const F& f) {
  constexpr int64_t kLanes = 16;
  std::array<double, kLanes> lanes{};
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += f(k + l);
  for (int64_t l = 0; k < n; ++k, ++l) lanes[l] += f(k);
  double total = 0;
  for (double v : lanes) total += v;
  return total;
}

// A float's key among int32s that orders like the floats (-0 just below +0, a NaN with the sign bit
// clear above +infinity, one with it set below -infinity), and back: the integers' max vectorizes
// where the floats' does not.
inline int32_t float_order_key(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits ^ ((bits >> 31) & 0x7fffffff);
}
inline float float_of_order_key(int32_t key) {
  const int32_t bits = key ^ ((key >> 31) & 0x7fffffff);
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// The largest value of a slice, -infinity for an empty one. A NaN may come out as the max or be
// passed over; either way it reaches the results through the sums of exponentials.
template <typename T, typename S>
opmath_t<T> slice_max(const T* x, int64_t n, S s) {
  using acc_t = opmath_t<T>;
  if constexpr (std::is_same_v<acc_t, float>) {
    int32_t m = float_order_key(-std::numeric_limits<float>::infinity());
    for (int64_t j = 0; j < n; ++j) m = std::max(m, float_order_key(static_cast<float>(x[j * s])));
    return float_of_order_key(m);
  } else {
    acc_t m = -std::numeric_limits<acc_t>::infinity();
    for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<acc_t>(x[j * s]));
    return m;
  }
}

// The max of a slice and log(sum(exp(x - max))): their sum is the slice's log-sum-exp, kept apart so
// that x - logsumexp can be formed as (x - max) - log_sum without cancellation.
template <typename T>
struct MaxLogSum {
  opmath_t<T> max;
  double log_sum;
};
template <typename T, typename S>
MaxLogSum<T> slice_max_logsum(const T* x, int64_t n, S s) {
  using acc_t = opmath_t<T>;
  const acc_t m = slice_max(x, n, s);
  const double sum = lane_sum(n, [&](int64_t j) { return fn::exp_of(static_cast<acc_t>(x[j * s]) - m); });
  return {m, std::log(sum)};
}

// t's data, or null for an undefined (optional) tensor.
template <typename T>
const T* optional_data(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

}  // namespace rtx::cpu::rows
