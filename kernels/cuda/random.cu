// CUDA kernels of the random family. Each thread draws one Philox counter of kernels/common/philox.h
// and stores its values at their row-major logical indices, so every element gets exactly the CPU's
// value (the draws use only IEEE-exact operations and explicit fmas). randperm sorts the Philox keys
// with the stable device radix sort. multinomial with replacement sums each row's weights left to
// right in one thread per row (the CPU's order, so the same rounding), then searches that cumulative
// sum in parallel per sample; without replacement it ranks each row's exponential-race keys with
// the CUDA topk, which breaks ties to the lower category as the CPU does. Kernels captured into a CUDA
// graph read their seed and a counter shift from the graph's cell, which each replay writes.
#include <limits>

#include "backend/cuda/capture.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/philox.h"
#include "kernels/cuda/sort.cuh"
#include "dispatch/sort.h"
#include "dispatch/random.h"

namespace rtx::cuda {
namespace {

using rtx::detail::RandomCounters;

// The counters a kernel draws with: (seed, offset), or under a graph's replay (cell[0], offset + cell[1]).
struct Counters {
  uint64_t seed, offset;
  const uint64_t* cell;
};

// The Counters of the counters reserved at rng for a kernel queued on `stream` by `op`: the replay
// cell is used only by kernels being captured, which must draw from a generator the graph follows.
Counters counters_for(const RandomCounters& rng, cudaStream_t stream, const char* op) {
  if (!detail::any_capture_active() || !detail::stream_capturing(stream)) return {rng.seed, rng.offset, nullptr};
  RTX_CHECK(rng.replay_cell != nullptr, GraphCaptureError,
            "[{}] a random op inside a CUDA graph capture draws from a generator the graph does not follow (one "
            "made current with a GeneratorGuard, or passed as generator=): captured random ops draw from the "
            "default generator",
            op);
  return {rng.seed, rng.offset, rng.replay_cell};
}

// The values of one counter (c) of draw's stream at rng.
template <typename Draw>
__device__ __forceinline__ void draw_counter(const Draw& draw, const Counters& rng, int64_t c,
                                             typename Draw::value_type (&v)[Draw::kPerCounter]) {
  uint64_t seed = rng.seed, offset = rng.offset;
  if (rng.cell != nullptr) {
    seed = rng.cell[0];
    offset += rng.cell[1];
  }
  draw(philox::block(seed, offset + static_cast<uint64_t>(c)), v);
}

// Element i of out = store(value i of draw's stream, i); one thread per counter. Contiguous outputs
// store the counter's values as one vector when it is aligned.
template <typename T, typename Draw, typename Store, typename index_t, bool kContiguous>
__global__ void generate_kernel(int64_t n, Counters rng, Draw draw, Store store, char* out,
                                OffsetCalculator<1, index_t> calc) {
  constexpr int k = Draw::kPerCounter;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = c * k;
  if (first >= n) return;
  typename Draw::value_type v[k];
  draw_counter(draw, rng, c, v);
  if constexpr (kContiguous) {
    T* o = reinterpret_cast<T*>(out);
    if (first + k <= n) {
      Packed<T, k> p;
#pragma unroll
      for (int j = 0; j < k; ++j) p.v[j] = store(v[j], first + j);
      reinterpret_cast<Packed<T, k>*>(o)[c] = p;
    } else {
      for (int j = 0; first + j < n; ++j) o[first + j] = store(v[j], first + j);
    }
  } else {
#pragma unroll
    for (int j = 0; j < k; ++j) {
      if (first + j >= n) break;
      index_t off[1];
      calc.offsets(static_cast<index_t>(first + j), off);
      *reinterpret_cast<T*>(out + off[0]) = store(v[j], first + j);
    }
  }
}

// Launches generate_kernel for out (T, any layout) with the counters reserved at rng.
template <typename T, typename Draw, typename Store>
void generate(const Tensor& out, const RandomCounters& reserved, const Draw& draw, const Store& store,
              const char* op) {
  const int64_t n = out.numel();
  if (n == 0) return;
  detail::KernelScope scope(out.device());
  const Counters rng = counters_for(reserved, scope.stream(), op);
  constexpr int k = Draw::kPerCounter;
  const unsigned grid = grid_for((n + k - 1) / k);
  char* data = static_cast<char*>(out.data_ptr());
  if (out.is_contiguous() && reinterpret_cast<uintptr_t>(data) % sizeof(Packed<T, k>) == 0) {
    generate_kernel<T, Draw, Store, uint32_t, true>
        <<<grid, kBlockSize, 0, scope.stream()>>>(n, rng, draw, store, data, {});
    RTX_CUDA_CHECK_LAUNCH();
    return;
  }
  const rtx::detail::Geometry<1> g = rtx::detail::collapse<1>({&out});
  RTX_CHECK(g.sizes.size() <= static_cast<size_t>(kMaxDims), Error,
            "[cuda] random kernels take at most {} dims that cannot be merged, got {}", kMaxDims, g.sizes.size());
  if (fits_32bit<1>(g, n)) {
    generate_kernel<T, Draw, Store, uint32_t, false><<<grid, kBlockSize, 0, scope.stream()>>>(
        n, rng, draw, store, data, make_offset_calculator<1, uint32_t>(g));
  } else {
    generate_kernel<T, Draw, Store, int64_t, false><<<grid, kBlockSize, 0, scope.stream()>>>(
        n, rng, draw, store, data, make_offset_calculator<1, int64_t>(g));
  }
  RTX_CUDA_CHECK_LAUNCH();
}

// The drawn value converted to T (through float for the 16-bit floats, as on the CPU).
template <typename T>
struct Convert {
  template <typename V>
  __device__ T operator()(V v, int64_t) const {
    return static_cast<T>(v);
  }
};

// 1 where the uniform u of element i is below the probability of element i.
template <typename T>
struct BernoulliStore {
  const double* probs;
  __device__ T operator()(double u, int64_t i) const { return static_cast<T>(u < probs[i] ? 1 : 0); }
};

template <typename T>
struct BernoulliScalarStore {
  double p;
  __device__ T operator()(double u, int64_t) const { return static_cast<T>(u < p ? 1 : 0); }
};

void uniform_cuda(const Tensor& out, const RandomCounters& rng, double from, double to) {
  RTX_DISPATCH_FLOATS(out.dtype(), "uniform_", [&] {
    const philox::UniformDraw<philox::Digits<scalar_t>::value> draw{from, to - from};
    generate<scalar_t>(out, rng, draw, Convert<scalar_t>{}, "uniform_");
  });
}

void normal_cuda(const Tensor& out, const RandomCounters& rng, double mean, double std) {
  RTX_DISPATCH_FLOATS(out.dtype(), "normal_", [&] {
    const philox::NormalDraw<philox::Digits<scalar_t>::value> draw{mean, std};
    generate<scalar_t>(out, rng, draw, Convert<scalar_t>{}, "normal_");
  });
}

void randint_cuda(const Tensor& out, const RandomCounters& rng, int64_t low, uint64_t range) {
  RTX_DISPATCH_ALL(out.dtype(), "randint", [&] {
    generate<scalar_t>(out, rng, philox::RandintDraw{low, range}, Convert<scalar_t>{}, "randint");
  });
}

void bernoulli_cuda(const Tensor& out, const RandomCounters& rng, const Tensor& p) {
  const double* probs = p.data_ptr<double>();
  RTX_DISPATCH_ALL(out.dtype(), "bernoulli", [&] {
    generate<scalar_t>(out, rng, philox::BernoulliDraw{}, BernoulliStore<scalar_t>{probs}, "bernoulli");
  });
}

void bernoulli_scalar_cuda(const Tensor& out, const RandomCounters& rng, double p) {
  RTX_DISPATCH_ALL(out.dtype(), "bernoulli", [&] {
    generate<scalar_t>(out, rng, philox::BernoulliDraw{}, BernoulliScalarStore<scalar_t>{p}, "bernoulli");
  });
}

// ---- randperm ---------------------------------------------------------------------------------------

// keys[i] = Philox key i, positions[i] = i.
template <typename V>
__global__ void randperm_keys_kernel(int64_t n, Counters rng, uint64_t* keys, V* positions) {
  constexpr int k = philox::KeyDraw::kPerCounter;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c * k >= n) return;
  uint64_t v[k];
  draw_counter(philox::KeyDraw{}, rng, c, v);
  for (int j = 0; j < k && c * k + j < n; ++j) {
    keys[c * k + j] = v[j];
    positions[c * k + j] = static_cast<V>(c * k + j);
  }
}

template <typename T, typename V>
__global__ void cast_kernel(int64_t n, const V* in, T* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<T>(static_cast<int64_t>(in[i]));
}

template <typename V>
void randperm_impl(const Tensor& out, const Counters& rng, cudaStream_t stream) {
  const int64_t n = out.numel();
  const Device device = out.device();
  const Tensor k0 = scratch<uint64_t>(n, device), k1 = scratch<uint64_t>(n, device);
  const Tensor v0 = scratch<V>(n, device), v1 = scratch<V>(n, device);
  SortBuffers<uint64_t> keys{static_cast<uint64_t*>(k0.data_ptr()), static_cast<uint64_t*>(k1.data_ptr())};
  SortBuffers<V> order{static_cast<V*>(v0.data_ptr()), static_cast<V*>(v1.data_ptr())};
  randperm_keys_kernel<V><<<grid_for((n + 1) / 2), kBlockSize, 0, stream>>>(n, rng, keys.current, order.current);
  RTX_CUDA_CHECK_LAUNCH();
  radix_sort_pairs(keys, order, n, 64, device, stream);
  RTX_DISPATCH_NUMERIC(out.dtype(), "randperm", [&] {
    cast_kernel<scalar_t, V><<<grid_for(n), kBlockSize, 0, stream>>>(n, order.current,
                                                                     static_cast<scalar_t*>(out.data_ptr()));
  });
  RTX_CUDA_CHECK_LAUNCH();
}

void randperm_cuda(const Tensor& out, const RandomCounters& rng) {
  if (out.numel() == 0) return;
  detail::KernelScope scope(out.device());
  const Counters counters = counters_for(rng, scope.stream(), "randperm");
  if (out.numel() <= (int64_t{1} << 32)) randperm_impl<uint32_t>(out, counters, scope.stream());
  else randperm_impl<uint64_t>(out, counters, scope.stream());
}

// ---- multinomial ------------------------------------------------------------------------------------

// Per row (one thread each): the cumulative weights, summed left to right in double as on the CPU,
// and the last category of positive weight.
__global__ void cumulative_kernel(int64_t rows, int64_t cats, const double* w, double* cumulative,
                                  int64_t* last_positive) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const double* wr = w + r * cats;
  double* cr = cumulative + r * cats;
  double total = 0.0;
  int64_t last = 0;
  for (int64_t c = 0; c < cats; ++c) {
    const double x = wr[c];
    total = __dadd_rn(total, x);
    cr[c] = total;
    if (x > 0.0) last = c;
  }
  last_positive[r] = last;
}

