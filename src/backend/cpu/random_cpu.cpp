// CPU kernels of the random family. Every element's value comes from its row-major logical index
// through the draws of kernels/common/philox.h, so the results depend on neither the memory layout
// nor the number of threads: each thread starts its range of elements mid-counter if it has to. The
// Philox blocks and draws run as vector code for AVX-512 where the CPU has it, else with FMA
// instructions where it has those; the values are the same bits every way.
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/philox.h"
#include "dispatch/random.h"

namespace rtx::cpu {
namespace {

using rtx::detail::RandomCounters;

// Elements below which splitting across threads costs more than it saves (a Philox block per 2-4 values).
constexpr int64_t kRandomGrain = 8192;

// Walks a tensor's elements in row-major logical order, starting at a given logical index.
class Cursor {
 public:
  Cursor(const Tensor& t, int64_t start) : g_(collapse<1>({&t})), ptr_(static_cast<char*>(t.data_ptr())) {
    const int64_t nd = static_cast<int64_t>(g_.sizes.size());
    idx_.resize(nd);
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx_[d] = start % g_.sizes[d];
      start /= g_.sizes[d];
      ptr_ += idx_[d] * g_.strides[0][d];
    }
  }
  char* get() const { return ptr_; }
  void next() {
    int64_t d = static_cast<int64_t>(idx_.size()) - 1;
    ptr_ += g_.strides[0][d];
    // Carry into outer dims.
    for (; d > 0 && ++idx_[d] == g_.sizes[d]; --d) {
      ptr_ += g_.strides[0][d - 1] - g_.sizes[d] * g_.strides[0][d];
      idx_[d] = 0;
    }
    if (d == 0) ++idx_[0];
  }

 private:
  Geometry<1> g_;
  char* ptr_;
  std::vector<int64_t> idx_;
};

// Counters drawn per batch (the batch's values sit in a stack buffer between drawing and storing).
constexpr int64_t kBatch = 64;

// The values of counters c0 .. c0 + count - 1 of draw's stream at rng, in order, into v.
template <typename Draw>
inline __attribute__((always_inline)) void draw_counters(const Draw& draw, const RandomCounters& rng, int64_t c0,
                                                        int64_t count, typename Draw::value_type* v) {
  for (int64_t c = 0; c < count; ++c)
    draw(philox::block(rng.seed, rng.offset + static_cast<uint64_t>(c0 + c)), v + c * Draw::kPerCounter);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__FMA__)
// The same, compiled for CPUs with FMA instructions: the draws' fma calls become single instructions
// instead of libm calls. Both round once, so the values are identical. (Built for AVX-512, which has
// FMA, the loop also vectorizes over counters; draw_range picks that where vector_isa() allows.)
template <typename Draw>
__attribute__((target("fma"))) void draw_counters_fma(const Draw& draw, const RandomCounters& rng, int64_t c0,
                                                     int64_t count, typename Draw::value_type* v) {
  draw_counters(draw, rng, c0, count, v);
}
bool cpu_has_fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return has;
}
#endif

// Calls emit(i, value) for i in [b, e) in order, value being element i of draw's stream at rng.
template <typename Draw, typename Emit>
void draw_range(const Draw& draw, const RandomCounters& rng, int64_t b, int64_t e, const Emit& emit) {
  constexpr int64_t k = Draw::kPerCounter;
  typename Draw::value_type v[kBatch * k];
  const int64_t c_end = (e + k - 1) / k;
  for (int64_t c0 = b / k; c0 < c_end; c0 += kBatch) {
    const int64_t count = std::min(kBatch, c_end - c0);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__FMA__)
    if (vector_isa() == VectorIsa::kAvx512) run_avx512([&] { draw_counters(draw, rng, c0, count, v); });
    else if (cpu_has_fma()) draw_counters_fma(draw, rng, c0, count, v);
    else draw_counters(draw, rng, c0, count, v);
#else
    draw_counters(draw, rng, c0, count, v);
#endif
    const int64_t first = c0 * k, lo = std::max(b, first), hi = std::min(e, (c0 + count) * k);
    for (int64_t i = lo; i < hi; ++i) emit(i, v[i - first]);
  }
}

