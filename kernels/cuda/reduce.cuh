// The CUDA reduction launcher, shared by every reduction (the policies are kernels/common/reduce_ops.h):
//   cuda::reduce<in_t>(out, x, op)
// reduces x (any layout) over the dims where out, viewed with x's rank, has size 1. op is an
// accumulator policy: acc_t, init(), combine(acc, value, index) for one element (the value in
// opmath_t<in_t>, index its position in the reduced range), merge(acc, acc) for two partial results,
// and write(offset, acc), which projects a result onto the output(s) at an element offset.
// The launcher drops size-1 dims, orders the rest by x's strides and merges neighbours that are
// contiguous with each other, then
//  - row reduce, when x's innermost dim is reduced: a group of lanes (a few, a warp or a whole block)
//    per output strides along the runs of that dim with 128-bit loads (the unaligned head and the
//    tail element by element), and merges its partials with warp shuffles, then shared memory;
//  - column reduce, when x's innermost dim is kept: each thread owns a vector of neighbouring outputs
//    and loops over the reduced positions (coalesced 128-bit loads across the warp); the threads of a
//    block that share outputs split the reduced range and merge through shared memory.
// When the outputs are too few to fill the GPU, the reduced range is cut into chunks: a first pass
// writes one partial per (output, chunk) into a temporary tensor and a second pass merges each
// output's partials. The order of every merge is fixed by the launch configuration (no atomics), so
// results are the same run to run.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda/runtime.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "kernels/common/opmath.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/check.h"
#include "kernels/cuda/pointwise.cuh"
#include "rtx/cuda.h"
#include "rtx/tensor.h"

namespace rtx::cuda {

constexpr int kReduceBlock = 256;     // threads of a block, except a single long row's group
constexpr int kMaxGroupLanes = 512;   // the most lanes that share one output of a row reduce
// Vector loads in flight per thread in the hot loops: fewer for the 8-wide vectors of 1- and 2-byte
// types (each already 8 elements to combine).
template <int Vec>
constexpr int kReduceUnroll = Vec >= 8 ? 2 : 4;
constexpr int kThreadsPerSM = 2048;   // resident threads per multiprocessor the launcher aims to fill

// ---- device helpers --------------------------------------------------------------------------------

// Merges a over `width` neighbouring lanes (a power of two up to the warp size); every lane gets the result.
template <typename Op, typename A>
__device__ __forceinline__ A warp_merge(const Op& op, A a, int width) {
  return group_reduce(a, width, [&](const A& x, const A& y) { return op.merge(x, y); });
}

// Merges a over the blockDim.x lanes of each group (threadIdx.y names the group; blockDim.x is a power
// of two). The result is valid in lane 0. smem holds blockDim.x * blockDim.y / kWarpSize values.
template <typename Op, typename A>
__device__ __forceinline__ A group_merge(const Op& op, A a, A* smem) {
  const int width = static_cast<int>(blockDim.x);
  a = warp_merge(op, a, (width < kWarpSize ? width : kWarpSize));
  if (width <= kWarpSize) return a;
  const int warps = width / kWarpSize, warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  A* mine = smem + threadIdx.y * warps;
  if (lane == 0) mine[warp] = a;
  __syncthreads();
  if (warp == 0) a = warp_merge(op, lane < warps ? mine[lane] : op.init(), kWarpSize);
  return a;
}

// ---- geometry --------------------------------------------------------------------------------------

// One (possibly merged) dim: its size and its strides in elements of x and of out.
struct ReduceDim {
  int64_t size;
  int64_t x_stride;
  int64_t out_stride;
};

inline int64_t dims_count(const std::vector<ReduceDim>& dims) {
  int64_t n = 1;
  for (const ReduceDim& d : dims) n *= d.size;
  return n;
}

// Element offsets of N operands (x, then out) from a row-major index over a few dims. Indices below
// 2^31 divide by multiply-shift; the outermost dim needs no division.
template <int N>
struct IndexMap {
  int dims = 0;          // innermost first
  bool div32 = true;
  int64_t sizes[kMaxDims] = {};
  IntDivider dividers[kMaxDims] = {};
  int64_t strides[kMaxDims][N] = {};

