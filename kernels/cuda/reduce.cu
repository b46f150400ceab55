// CUDA kernels of the reduction family: sum, mean, prod, amax/amin, any/all, logsumexp, norm, var
// and argmax/argmin, each the one launcher of reduce.cuh running an accumulator policy of
// kernels/common/reduce_ops.h (shared with the CPU kernels, and where the accumulation types are
// chosen), and the cumsum scan.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kernels/common/reduce_ops.h"
#include "kernels/cuda/reduce.cuh"
#include "dispatch/reduce.h"

namespace rtx::cuda {
namespace {

template <typename T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

using namespace reduce_ops;

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
  RTX_DISPATCH_REDUCE(x.dtype(), "sum", [&] { reduce<scalar_t>(out, x, reduce_ops::SumOp<scalar_t>{data_of<sum_out_t<scalar_t>>(out)}); });
}

void mean_cuda(const Tensor& out, const Tensor& x) {
  const int64_t count = x.numel() / out.numel();
  RTX_DISPATCH_FLOATS(x.dtype(), "mean", [&] {
    using Op = reduce_ops::SumOp<scalar_t, scalar_t, true>;
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

void norm_cuda(const Tensor& out, const Tensor& x, double p) {
  RTX_DISPATCH_FLOATS(x.dtype(), "norm", [&] {
    with_norm_op(data_of<scalar_t>(out), p, [&](const auto& op) { reduce<scalar_t>(out, x, op); });
  });
}

void var_cuda(const Tensor& out, const Tensor& x, int64_t correction, bool take_sqrt) {
  const double divisor = variance_divisor(x.numel() / out.numel(), correction);
  RTX_DISPATCH_FLOATS(x.dtype(), "var", [&] {
    using Op = VarOp<scalar_t>;
    reduce<scalar_t>(out, x, Op{data_of<scalar_t>(out), static_cast<typename Op::V>(divisor), take_sqrt});
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
    reduce<T>(totals, whole_chunks, reduce_ops::SumOp<T, A>{data_of<A>(totals)});
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

RTX_REGISTER_KERNELS(reduce_cuda) { RTX_REDUCE_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