// Element i of out (T, any layout) = store(value i of draw's stream, i), in parallel.
template <typename T, typename Draw, typename Store>
void generate(const Tensor& out, const RandomCounters& rng, const Draw& draw, const Store& store) {
  const bool contiguous = out.is_contiguous();
  T* const data = static_cast<T*>(out.data_ptr());
  parallel_for(out.numel(), kRandomGrain, [&](int64_t b, int64_t e) {
    if (contiguous) {
      draw_range(draw, rng, b, e, [&](int64_t i, auto v) { data[i] = store(v, i); });
      return;
    }
    Cursor cursor(out, b);
    draw_range(draw, rng, b, e, [&](int64_t i, auto v) {
      *reinterpret_cast<T*>(cursor.get()) = store(v, i);
      cursor.next();
    });
  });
}

void uniform_cpu(const Tensor& out, const RandomCounters& rng, double from, double to) {
  RTX_DISPATCH_FLOATS(out.dtype(), "uniform_", [&] {
    const philox::UniformDraw<philox::Digits<scalar_t>::value> draw{from, to - from};
    generate<scalar_t>(out, rng, draw, [](double v, int64_t) { return static_cast<scalar_t>(v); });
  });
}

void normal_cpu(const Tensor& out, const RandomCounters& rng, double mean, double std) {
  RTX_DISPATCH_FLOATS(out.dtype(), "normal_", [&] {
    const philox::NormalDraw<philox::Digits<scalar_t>::value> draw{mean, std};
    generate<scalar_t>(out, rng, draw, [](double v, int64_t) { return static_cast<scalar_t>(v); });
  });
}

void randint_cpu(const Tensor& out, const RandomCounters& rng, int64_t low, uint64_t range) {
  RTX_DISPATCH_ALL(out.dtype(), "randint", [&] {
    generate<scalar_t>(out, rng, philox::RandintDraw{low, range},
                       [](int64_t v, int64_t) { return static_cast<scalar_t>(v); });
  });
}

void bernoulli_cpu(const Tensor& out, const RandomCounters& rng, const Tensor& p) {
  const double* probs = p.data_ptr<double>();
  RTX_DISPATCH_ALL(out.dtype(), "bernoulli", [&] {
    generate<scalar_t>(out, rng, philox::BernoulliDraw{},
                       [probs](double u, int64_t i) { return static_cast<scalar_t>(u < probs[i] ? 1 : 0); });
  });
}

void bernoulli_scalar_cpu(const Tensor& out, const RandomCounters& rng, double p) {
  RTX_DISPATCH_ALL(out.dtype(), "bernoulli", [&] {
    generate<scalar_t>(out, rng, philox::BernoulliDraw{},
                       [p](double u, int64_t) { return static_cast<scalar_t>(u < p ? 1 : 0); });
  });
}

// The indices that sort keys ascending, equal keys in index order. The keys are uniformly random, so
// one counting pass on their top bits leaves a few keys per bucket, each bucket then sorted by
// (key, index); any distribution of keys still gives the exact stable order, only slower.
std::vector<int64_t> stable_argsort(const std::vector<uint64_t>& keys) {
  const int64_t n = static_cast<int64_t>(keys.size());
  int bits = 1;
  while (bits < 20 && (int64_t{4} << bits) < n) ++bits;
  const int shift = 64 - bits;
  const int64_t n_buckets = int64_t{1} << bits;
  std::vector<int64_t> start(static_cast<size_t>(n_buckets) + 1);
  for (uint64_t k : keys) ++start[(k >> shift) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<std::pair<uint64_t, int64_t>> sorted(static_cast<size_t>(n));
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) sorted[next[keys[i] >> shift]++] = {keys[i], i};
  std::vector<int64_t> order(static_cast<size_t>(n));
  const int64_t grain = std::max<int64_t>(1, kRandomGrain * n_buckets / std::max<int64_t>(n, 1));
  parallel_for(n_buckets, grain, [&](int64_t b, int64_t e) {
    for (int64_t bucket = b; bucket < e; ++bucket)
      std::sort(sorted.begin() + start[bucket], sorted.begin() + start[bucket + 1]);
    for (int64_t i = start[b]; i < start[e]; ++i) order[i] = sorted[i].second;
  });
  return order;
}