// Sample i (row i / num_samples): the first category whose cumulative weight exceeds u * total (an
// upper bound search), else the row's last positive category.
__global__ void sample_kernel(int64_t n, int64_t cats, int64_t num_samples, Counters rng,
                              const double* cumulative, const int64_t* last_positive, int64_t* out) {
  const philox::UniformDraw<53> draw{0.0, 1.0};
  constexpr int k = philox::UniformDraw<53>::kPerCounter;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c * k >= n) return;
  double u[k];
  draw_counter(draw, rng, c, u);
  for (int j = 0; j < k && c * k + j < n; ++j) {
    const int64_t i = c * k + j, row = i / num_samples;
    const double* cr = cumulative + row * cats;
    const double target = __dmul_rn(u[j], cr[cats - 1]);
    int64_t lo = 0, hi = cats;  // the first category in [lo, hi) with cumulative > target
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (cr[mid] > target) hi = mid;
      else lo = mid + 1;
    }
    out[i] = lo < cats ? lo : last_positive[row];
  }
}

// Key of category i: log(u) / w, at least -DBL_MAX, and -inf for a zero weight.
__global__ void race_keys_kernel(int64_t n, Counters rng, const double* w, double* keys) {
  constexpr int k = philox::LogUniformDraw::kPerCounter;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c * k >= n) return;
  double log_u[k];
  draw_counter(philox::LogUniformDraw{}, rng, c, log_u);
  for (int j = 0; j < k && c * k + j < n; ++j) {
    const int64_t i = c * k + j;
    const double wi = w[i];
    keys[i] = wi > 0.0 ? ::fmax(log_u[j] / wi, -std::numeric_limits<double>::max())
                       : -std::numeric_limits<double>::infinity();
  }
}

