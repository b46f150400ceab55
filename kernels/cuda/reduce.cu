// CUDA kernels of the reduction family: the accumulator policies of sum, mean, prod, amax/amin,
// any/all, logsumexp, norm, var and argmax/argmin, each run by the one launcher of reduce.cuh, and
// the cumsum scan. Floats accumulate in opmath_t (float for float32 and the 16-bit types, double for
// float64), integers and bool in int64 with wrap-around; NaN propagation, tie-breaking and output
// dtypes are those of the CPU kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cuda/register.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/reduce.cuh"
#include "ops/reduce_kernels.h"

namespace rtx::cuda {
namespace {

template <typename T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// ---- element types --------------------------------------------------------------------------------

// What combine sees: float for the 16-bit floats, the element type otherwise.
template <typename T>
using value_t = rtx::detail::opmath_t<T>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<value_t<T>>;
// Sums, products and prefix sums of floats accumulate in value_t, of integers and bool in int64.
template <typename T>
using sum_acc_t = std::conditional_t<kIsFloat<T>, value_t<T>, int64_t>;
// sum/prod/cumsum results: the input's type for floats, int64 for integers and bool.
template <typename T>
using sum_out_t = std::conditional_t<kIsFloat<T>, T, int64_t>;

// Integer arithmetic wraps around (like PyTorch) instead of overflowing.
template <typename A>
__device__ __forceinline__ A add(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <typename A>
__device__ __forceinline__ A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// The identity of max (kMax) or min over V.
template <typename V, bool kMax>
__device__ __forceinline__ V extreme_identity() {
  if constexpr (std::is_floating_point_v<V>) return kMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  else return kMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
}

// ---- accumulator policies ---------------------------------------------------------------------------
// Each has acc_t, init(), combine(acc, value, index), merge(acc, acc) and write(out offset, acc); see
// reduce.cuh.

// Sum, and mean (kMean) dividing by count; Out is the result type.
template <typename T, typename Out = sum_out_t<T>, bool kMean = false>
struct SumMeanOp {
  using acc_t = sum_acc_t<T>;
  Out* out;
  acc_t count = 1;
  __device__ acc_t init() const { return acc_t(0); }
  __device__ acc_t combine(acc_t a, value_t<T> v, int64_t) const { return add(a, static_cast<acc_t>(v)); }
  __device__ acc_t merge(acc_t a, acc_t b) const { return add(a, b); }
  __device__ void write(int64_t i, acc_t a) const {
    if constexpr (kMean) out[i] = static_cast<Out>(a / count);
    else out[i] = static_cast<Out>(a);
  }
};

template <typename T>
struct ProdOp {
  using acc_t = sum_acc_t<T>;
  sum_out_t<T>* out;
  __device__ acc_t init() const { return acc_t(1); }
  __device__ acc_t combine(acc_t a, value_t<T> v, int64_t) const { return mul(a, static_cast<acc_t>(v)); }
  __device__ acc_t merge(acc_t a, acc_t b) const { return mul(a, b); }
  __device__ void write(int64_t i, acc_t a) const { out[i] = static_cast<sum_out_t<T>>(a); }
};

// amax (kMax) / amin; a NaN wins.
template <typename T, bool kMax>
struct ExtremeOp {
  using acc_t = value_t<T>;
  T* out;
  __device__ acc_t init() const { return extreme_identity<acc_t, kMax>(); }
  __device__ acc_t combine(acc_t a, acc_t v, int64_t) const { return ((kMax ? v > a : v < a) || fn::is_nan(v)) ? v : a; }
  __device__ acc_t merge(acc_t a, acc_t b) const { return combine(a, b, 0); }
  __device__ void write(int64_t i, acc_t a) const { out[i] = static_cast<T>(a); }
};

// all (kAll) / any: whether every / some element is nonzero (NaN is nonzero).
template <typename T, bool kAll>
struct LogicalOp {
  using acc_t = bool;
  bool* out;
  __device__ acc_t init() const { return kAll; }
  __device__ acc_t combine(acc_t a, value_t<T> v, int64_t) const { return kAll ? (a && v != value_t<T>(0)) : (a || v != value_t<T>(0)); }
  __device__ acc_t merge(acc_t a, acc_t b) const { return kAll ? (a && b) : (a || b); }
  __device__ void write(int64_t i, acc_t a) const { out[i] = a; }
};

enum class NormKind { Two, Inf, NegInf, Other };

// p-norm; Other takes p = 0 (count of nonzeros), 1 and any other finite p at run time.
template <typename T, NormKind K>
struct NormOp {
  using acc_t = value_t<T>;
  T* out;
  acc_t p;
  __device__ acc_t init() const { return K == NormKind::NegInf ? std::numeric_limits<acc_t>::infinity() : acc_t(0); }
  __device__ acc_t combine(acc_t a, acc_t v, int64_t) const {
    const acc_t m = std::fabs(v);
    if constexpr (K == NormKind::Two) return a + m * m;
    else if constexpr (K == NormKind::Other) return a + (p == acc_t(0) ? acc_t(v != acc_t(0)) : p == acc_t(1) ? m : std::pow(m, p));
    else return merge(a, m);
  }
  __device__ acc_t merge(acc_t a, acc_t b) const {
    if constexpr (K == NormKind::Inf) return (b > a || b != b) ? b : a;
    else if constexpr (K == NormKind::NegInf) return (b < a || b != b) ? b : a;
    else return a + b;
  }
  __device__ void write(int64_t i, acc_t a) const {
    if constexpr (K == NormKind::Two) a = std::sqrt(a);
    else if constexpr (K == NormKind::Other) a = p == acc_t(0) || p == acc_t(1) ? a : std::pow(a, acc_t(1) / p);
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
  using V = value_t<T>;
  using acc_t = Moments<V>;
  T* out;
  V divisor;
  bool take_sqrt;
  __device__ acc_t init() const { return {V(0), V(0), V(0)}; }
  __device__ acc_t combine(acc_t a, V x, int64_t) const {
    const V n = a.n + V(1), d = x - a.mean, mean = a.mean + d / n;
    return {n, mean, a.m2 + d * (x - mean)};
  }
  __device__ acc_t merge(acc_t a, acc_t b) const {
    if (a.n == V(0)) return b;
    if (b.n == V(0)) return a;
    const V n = a.n + b.n, d = b.mean - a.mean;
    return {n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)};
  }
  __device__ void write(int64_t i, acc_t a) const {
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
  using V = value_t<T>;
  using acc_t = ExpSum<V>;
  T* out;
  __device__ acc_t init() const { return {-std::numeric_limits<V>::infinity(), V(0)}; }
  __device__ acc_t combine(acc_t a, V x, int64_t) const {
    if (x > a.max) return {x, a.sum * std::exp(a.max - x) + V(1)};
    return {a.max, a.sum + (x == a.max ? V(1) : std::exp(x - a.max))};  // a NaN x makes the sum NaN
  }
  __device__ acc_t merge(acc_t a, acc_t b) const {
    if (b.sum == V(0)) return a;
    if (a.sum == V(0)) return b;
    if (a.max == b.max) return {a.max, a.sum + b.sum};
    if (a.max > b.max) return {a.max, a.sum + b.sum * std::exp(b.max - a.max)};
    return {b.max, b.sum + a.sum * std::exp(a.max - b.max)};
  }
  __device__ void write(int64_t i, acc_t a) const { out[i] = static_cast<T>(a.max + std::log(a.sum)); }
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
  using V = value_t<T>;
  using acc_t = ValueIndex<V>;
  T* values;
  int64_t* indices;
  __device__ static bool better(V a, V b) { return kMax ? a > b : a < b; }
  __device__ acc_t init() const { return {extreme_identity<V, kMax>(), -1}; }
  __device__ acc_t combine(acc_t a, V v, int64_t i) const {
    return (a.index < 0 || better(v, a.value) || (fn::is_nan(v) && !fn::is_nan(a.value))) ? acc_t{v, i} : a;
  }
  __device__ acc_t merge(acc_t a, acc_t b) const {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    const bool a_nan = fn::is_nan(a.value), b_nan = fn::is_nan(b.value);
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && better(b.value, a.value)) return b;
    if (!a_nan && better(a.value, b.value)) return a;
    return a.index <= b.index ? a : b;
  }
  __device__ void write(int64_t i, acc_t a) const {
    values[i] = static_cast<T>(a.value);
    indices[i] = a.index;
  }
};

// ---- kernels --------------------------------------------------------------------------------------

// Every dtype, with bool read as uint8: its bytes are 0 or 1, so every reduction and the scan agree,
// and each op has one instantiation fewer.
#define RTX_DISPATCH_REDUCE(dtype, op, ...)     \
  switch (dtype) {                               \
    RTX_DISPATCH_FLOATS_CASES(__VA_ARGS__)       \
    RTX_DISPATCH_INTS_CASES(__VA_ARGS__)         \
    RTX_DTYPE_CASE(Bool, uint8_t, __VA_ARGS__)   \
    RTX_DTYPE_DEFAULT(dtype, op);                \
  }

void sum_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "sum", [&] { reduce<scalar_t>(out, x, SumMeanOp<scalar_t>{data_of<sum_out_t<scalar_t>>(out)}); });
}

void mean_cuda(const Tensor& out, const Tensor& x) {
  const int64_t count = x.numel() / out.numel();
  RTX_DISPATCH_FLOATS(x.dtype(), "mean", [&] {
    using Op = SumMeanOp<scalar_t, scalar_t, true>;
    reduce<scalar_t>(out, x, Op{data_of<scalar_t>(out), static_cast<typename Op::acc_t>(count)});
  });
}

void prod_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "prod", [&] { reduce<scalar_t>(out, x, ProdOp<scalar_t>{data_of<sum_out_t<scalar_t>>(out)}); });
}