void randperm_cpu(const Tensor& out, const RandomCounters& rng) {
  const int64_t n = out.numel();
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  parallel_for(n, kRandomGrain, [&](int64_t b, int64_t e) {
    draw_range(philox::KeyDraw{}, rng, b, e, [&](int64_t i, uint64_t k) { keys[i] = k; });
  });
  const std::vector<int64_t> order = stable_argsort(keys);
  RTX_DISPATCH_NUMERIC(out.dtype(), "randperm", [&] {
    scalar_t* o = static_cast<scalar_t*>(out.data_ptr());
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = static_cast<scalar_t>(order[i]);
    });
  });
}

// num_samples categories of one row by inverse CDF; sample s uses the uniform of logical index first + s.
void sample_with_replacement(const double* w, int64_t cats, int64_t* out, int64_t num_samples,
                             const RandomCounters& rng, int64_t first) {
  std::vector<double> cumulative(static_cast<size_t>(cats));
  double total = 0.0;
  int64_t last_positive = 0;
  for (int64_t c = 0; c < cats; ++c) {
    total += w[c];
    cumulative[c] = total;
    if (w[c] > 0.0) last_positive = c;
  }
  parallel_for(num_samples, kRandomGrain, [&](int64_t b, int64_t e) {
    draw_range(philox::UniformDraw<53>{0.0, 1.0}, rng, first + b, first + e, [&](int64_t i, double u) {
      const int64_t c = std::upper_bound(cumulative.begin(), cumulative.end(), u * total) - cumulative.begin();
      out[i - first] = c < cats ? c : last_positive;
    });
  });
}

// num_samples distinct categories of one row: the largest keys log(u) / w (an exponential race);
// category c uses the uniform of logical index first + c.
void sample_without_replacement(const double* w, int64_t cats, int64_t* out, int64_t num_samples,
                                const RandomCounters& rng, int64_t first) {
  std::vector<double> keys(static_cast<size_t>(cats));
  parallel_for(cats, kRandomGrain, [&](int64_t b, int64_t e) {
    draw_range(philox::LogUniformDraw{}, rng, first + b, first + e, [&](int64_t i, double log_u) {
      const double wc = w[i - first];
      // Zero weights rank below every positive one, even one whose key underflows to -inf.
      keys[i - first] = wc > 0.0 ? std::max(log_u / wc, std::numeric_limits<double>::lowest())
                                 : -std::numeric_limits<double>::infinity();
    });
  });
  std::vector<int64_t> order(static_cast<size_t>(cats));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::partial_sort(order.begin(), order.begin() + num_samples, order.end(), [&](int64_t a, int64_t b) {
    return keys[a] > keys[b] || (keys[a] == keys[b] && a < b);
  });
  std::copy(order.begin(), order.begin() + num_samples, out);
}

void multinomial_cpu(const Tensor& out, const RandomCounters& rng, const Tensor& weights, bool replacement) {
  const int64_t rows = weights.size(0), cats = weights.size(1), num_samples = out.size(1);
  const double* w = weights.data_ptr<double>();
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t per_row = replacement ? num_samples : cats;
  // Rows in parallel; a single row parallelizes inside instead (parallel_for nests serially).
  parallel_for(rows, std::max<int64_t>(1, kRandomGrain / (cats + num_samples)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      if (replacement) sample_with_replacement(w + r * cats, cats, o + r * num_samples, num_samples, rng, r * per_row);
      else sample_without_replacement(w + r * cats, cats, o + r * num_samples, num_samples, rng, r * per_row);
    }
  });
}

}  // namespace

RTX_REGISTER_KERNELS(random_cpu) { RTX_RANDOM_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