  // dims outer to inner; operand 0 takes x strides, operand 1 out strides.
  explicit IndexMap(const std::vector<ReduceDim>& list = {}) {
    RTX_CHECK(list.size() <= static_cast<size_t>(kMaxDims), Error,
              "[cuda] reductions take at most {} dims that cannot be merged, got {}; call .contiguous() first",
              kMaxDims, list.size());
    dims = static_cast<int>(list.size());
    div32 = dims_count(list) < (int64_t{1} << 31);
    for (int d = 0; d < dims; ++d) {
      const ReduceDim& src = list[list.size() - 1 - static_cast<size_t>(d)];
      sizes[d] = src.size;
      if (div32) dividers[d] = IntDivider(static_cast<uint32_t>(src.size));
      strides[d][0] = src.x_stride;
      if constexpr (N > 1) strides[d][1] = src.out_stride;
    }
  }

  __device__ __forceinline__ void offsets(int64_t linear, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < dims; ++d) {
      int64_t r = linear;
      if (d + 1 < dims) {
        const int64_t q = div32 ? static_cast<int64_t>(dividers[d].div(static_cast<uint32_t>(linear))) : linear / sizes[d];
        r = linear - q * sizes[d];
        linear = q;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
    }
  }
  __device__ __forceinline__ int64_t offset(int64_t linear) const {
    int64_t off[N];
    offsets(linear, off);
    return off[0];
  }
};

// x's dims split into kept and reduced ones, each outer to inner in x's memory order.
struct ReducePlan {
  std::vector<ReduceDim> kept;
  std::vector<ReduceDim> reduced;
  bool inner_reduced = false;  // x's innermost dim is a reduced one
};

// Drops size-1 dims, orders the rest by x's strides (outermost first) and merges neighbours of the
// same kind that are contiguous with each other (in x, and in out for kept dims).
inline ReducePlan plan_reduction(const Tensor& out, const Tensor& x) {
  struct Item {
    ReduceDim dim;
    bool reduced;
  };
  std::vector<Item> items;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1) items.push_back({{x.size(d), x.stride(d), out.stride(d)}, out.size(d) == 1});
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.dim.x_stride > b.dim.x_stride; });
  ReducePlan plan;
  for (const Item& it : items) {
    auto& list = it.reduced ? plan.reduced : plan.kept;
    const bool adjacent = !list.empty() && plan.inner_reduced == it.reduced;
    if (adjacent) {
      ReduceDim& last = list.back();
      if (last.x_stride == it.dim.x_stride * it.dim.size && (it.reduced || last.out_stride == it.dim.out_stride * it.dim.size)) {
        last = {last.size * it.dim.size, it.dim.x_stride, it.dim.out_stride};
        continue;
      }
    }
    list.push_back(it.dim);
    plan.inner_reduced = it.reduced;
  }
  if (items.empty()) {  // a single element: a row of one
    plan.reduced.push_back({1, 0, 0});
    plan.inner_reduced = true;
  }
  return plan;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t pow2_ceil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// Multiprocessors of a device (cached: the property query is slow).