void amax_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "amax", [&] { reduce<scalar_t>(out, x, ExtremeOp<scalar_t, true>{data_of<scalar_t>(out)}); });
}

void amin_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "amin", [&] { reduce<scalar_t>(out, x, ExtremeOp<scalar_t, false>{data_of<scalar_t>(out)}); });
}

void any_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "any", [&] { reduce<scalar_t>(out, x, LogicalOp<scalar_t, false>{data_of<bool>(out)}); });
}

void all_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "all", [&] { reduce<scalar_t>(out, x, LogicalOp<scalar_t, true>{data_of<bool>(out)}); });
}

void logsumexp_cuda(const Tensor& out, const Tensor& x) {
  RTX_DISPATCH_FLOATS(x.dtype(), "logsumexp", [&] { reduce<scalar_t>(out, x, LogSumExpOp<scalar_t>{data_of<scalar_t>(out)}); });
}

template <typename T>
void norm_typed(const Tensor& out, const Tensor& x, double p) {
  T* o = data_of<T>(out);
  const auto pv = static_cast<value_t<T>>(p);
  if (p == 2.0) reduce<T>(out, x, NormOp<T, NormKind::Two>{o, pv});
  else if (std::isinf(p) && p > 0) reduce<T>(out, x, NormOp<T, NormKind::Inf>{o, pv});
  else if (std::isinf(p)) reduce<T>(out, x, NormOp<T, NormKind::NegInf>{o, pv});
  else reduce<T>(out, x, NormOp<T, NormKind::Other>{o, pv});
}

