// Deterministic reductions across threads: butterflies within a warp, then one shared-memory slot
// per warp combined in warp order. The order of every combination is fixed by the launch
// configuration alone, so results are identical run to run (no atomics).
#pragma once

#include <cstring>

#include "kernels/cuda/compat.h"

namespace rtx::cuda {

// Most warps a block of the reductions below may have (blocks of up to 1024 threads).
constexpr int kMaxBlockWarps = 1024 / kWarpSize;

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};

// NaN-ignoring maximum, like std::max(running, x) folded over a slice.
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};

// Two sums reduced together (with SumOp).
template <typename T>
struct SumPair {
  T a, b;
  __device__ __forceinline__ SumPair operator+(const SumPair& o) const { return {a + o.a, b + o.b}; }
};

// Butterfly exchange of any trivially copyable value, 32 bits at a time.
template <typename T>
__device__ __forceinline__ T shfl_xor_value(const T& v, int lane_mask) {
  constexpr int kWords = static_cast<int>((sizeof(T) + sizeof(int) - 1) / sizeof(int));
  int w[kWords] = {};
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < kWords; ++i) w[i] = rtx_shfl_xor(w[i], lane_mask);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}

// Combines v over the `lanes` consecutive threads of each aligned group (lanes a power of two up to
// kWarpSize, every lane of the warp taking part); every thread of the group gets the result.
template <typename T, typename Op>
__device__ __forceinline__ T group_reduce(T v, int lanes, const Op& op) {
  for (int o = lanes >> 1; o > 0; o >>= 1) v = op(v, shfl_xor_value(v, o));
  return v;
}

// Combines v over the threads of the block that share a column, the column of a thread being its
// linear index modulo `cols` (a power of two up to kWarpSize; 1 reduces the whole block). Every
// thread of the block must call it; each gets its column's result. The block's thread count is a
// multiple of kWarpSize; scratch holds the block's thread count / kWarpSize * cols values. Calls may
// follow each other with the same scratch.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, int cols, T* scratch, const Op& op) {
  for (int o = kWarpSize >> 1; o >= cols; o >>= 1) v = op(v, shfl_xor_value(v, o));
  const int tid = static_cast<int>(threadIdx.x + threadIdx.y * blockDim.x);
  const int lane = tid % kWarpSize, warps = static_cast<int>(blockDim.x * blockDim.y) / kWarpSize;
  __syncthreads();  // earlier readers of scratch are done
  if (lane < cols) scratch[(tid / kWarpSize) * cols + lane] = v;
  __syncthreads();
  const int col = tid % cols;
  T r = scratch[col];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w * cols + col]);
  return r;
}

// Combines v over the `lanes` threads that share a row: a group within a warp (lanes <= kWarpSize)
// or the whole block (lanes == the block's thread count). scratch holds kMaxBlockWarps values.
template <typename T, typename Op>
__device__ __forceinline__ T row_reduce(T v, int lanes, T* scratch, const Op& op) {
  return lanes <= kWarpSize ? group_reduce(v, lanes, op) : block_reduce(v, 1, scratch, op);
}

}  // namespace rtx::cuda