inline int multiprocessor_count(int device) {
  constexpr int kCached = 64;
  static std::atomic<int> cache[kCached];
  if (device < 0 || device >= kCached) return get_device_properties(device).multiprocessor_count;
  int n = cache[device].load(std::memory_order_relaxed);
  if (n == 0) {
    n = get_device_properties(device).multiprocessor_count;
    cache[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

// ---- row reduce ------------------------------------------------------------------------------------

// Each output reduces `runs` runs of `inner` elements (stride inner_stride); run r starts at the
// output's offset plus outer.offset(r). Chunks of `chunk` positions of the runs * inner range go to
// gridDim.y blocks each.
struct RowArgs {
  int64_t num_out;
  int64_t inner;
  int64_t inner_stride;
  int64_t runs;
  int64_t chunk;
  IndexMap<2> kept;   // output index -> x offset, out offset
  IndexMap<1> outer;  // run index -> x offset
};

// One element into acc: an input value, or (merging partials) another accumulator.
template <bool kPartials, typename Op, typename In>
__device__ __forceinline__ typename Op::acc_t take(const Op& op, typename Op::acc_t a, const In& v, int64_t index) {
  if constexpr (kPartials) return op.merge(a, v);
  else return op.combine(a, static_cast<rtx::detail::opmath_t<In>>(v), index);
}

// Independent accumulators per lane of a row reduce (vector element j goes to j % kRowAccs).
template <int Vec>
constexpr int kRowAccs = Vec > 4 ? 4 : Vec;

// The lanes of a group combine the n elements p[0], p[stride], ... (positions index0...) into acc:
// acc[j % kRowAccs] takes vector element j, acc[0] also the unaligned head and the tail, so each
// accumulator sees increasing positions.
template <int Vec, bool kPartials, typename Op, typename In>
__device__ __forceinline__ void combine_run(const Op& op, typename Op::acc_t (&acc)[kRowAccs<Vec>], const In* __restrict__ p,
                                            int64_t n, int64_t stride, int64_t index0, int lane, int width) {
  if constexpr (Vec > 1) {
    if (stride == 1) {
      const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) / sizeof(In) % Vec);
      const int64_t head = std::min<int64_t>(n, (Vec - misaligned) % Vec);
      for (int64_t t = lane; t < head; t += width) acc[0] = take<kPartials>(op, acc[0], p[t], index0 + t);
      const int64_t vectors = (n - head) / Vec;
      const auto* v = reinterpret_cast<const Packed<In, Vec>*>(p + head);
      const int64_t v_index0 = index0 + head;
      int64_t k = lane;
      for (; k + (kReduceUnroll<Vec> - 1) * width < vectors; k += kReduceUnroll<Vec> * width) {
        Packed<In, Vec> buf[kReduceUnroll<Vec>];
#pragma unroll
        for (int u = 0; u < kReduceUnroll<Vec>; ++u) buf[u] = v[k + u * width];
#pragma unroll
        for (int u = 0; u < kReduceUnroll<Vec>; ++u)
#pragma unroll
          for (int j = 0; j < Vec; ++j) {
            auto& a = acc[j % kRowAccs<Vec>];
            a = take<kPartials>(op, a, buf[u].v[j], v_index0 + (k + u * width) * Vec + j);
          }
      }
      for (; k < vectors; k += width) {
        const Packed<In, Vec> buf = v[k];
#pragma unroll
        for (int j = 0; j < Vec; ++j) {
          auto& a = acc[j % kRowAccs<Vec>];
          a = take<kPartials>(op, a, buf.v[j], v_index0 + k * Vec + j);
        }
      }
      for (int64_t t = head + vectors * Vec + lane; t < n; t += width) acc[0] = take<kPartials>(op, acc[0], p[t], index0 + t);
      return;
    }
  }
  int64_t k = lane;
  for (; k + (kReduceUnroll<Vec> - 1) * width < n; k += kReduceUnroll<Vec> * width) {
    In buf[kReduceUnroll<Vec>];
#pragma unroll
    for (int u = 0; u < kReduceUnroll<Vec>; ++u) buf[u] = p[(k + u * width) * stride];
#pragma unroll
    for (int u = 0; u < kReduceUnroll<Vec>; ++u) acc[0] = take<kPartials>(op, acc[0], buf[u], index0 + k + u * width);
  }
  for (; k < n; k += width) acc[0] = take<kPartials>(op, acc[0], p[k * stride], index0 + k);
}

// blockDim.x lanes per output, blockDim.y outputs per block, chunk blockIdx.y of gridDim.y. With
// several chunks it writes partials[output * gridDim.y + chunk]; else op.write. kPartials: x holds
// each output's gridDim.y-long row of partials (inner = that length) instead of input elements.
template <int Vec, bool kPartials, typename In, typename Op>
__global__ void __launch_bounds__(kMaxGroupLanes)
    row_reduce_kernel(RowArgs g, Op op, const In* __restrict__ x, typename Op::acc_t* __restrict__ partials) {
  using A = typename Op::acc_t;
  __shared__ A smem[kMaxGroupLanes / kWarpSize];
  const int lane = static_cast<int>(threadIdx.x), width = static_cast<int>(blockDim.x);
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const int64_t chunk = blockIdx.y;
  const bool active = o < g.num_out;
  A acc[kRowAccs<Vec>];
#pragma unroll
  for (int j = 0; j < kRowAccs<Vec>; ++j) acc[j] = op.init();
  int64_t off[2] = {0, 0};
  if (active) {
    g.kept.offsets(o, off);
    const In* row = x + (kPartials ? o * g.inner : off[0]);
    const int64_t begin = chunk * g.chunk, end = std::min(begin + g.chunk, g.runs * g.inner);
    for (int64_t pos = begin; pos < end;) {
      const int64_t r = g.runs == 1 ? 0 : pos / g.inner;
      const int64_t i0 = pos - r * g.inner;
      const int64_t n = std::min(g.inner - i0, end - pos);
      const In* p = row + (g.runs == 1 ? 0 : g.outer.offset(r)) + i0 * g.inner_stride;
      combine_run<Vec, kPartials>(op, acc, p, n, g.inner_stride, pos, lane, width);
      pos += n;
    }
  }
  A a = acc[0];
#pragma unroll
  for (int j = 1; j < kRowAccs<Vec>; ++j) a = op.merge(a, acc[j]);
  a = group_merge(op, a, smem);
  if (active && lane == 0) {
    if (gridDim.y > 1) partials[o * gridDim.y + chunk] = a;
    else op.write(off[1], a);
  }
}

// Loads of `vec` elements each lane of a row reduce makes at least (many loads per lane and fewer
// lanes per output keep more bytes in flight than wide groups that mostly merge).
constexpr int64_t kLoadsPerLane = 32;

// Lanes per output for runs of `inner` elements loaded `vec` at a time.
inline int group_lanes(int64_t inner, int vec) {
  return static_cast<int>(std::clamp<int64_t>(pow2_ceil(ceil_div(inner, kLoadsPerLane * vec)), 1, kMaxGroupLanes));
}

// Launches a row reduce of g over `splits` chunks (g.chunk already set).
template <int Vec, bool kPartials, typename In, typename Op>
void launch_rows(const RowArgs& g, const Op& op, const In* x, typename Op::acc_t* partials, int lanes, int64_t splits,
                 cudaStream_t stream) {
  const int per_block = lanes >= kReduceBlock ? 1 : kReduceBlock / lanes;
  const dim3 grid(static_cast<unsigned>(ceil_div(g.num_out, per_block)), static_cast<unsigned>(splits));
  row_reduce_kernel<Vec, kPartials, In, Op><<<grid, dim3(lanes, per_block), 0, stream>>>(g, op, x, partials);
  RTX_CUDA_CHECK_LAUNCH();
}

// Second pass: each output merges its `splits` partials (in chunk order) and writes the result.
template <typename Op>
void merge_partials(const Op& op, const typename Op::acc_t* partials, int64_t num_out, int64_t splits,
                    const IndexMap<2>& kept, cudaStream_t stream) {
  RowArgs g{num_out, splits, 1, 1, splits, kept, IndexMap<1>()};
  launch_rows<1, true>(g, op, partials, nullptr, group_lanes(splits, 1), 1, stream);
}

// ---- column reduce ---------------------------------------------------------------------------------

// Outputs are (outer index, v) with v < width along x's innermost (kept) dim; each reduces `reduced`
// positions whose x offsets come from `red`. Chunks of `chunk` positions go to gridDim.y blocks.
struct ColumnArgs {
  int64_t width;
  int64_t x_stride;    // of the innermost dim
  int64_t out_stride;  // of the innermost dim
  int64_t tiles;       // blocks along the innermost dim
  int64_t reduced;
  int64_t chunk;
  bool vectorized;     // every thread's Vec elements form one aligned vector
  IndexMap<2> outer;   // outer index -> x offset, out offset
  IndexMap<1> red;     // reduced position -> x offset
};

// Vec elements from p at stride (the first `count` valid), as one vector load when `whole`.
template <int Vec, typename In>
__device__ __forceinline__ Packed<In, Vec> load_columns(const In* __restrict__ p, int64_t stride, int count, bool whole) {
  if (whole) return *reinterpret_cast<const Packed<In, Vec>*>(p);
  Packed<In, Vec> r;
#pragma unroll
  for (int j = 0; j < Vec; ++j) r.v[j] = j < count ? p[j * stride] : In();
  return r;
}

// Thread (x, y) owns outputs v0 .. v0 + Vec - 1 and reduced positions y, y + blockDim.y, ... of its
// chunk; the blockDim.y threads of a column then merge in shared memory (a fixed tree).
template <int Vec, typename In, typename Op>
__global__ void __launch_bounds__(kReduceBlock)
    column_reduce_kernel(ColumnArgs g, Op op, const In* __restrict__ x, typename Op::acc_t* __restrict__ partials) {
  using A = typename Op::acc_t;
  __shared__ A smem[kReduceBlock * Vec];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int bx = static_cast<int>(blockDim.x), by = static_cast<int>(blockDim.y);
  const int64_t outer = blockIdx.x / g.tiles;
  const int64_t v0 = ((blockIdx.x - outer * g.tiles) * bx + tx) * Vec;
  const int64_t chunk = blockIdx.y;
  const int count = v0 < g.width ? static_cast<int>(std::min<int64_t>(Vec, g.width - v0)) : 0;
  A acc[Vec];
#pragma unroll
  for (int j = 0; j < Vec; ++j) acc[j] = op.init();
  int64_t off[2] = {0, 0};
  if (count > 0) {
    g.outer.offsets(outer, off);
    const In* base = x + off[0] + v0 * g.x_stride;
    const bool whole = g.vectorized && count == Vec;
    const int64_t end = std::min(g.reduced, (chunk + 1) * g.chunk);
    int64_t r = chunk * g.chunk + ty;
    for (; r + (kReduceUnroll<Vec> - 1) * by < end; r += kReduceUnroll<Vec> * by) {
      Packed<In, Vec> buf[kReduceUnroll<Vec>];
#pragma unroll
      for (int u = 0; u < kReduceUnroll<Vec>; ++u) buf[u] = load_columns<Vec>(base + g.red.offset(r + u * by), g.x_stride, count, whole);
#pragma unroll
      for (int u = 0; u < kReduceUnroll<Vec>; ++u)
#pragma unroll
        for (int j = 0; j < Vec; ++j) acc[j] = take<false>(op, acc[j], buf[u].v[j], r + u * by);
    }
    for (; r < end; r += by) {
      const Packed<In, Vec> buf = load_columns<Vec>(base + g.red.offset(r), g.x_stride, count, whole);
#pragma unroll
      for (int j = 0; j < Vec; ++j) acc[j] = take<false>(op, acc[j], buf.v[j], r);
    }
  }
  if (by > 1) {
    A* mine = smem + (ty * bx + tx) * Vec;
#pragma unroll
    for (int j = 0; j < Vec; ++j) mine[j] = acc[j];
    __syncthreads();
    for (int s = by / 2; s > 0; s /= 2) {
      if (ty < s) {
#pragma unroll
        for (int j = 0; j < Vec; ++j) mine[j] = op.merge(mine[j], mine[s * bx * Vec + j]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < Vec; ++j) acc[j] = smem[tx * Vec + j];
  }
  if (ty == 0) {
#pragma unroll
    for (int j = 0; j < Vec; ++j) {  // unrolled with a guard: acc stays in registers
      if (j >= count) continue;
      if (gridDim.y > 1) partials[((outer * g.width) + v0 + j) * gridDim.y + chunk] = acc[j];
      else op.write(off[1] + (v0 + j) * g.out_stride, acc[j]);
    }
  }
}

// ---- the launcher ----------------------------------------------------------------------------------

// out = op's reduction of x over the dims where out has size 1 (out has x's rank; neither is empty).
template <typename In, typename Op>
void reduce(const Tensor& out, const Tensor& x, const Op& op) {
  using A = typename Op::acc_t;
  constexpr int kVec = vector_width<In>();
  const ReducePlan plan = plan_reduction(out, x);
  detail::KernelScope scope(x.device());
  const int64_t target = int64_t{multiprocessor_count(x.device().index)} * kThreadsPerSM;
  const In* data = static_cast<const In*>(x.data_ptr());
  const int64_t num_out = dims_count(plan.kept);
  const IndexMap<2> kept(plan.kept);
  // Chunks per output: enough threads for the GPU, but at least min_work positions per thread.
  auto split_count = [&](int64_t threads, int64_t positions, int64_t min_work) {
    if (threads >= target) return int64_t{1};
    return std::clamp<int64_t>(std::min(ceil_div(target, threads), positions / min_work), 1, 65535);
  };
  Tensor partial_storage;
  auto partials_for = [&](int64_t splits) -> A* {
    if (splits == 1) return nullptr;
    partial_storage = rtx::detail::make_tensor({num_out * splits * static_cast<int64_t>(sizeof(A))}, kUInt8, x.device());
    return static_cast<A*>(partial_storage.data_ptr());
  };
  int64_t splits = 1;
  A* partials = nullptr;
  if (plan.inner_reduced) {
    const ReduceDim inner = plan.reduced.back();
    const std::vector<ReduceDim> outer_reduced(plan.reduced.begin(), plan.reduced.end() - 1);
    RowArgs g{num_out, inner.size, inner.x_stride, dims_count(outer_reduced), 0, kept, IndexMap<1>(outer_reduced)};
    const int vec = inner.x_stride == 1 ? kVec : 1;
    const int lanes = group_lanes(inner.size, vec);
    const int64_t positions = g.runs * g.inner;
    splits = split_count(num_out * lanes, positions, int64_t{lanes} * vec * kReduceUnroll<kVec>);
    g.chunk = ceil_div(positions, splits);
    splits = ceil_div(positions, g.chunk);
    partials = partials_for(splits);
    launch_rows<kVec, false>(g, op, data, partials, lanes, splits, scope.stream());
  } else {
    const ReduceDim inner = plan.kept.back();
    const std::vector<ReduceDim> outer_kept(plan.kept.begin(), plan.kept.end() - 1);
    ColumnArgs g{inner.size, inner.x_stride, inner.out_stride, 0, dims_count(plan.reduced), 0, false,
                 IndexMap<2>(outer_kept), IndexMap<1>(plan.reduced)};
    g.vectorized = inner.x_stride == 1 && reinterpret_cast<uintptr_t>(data) % (sizeof(In) * kVec) == 0;
    for (const auto* list : {&outer_kept, &plan.reduced})
      for (const ReduceDim& d : *list) g.vectorized = g.vectorized && d.x_stride % kVec == 0;
    const int bx = static_cast<int>(std::min<int64_t>(kWarpSize, pow2_ceil(ceil_div(g.width, kVec))));
    const int by = static_cast<int>(std::min<int64_t>(kReduceBlock / bx, pow2_ceil(g.reduced)));
    g.tiles = ceil_div(g.width, int64_t{bx} * kVec);
    const int64_t blocks = dims_count(outer_kept) * g.tiles;
    RTX_CHECK(blocks < (int64_t{1} << 31), Error, "[cuda] reduction with {} outputs is too large", num_out);
    splits = split_count(blocks * bx * by, g.reduced, int64_t{by} * kReduceUnroll<kVec> * 4);
    g.chunk = ceil_div(g.reduced, splits);
    splits = ceil_div(g.reduced, g.chunk);
    partials = partials_for(splits);
    column_reduce_kernel<kVec, In, Op><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(splits)), dim3(bx, by),
                                         0, scope.stream()>>>(g, op, data, partials);
    RTX_CUDA_CHECK_LAUNCH();
  }
  if (splits > 1) merge_partials(op, partials, num_out, splits, kept, scope.stream());
}

}  // namespace rtx::cuda