void norm_cuda(const Tensor& out, const Tensor& x, double p) {
  RTX_DISPATCH_FLOATS(x.dtype(), "norm", [&] { norm_typed<scalar_t>(out, x, p); });
}

void var_cuda(const Tensor& out, const Tensor& x, int64_t correction, bool take_sqrt) {
  const double divisor = std::max(0.0, static_cast<double>(x.numel() / out.numel() - correction));
  RTX_DISPATCH_FLOATS(x.dtype(), "var", [&] {
    reduce<scalar_t>(out, x, VarOp<scalar_t>{data_of<scalar_t>(out), static_cast<value_t<scalar_t>>(divisor), take_sqrt});
  });
}

void argmax_cuda(const Tensor& values, const Tensor& indices, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "argmax", [&] {
    reduce<scalar_t>(values, x, ArgOp<scalar_t, true>{data_of<scalar_t>(values), data_of<int64_t>(indices)});
  });
}

void argmin_cuda(const Tensor& values, const Tensor& indices, const Tensor& x) {
  RTX_DISPATCH_REDUCE(x.dtype(), "argmin", [&] {
    reduce<scalar_t>(values, x, ArgOp<scalar_t, false>{data_of<scalar_t>(values), data_of<int64_t>(indices)});
  });
}

// ---- cumsum -----------------------------------------------------------------------------------------
// x (contiguous) is viewed as [outer, len, inner] and scanned along len, in chunks of `chunk`
// positions when the lines are too few to fill the GPU: the totals of every chunk but the last are
// reduced and scanned first (a small scan of the same kind), and each chunk starts from its carry.