void multinomial_cuda(const Tensor& out, const RandomCounters& reserved, const Tensor& weights,
                      bool replacement) {
  const int64_t rows = weights.size(0), cats = weights.size(1), num_samples = out.size(1);
  const Device device = out.device();
  detail::KernelScope scope(device);
  const Counters rng = counters_for(reserved, scope.stream(), "multinomial");
  const double* w = weights.data_ptr<double>();
  if (replacement) {
    const Tensor cumulative = rtx::detail::make_tensor({rows, cats}, kFloat64, device);
    const Tensor last_positive = rtx::detail::make_tensor({rows}, kInt64, device);
    cumulative_kernel<<<grid_for(rows), kBlockSize, 0, scope.stream()>>>(
        rows, cats, w, cumulative.data_ptr<double>(), last_positive.data_ptr<int64_t>());
    RTX_CUDA_CHECK_LAUNCH();
    const int64_t n = rows * num_samples;
    sample_kernel<<<grid_for((n + 1) / 2), kBlockSize, 0, scope.stream()>>>(
        n, cats, num_samples, rng, cumulative.data_ptr<double>(), last_positive.data_ptr<int64_t>(),
        out.data_ptr<int64_t>());
    RTX_CUDA_CHECK_LAUNCH();
    return;
  }
  const Tensor keys = rtx::detail::make_tensor({rows, cats}, kFloat64, device);
  const int64_t n = rows * cats;
  race_keys_kernel<<<grid_for((n + 1) / 2), kBlockSize, 0, scope.stream()>>>(n, rng, w, keys.data_ptr<double>());
  RTX_CUDA_CHECK_LAUNCH();
  const Tensor top_keys = rtx::detail::make_tensor({rows, num_samples}, kFloat64, device);
  kernels::topk_kernel.get(device)(top_keys, out, keys, 1, num_samples, true, true);
}

__global__ void write_cell_kernel(uint64_t* cell, uint64_t seed, uint64_t shift) {
  cell[0] = seed;
  cell[1] = shift;
}

}  // namespace

void detail::write_replay_cell(uint64_t* cell, uint64_t seed, uint64_t shift, cudaStream_t stream) {
  write_cell_kernel<<<1, 1, 0, stream>>>(cell, seed, shift);
  RTX_CUDA_CHECK_LAUNCH();
}

RTX_REGISTER_KERNELS(random_cuda) { RTX_RANDOM_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