constexpr int kScanItems = 4;  // consecutive elements per lane of a row scan tile

struct ScanArgs {
  int64_t outer;
  int64_t len;
  int64_t inner;
  int64_t chunk;
  int64_t chunks;
  int64_t tiles;  // tiles of blockDim.x * kScanItems elements per chunk (row scan)
};

// Exclusive prefix and total of x over the blockDim.x lanes of each group (threadIdx.y), in a fixed
// order: a butterfly within warps, then the warp totals in order. warp_totals holds blockDim.x *
// blockDim.y / kWarpSize values.
template <typename A>
__device__ __forceinline__ void group_scan(A x, A& excl, A& total, A* warp_totals) {
  const int width = static_cast<int>(blockDim.x);
  A sum = x;
  excl = A(0);
  for (int m = 1; m < (width < kWarpSize ? width : kWarpSize); m *= 2) {
    const A other = shfl_xor_value(sum, m);
    if (threadIdx.x & m) excl = add(other, excl);
    sum = add(sum, other);
  }
  total = sum;
  if (width <= kWarpSize) return;
  const int warps = width / kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
  A* mine = warp_totals + threadIdx.y * warps;
  if (threadIdx.x % kWarpSize == 0) mine[warp] = sum;
  __syncthreads();
  A before = A(0);
  total = A(0);
  for (int w = 0; w < warps; ++w) {
    if (w == warp) before = total;
    total = add(total, mine[w]);
  }
  excl = add(before, excl);
  __syncthreads();  // every lane has read the totals before the next tile writes them
}

// inner == 1: blockDim.x lanes per (row, chunk), blockDim.y of them per block; each tile gives every
// lane kScanItems consecutive elements.
template <typename T, typename Out>
__global__ void __launch_bounds__(kMaxGroupLanes) scan_rows_kernel(ScanArgs a, const T* __restrict__ x, Out* __restrict__ out,
                                                                   const sum_acc_t<T>* __restrict__ carries) {
  using A = sum_acc_t<T>;
  __shared__ A warp_totals[kMaxGroupLanes / kWarpSize];
  const int64_t width = blockDim.x;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = unit < a.outer * a.chunks;
  const int64_t o = active ? unit / a.chunks : 0, c = active ? unit - o * a.chunks : 0;
  const int64_t begin = c * a.chunk, end = active ? std::min(a.len, begin + a.chunk) : 0;
  A carry = c > 0 ? carries[o * (a.chunks - 1) + c - 1] : A(0);
  const T* src = x + o * a.len;
  Out* dst = out + o * a.len;
  for (int64_t t = 0; t < a.tiles; ++t) {  // the same count for every group: group_scan synchronizes
    const int64_t first = begin + (t * width + threadIdx.x) * kScanItems;
    A local[kScanItems];
    A run = A(0);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      if (first + k < end) run = add(run, static_cast<A>(static_cast<value_t<T>>(src[first + k])));
      local[k] = run;
    }
    A excl, total;
    group_scan(run, excl, total, warp_totals);
    const A prefix = add(carry, excl);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k)
      if (first + k < end) dst[first + k] = static_cast<Out>(add(prefix, local[k]));
    carry = add(carry, total);
  }
}

// inner > 1: one thread per (outer, chunk, inner index) walks its chunk along len.
template <typename T, typename Out>
__global__ void __launch_bounds__(kReduceBlock) scan_columns_kernel(ScanArgs a, const T* __restrict__ x, Out* __restrict__ out,
                                                                    const sum_acc_t<T>* __restrict__ carries) {
  using A = sum_acc_t<T>;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.outer * a.chunks * a.inner) return;
  const int64_t v = t % a.inner, line = t / a.inner, c = line % a.chunks, o = line / a.chunks;
  A acc = c > 0 ? carries[(o * (a.chunks - 1) + c - 1) * a.inner + v] : A(0);
  const int64_t end = std::min(a.len, (c + 1) * a.chunk);
  int64_t i = (o * a.len + c * a.chunk) * a.inner + v;
#pragma unroll 4
  for (int64_t k = c * a.chunk; k < end; ++k, i += a.inner) {
    acc = add(acc, static_cast<A>(static_cast<value_t<T>>(x[i])));
    out[i] = static_cast<Out>(acc);
  }
}

// out = inclusive prefix sums of x (contiguous, [outer, len, inner]) along len.
template <typename T, typename Out>
void scan(const Tensor& out, const Tensor& x, int64_t outer, int64_t len, int64_t inner) {
  using A = sum_acc_t<T>;
  detail::KernelScope scope(x.device());
  const int64_t target = int64_t{multiprocessor_count(x.device().index)} * kThreadsPerSM;
  ScanArgs a{outer, len, inner, len, 1, 1};
  int lanes = 1;
  if (inner == 1) {
    lanes = static_cast<int>(std::clamp<int64_t>(pow2_ceil(ceil_div(len, kScanItems)), 1, kMaxGroupLanes));
    const int64_t tile = int64_t{lanes} * kScanItems;
    if (outer * lanes < target) a.chunks = std::max<int64_t>(1, std::min(ceil_div(target, outer * lanes), len / (4 * tile)));
    a.chunk = ceil_div(ceil_div(len, a.chunks), tile) * tile;
    a.tiles = a.chunk / tile;
  } else {
    if (outer * inner < target) a.chunks = std::max<int64_t>(1, std::min(ceil_div(target, outer * inner), len / 64));
    a.chunk = ceil_div(len, a.chunks);
  }
  a.chunks = ceil_div(len, a.chunk);
  Tensor carries;
  if (a.chunks > 1) {
    const Tensor totals = rtx::detail::make_tensor({outer, a.chunks - 1, 1, inner}, dtype_of_v<A>, x.device());
    const Tensor whole_chunks = rtx::detail::make_view(x, {outer, a.chunks - 1, a.chunk, inner},
                                                       {len * inner, a.chunk * inner, inner, 1}, x.storage_offset());
    reduce<T>(totals, whole_chunks, SumMeanOp<T, A>{data_of<A>(totals)});
    carries = rtx::detail::make_tensor({outer, a.chunks - 1, inner}, dtype_of_v<A>, x.device());
    scan<A, A>(carries, totals, outer, a.chunks - 1, inner);
  }
  const A* carry_data = carries.defined() ? data_of<const A>(carries) : nullptr;
  const T* src = data_of<const T>(x);
  Out* dst = data_of<Out>(out);
  if (inner == 1) {
    const int per_block = lanes >= kReduceBlock ? 1 : kReduceBlock / lanes;
    const auto blocks = static_cast<unsigned>(ceil_div(outer * a.chunks, per_block));
    scan_rows_kernel<T, Out><<<blocks, dim3(lanes, per_block), 0, scope.stream()>>>(a, src, dst, carry_data);
  } else {
    const auto blocks = static_cast<unsigned>(ceil_div(outer * a.chunks * inner, kReduceBlock));
    scan_columns_kernel<T, Out><<<blocks, kReduceBlock, 0, scope.stream()>>>(a, src, dst, carry_data);
  }
  RTX_CUDA_CHECK_LAUNCH();
}

void cumsum_cuda(const Tensor& out, const Tensor& x, int64_t dim) {
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    else if (d == dim) len = x.size(d);
    else inner *= x.size(d);
  }
  RTX_DISPATCH_REDUCE(x.dtype(), "cumsum", [&] { scan<scalar_t, sum_out_t<scalar_t>>(out, x, outer, len, inner); });
}

}  // namespace

void register_reduce_kernels() {
  using namespace kernels;
  sum_kernel.set(kCUDA, sum_cuda);
  mean_kernel.set(kCUDA, mean_cuda);
  prod_kernel.set(kCUDA, prod_cuda);
  amax_kernel.set(kCUDA, amax_cuda);
  amin_kernel.set(kCUDA, amin_cuda);
  any_kernel.set(kCUDA, any_cuda);
  all_kernel.set(kCUDA, all_cuda);
  logsumexp_kernel.set(kCUDA, logsumexp_cuda);
  norm_kernel.set(kCUDA, norm_cuda);
  var_kernel.set(kCUDA, var_cuda);
  argmax_kernel.set(kCUDA, argmax_cuda);
  argmin_kernel.set(kCUDA, argmin_cuda);
  cumsum_kernel.set(kCUDA, cumsum_cuda);
}

}  // namespace rtx::cuda
