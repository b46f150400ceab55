// CUDA kernels of fused scaled-dot-product attention, forward and backward, flash-attention style:
// the [L, S] score matrix of a head never reaches global memory. Semantics: src/dispatch/attention.h.
//
// Forward: a block owns a tile of query rows of one head and streams the key and value tiles of the
// head through shared memory. Each row keeps an online softmax (running maximum m, running sum l of
// exp(s - m)) and an output accumulator rescaled whenever m grows; at the end out = acc / l and
// lse = m + log(l).
// Backward: Dl_i = dot(g_i, out_i) first (a group of lanes per row), then two kernels that each own
// what they write: a block per key tile loops over the query tiles, recomputing P = exp(s - lse) and
// dS and accumulating dk and dv; a block per query tile loops over the key tiles, accumulating dq.
// With 16-bit types the first kernel also stores dS^T (16-bit, as the products round it anyway) for
// a group of heads at a time, and the dq kernel reads it back: one tile product per block pair
// instead of three. Otherwise (float32 on TF32, or a head whose L x S values exceed the store's
// budget) the dq kernel recomputes P and dS. Every sum runs in a fixed order and nothing is atomic,
// so results are bitwise reproducible.
// Causal attention bounds the tile loops so that tiles entirely above the diagonal are skipped; the
// mask is applied only on tiles that cross the diagonal or the end of the keys.
// Operands are addressed through their head layouts (Heads below): rows and heads may be strided.
//
// Paths, picked by attention_path:
// - tensor cores (Half/BFloat16, and float32 when the float32 matmul precision allows TF32; D up to
//   128 and a multiple of 16 bytes, every row 16-byte aligned, sm_80+): warps of 16 rows running
//   mma.sync (m16n8k16, or TF32 m16n8k8) with float accumulation on fragments read by ldmatrix from
//   padded shared tiles that cp.async fills (zeros past the rows and D); D is padded to 64 or 128.
// - float tiles (float32 otherwise, D up to 128): 256 threads, 64 x 64 score tiles in 4 x 4 register
//   tiles of exact float32 arithmetic, operands in padded shared tiles; D padded to 64 or 128.
// - generic (everything else, and every case under HIP): a warp per row with an online softmax over
//   the keys, D taken in chunks of kGenericSlice values per lane (scores recomputed per chunk).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <utility>

#include <string>

#include <fmt/format.h>

#include "backend/cuda/tuner.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "dispatch/attention.h"
#include "kernels/cuda/rows.cuh"
#include "rtx/settings.h"

namespace rtx::cuda {
namespace {

// q [..., L, d], k and v [..., S, d], bh heads in all.
struct AttentionShape {
  int64_t bh, L, S, d;
  AttentionShape(const Tensor& q, const Tensor& k)
      : bh(rtx::detail::head_count(q)), L(q.size(-2)), S(k.size(-2)), d(q.size(-1)) {}
};

// An operand's data and where its heads and rows lie (see HeadLayout).
template <typename T>
struct Heads {
  T* data;
  rtx::detail::HeadLayout layout;

  __device__ __forceinline__ T* head(int64_t h) const { return data + layout.offset(h); }
  __device__ __forceinline__ T* row(int64_t h, int64_t i) const { return head(h) + i * layout.row; }
  template <typename U = T, std::enable_if_t<!std::is_const_v<U>, int> = 0>
  operator Heads<const U>() const {  // NOLINT: a writable operand may be read
    return {data, layout};
  }
  // Whether every row starts at a 16-byte boundary.
  bool rows_aligned_16() const {
    return reinterpret_cast<uintptr_t>(data) % 16 == 0 && layout.strides_multiple_of(16 / sizeof(T));
  }
};

template <typename T>
Heads<T> heads_of(const Tensor& t) {
  return {static_cast<T*>(t.data_ptr()), rtx::detail::head_layout(t).value()};
}

// ---- generic path: a warp per row ------------------------------------------------------------------

constexpr int kGenericWarps = 4;                            // rows per block
constexpr int kGenericSlice = 4;                            // accumulator values per lane
constexpr int kGenericChunk = kGenericSlice * kWarpSize;    // columns of one pass over the keys

// f(row, lane) for rows [0, rows), a warp per row (the whole warp takes part).
template <typename F>
__device__ __forceinline__ void for_each_warp_row(int64_t rows, const F& f) {
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kGenericWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kGenericWarps + threadIdx.x / kWarpSize; row < rows;
       row += stride)
    f(row, lane);
}

// dot(a[0, d), b[0, d)) over the warp; every lane gets the same value.
template <typename T>
__device__ __forceinline__ opmath_t<T> warp_dot(const T* a, const T* b, int64_t d, int lane) {
  opmath_t<T> s = 0;
  for (int64_t e = lane; e < d; e += kWarpSize) s += static_cast<opmath_t<T>>(a[e]) * static_cast<opmath_t<T>>(b[e]);
  return group_reduce(s, kWarpSize, SumOp{});
}

// out_i and lse_i, a warp per query row.
template <typename T>
__global__ void __launch_bounds__(kGenericWarps* kWarpSize)
    attention_generic_kernel(Heads<T> out, opmath_t<T>* lse, Heads<const T> q, Heads<const T> k, Heads<const T> v,
                             int64_t L, int64_t S, int64_t d, opmath_t<T> scale, bool causal, int64_t rows) {
  using acc_t = opmath_t<T>;
  for_each_warp_row(rows, [&](int64_t row, int lane) {
    const int64_t head = row / L, i = row % L;
    const T* qi = q.row(head, i);
    const T* kh = k.head(head);
    const T* vh = v.head(head);
    const int64_t k_ld = k.layout.row, v_ld = v.layout.row;
    const int64_t keys = causal ? std::min(S, i + 1) : S;
    for (int64_t c0 = 0; c0 < d; c0 += kGenericChunk) {
      acc_t m = neg_inf<T>(), l = 0, acc[kGenericSlice] = {};
      for (int64_t j = 0; j < keys; ++j) {
        const acc_t s = scale * warp_dot(qi, kh + j * k_ld, d, lane);
        const acc_t m_new = s > m ? s : m;
        const acc_t alpha = exp_of<T>(m - m_new), p = exp_of<T>(s - m_new);
        l = l * alpha + p;
#pragma unroll
        for (int e = 0; e < kGenericSlice; ++e) {
          const int64_t c = c0 + e * kWarpSize + lane;
          acc[e] = acc[e] * alpha + (c < d ? p * static_cast<opmath_t<T>>(vh[j * v_ld + c]) : acc_t(0));
        }
        m = m_new;
      }
#pragma unroll
      for (int e = 0; e < kGenericSlice; ++e) {
        const int64_t c = c0 + e * kWarpSize + lane;
        if (c < d) out.row(head, i)[c] = static_cast<T>(acc[e] / l);
      }
      if (c0 == 0 && lane == 0) lse[row] = m + log_of<T>(l);
    }
  });
}

// dl[row] = dot(g[row], out[row]) for the backward's dS = P * (dP - dl): `lanes` threads per row
// (a power of two up to a warp), each reading 16-byte pieces of both rows.
template <typename T>
__global__ void __launch_bounds__(kGroupBlock)
    attention_row_dot_kernel(opmath_t<T>* dl, Heads<const T> g, Heads<const T> out, int64_t L, int64_t d,
                             int64_t rows, int lanes, bool vectorized) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    acc_t s = 0;
    if (row >= 0) {
      const T* a = g.row(row / L, row % L);
      const T* b = out.row(row / L, row % L);
      for (int64_t j = static_cast<int64_t>(lane) * kVec; j < d; j += static_cast<int64_t>(lanes) * kVec) {
        acc_t x[kVec], y[kVec];
        load_piece(a, j, d, vectorized, acc_t(0), x);
        load_piece(b, j, d, vectorized, acc_t(0), y);
#pragma unroll
        for (int e = 0; e < kVec; ++e) s += x[e] * y[e];
      }
    }
    s = group_reduce(s, lanes, SumOp{});
    if (row >= 0 && lane == 0) dl[row] = s;
  });
}

// dq_i = scale * sum_j P_ij (dP_ij - dl_i) k_j, a warp per query row.
template <typename T>
__global__ void __launch_bounds__(kGenericWarps* kWarpSize)
    attention_generic_dq_kernel(Heads<T> dq, Heads<const T> g, Heads<const T> q, Heads<const T> k,
                                Heads<const T> v, const opmath_t<T>* lse, const opmath_t<T>* dl, int64_t L,
                                int64_t S, int64_t d, opmath_t<T> scale, bool causal, int64_t rows) {
  using acc_t = opmath_t<T>;
  for_each_warp_row(rows, [&](int64_t row, int lane) {
    const int64_t head = row / L, i = row % L;
    const T* qi = q.row(head, i);
    const T* gi = g.row(head, i);
    const T* kh = k.head(head);
    const T* vh = v.head(head);
    const int64_t k_ld = k.layout.row, v_ld = v.layout.row;
    const int64_t keys = causal ? std::min(S, i + 1) : S;
    const acc_t lse_i = lse[row], dl_i = dl[row];
    for (int64_t c0 = 0; c0 < d; c0 += kGenericChunk) {
      acc_t acc[kGenericSlice] = {};
      for (int64_t j = 0; j < keys; ++j) {
        const acc_t s = scale * warp_dot(qi, kh + j * k_ld, d, lane);
        const acc_t ds = exp_of<T>(s - lse_i) * (warp_dot(gi, vh + j * v_ld, d, lane) - dl_i);
#pragma unroll
        for (int e = 0; e < kGenericSlice; ++e) {
          const int64_t c = c0 + e * kWarpSize + lane;
          if (c < d) acc[e] += ds * static_cast<opmath_t<T>>(kh[j * k_ld + c]);
        }
      }
#pragma unroll
      for (int e = 0; e < kGenericSlice; ++e) {
        const int64_t c = c0 + e * kWarpSize + lane;
        if (c < d) dq.row(head, i)[c] = static_cast<T>(scale * acc[e]);
      }
    }
  });
}

// dv_j = sum_i P_ij g_i and dk_j = scale * sum_i P_ij (dP_ij - dl_i) q_i, a warp per key row.
template <typename T>
__global__ void __launch_bounds__(kGenericWarps* kWarpSize)
    attention_generic_dkdv_kernel(Heads<T> dk, Heads<T> dv, Heads<const T> g, Heads<const T> q, Heads<const T> k,
                                  Heads<const T> v, const opmath_t<T>* lse, const opmath_t<T>* dl, int64_t L,
                                  int64_t S, int64_t d, opmath_t<T> scale, bool causal, int64_t rows) {
  using acc_t = opmath_t<T>;
  for_each_warp_row(rows, [&](int64_t row, int lane) {
    const int64_t head = row / S, j = row % S;
    const T* kj = k.row(head, j);
    const T* vj = v.row(head, j);
    const int64_t first = causal ? j : 0;
    for (int64_t c0 = 0; c0 < d; c0 += kGenericChunk) {
      acc_t acc_k[kGenericSlice] = {}, acc_v[kGenericSlice] = {};
      for (int64_t i = first; i < L; ++i) {
        const int64_t qrow = head * L + i;
        const T* qi = q.row(head, i);
        const T* gi = g.row(head, i);
        const acc_t p = exp_of<T>(scale * warp_dot(qi, kj, d, lane) - lse[qrow]);
        const acc_t ds = p * (warp_dot(gi, vj, d, lane) - dl[qrow]);
#pragma unroll
        for (int e = 0; e < kGenericSlice; ++e) {
          const int64_t c = c0 + e * kWarpSize + lane;
          if (c < d) {
            acc_v[e] += p * static_cast<opmath_t<T>>(gi[c]);
            acc_k[e] += ds * static_cast<opmath_t<T>>(qi[c]);
          }
        }
      }
#pragma unroll
      for (int e = 0; e < kGenericSlice; ++e) {
        const int64_t c = c0 + e * kWarpSize + lane;
        if (c < d) {
          dv.row(head, j)[c] = static_cast<T>(acc_v[e]);
          dk.row(head, j)[c] = static_cast<T>(scale * acc_k[e]);
        }
      }
    }
  });
}

template <typename T>
void generic_forward(const AttentionShape& sh, Heads<T> out, opmath_t<T>* lse, Heads<const T> q, Heads<const T> k,
                     Heads<const T> v, double scale, bool causal, cudaStream_t stream) {
  const int64_t rows = sh.bh * sh.L;
  attention_generic_kernel<T><<<grid_stride_blocks(rows, kGenericWarps), kGenericWarps * kWarpSize, 0, stream>>>(
      out, lse, q, k, v, sh.L, sh.S, sh.d, static_cast<opmath_t<T>>(scale), causal, rows);
  RTX_CUDA_CHECK_LAUNCH();
}

template <typename T>
void generic_backward(const AttentionShape& sh, Heads<T> dq, Heads<T> dk, Heads<T> dv, Heads<const T> g,
                      Heads<const T> q, Heads<const T> k, Heads<const T> v, const opmath_t<T>* lse,
                      const opmath_t<T>* dl, double scale, bool causal, cudaStream_t stream) {
  const auto s = static_cast<opmath_t<T>>(scale);
  const int64_t q_rows = sh.bh * sh.L, k_rows = sh.bh * sh.S;
  attention_generic_dq_kernel<T><<<grid_stride_blocks(q_rows, kGenericWarps), kGenericWarps * kWarpSize, 0, stream>>>(
      dq, g, q, k, v, lse, dl, sh.L, sh.S, sh.d, s, causal, q_rows);
  RTX_CUDA_CHECK_LAUNCH();
  attention_generic_dkdv_kernel<T>
      <<<grid_stride_blocks(k_rows, kGenericWarps), kGenericWarps * kWarpSize, 0, stream>>>(
          dk, dv, g, q, k, v, lse, dl, sh.L, sh.S, sh.d, s, causal, k_rows);
  RTX_CUDA_CHECK_LAUNCH();
}

#if !defined(__HIP_PLATFORM_AMD__)

constexpr double kLog2e = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;

template <typename F>
void with_causal(bool causal, const F& f) {
  if (causal)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// Dynamic shared memory of the tiled kernels (aligned for 16-byte accesses).
extern __shared__ float4 attention_shared[];

template <typename T>
__device__ __forceinline__ T* shared_as() {
  return reinterpret_cast<T*>(attention_shared);
}

// Lets `kernel` take `bytes` of dynamic shared memory (above the default 48 KiB).
// Calls f(std::integral_constant<int, i>{}) for a run-time i in [0, N).
template <int N, typename F, int... I>
void with_index(int i, const F& f, std::integer_sequence<int, I...>) {
  ((i == I ? f(std::integral_constant<int, I>{}) : void()), ...);
}
template <int N, typename F>
void with_index(int i, const F& f) {
  with_index<N>(i, f, std::make_integer_sequence<int, N>{});
}

// The most shared memory a block of `device` may opt in to.
inline size_t shared_memory_optin(int device) {
  int bytes = 0;
  RTX_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<size_t>(bytes);
}

template <typename Kernel>
void allow_shared_memory(Kernel* kernel, size_t bytes) {
  RTX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// Head sizes of the tiled paths: d is padded (with zeros) to 64 or 128.
template <typename F>
void with_padded_head_dim(int64_t d, const F& f) {
  if (d <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, 128>{});
}

// ---- float tiles: float32, 256 threads, 4 x 4 register tiles ----------------------------------------
//
// Thread (ty, tx) = (threadIdx.x / 16, threadIdx.x % 16) holds rows ty + 16 r (r < 4) of every
// tile product; of a 64-column score tile the columns tx + 16 n, of a D-wide product the columns
// 64 g + 4 tx + e. Shared tiles are row-major with rows padded by 4 floats, which keeps the 16-byte
// reads below free of bank conflicts.

constexpr int kFloatThreads = 256;
constexpr int kFloatTile = 64;                        // rows of every tile (queries or keys)
constexpr int kFloatScoreStride = kFloatTile + 4;     // row stride of a score tile
constexpr int kFloatScoreFloats = kFloatTile * kFloatScoreStride;

template <int kD>
constexpr int kFloatRowStride = kD + 4;
template <int kD>
constexpr int kFloatTileFloats = kFloatTile * kFloatRowStride<kD>;

constexpr size_t float_forward_shared_bytes(int d_pad) {
  return sizeof(float) * (2 * kFloatTile * (d_pad + 4) + kFloatScoreFloats);
}
constexpr size_t float_dkdv_shared_bytes(int d_pad) {
  return sizeof(float) * (4 * kFloatTile * (d_pad + 4) + kFloatScoreFloats + 2 * kFloatTile);
}
constexpr size_t float_dq_shared_bytes(int d_pad) {
  return sizeof(float) * (4 * kFloatTile * (d_pad + 4) + kFloatScoreFloats);
}

__device__ __forceinline__ float component(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Copies rows [row0, row0 + 64) of a [rows, d] matrix with rows ld apart into a tile, zeros past
// `rows` and d. vectorized: d % 4 == 0 and every row 16-byte aligned.
template <int kD>
__device__ __forceinline__ void load_float_tile(float* tile, const float* src, int64_t row0, int64_t rows, int d,
                                                int64_t ld, bool vectorized) {
  constexpr int kQuads = kD / 4;
  for (int idx = threadIdx.x; idx < kFloatTile * kQuads; idx += kFloatThreads) {
    const int r = idx / kQuads, c = (idx % kQuads) * 4;
    const int64_t row = row0 + r;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row < rows) {
      const float* p = src + row * ld + c;
      if (vectorized) {
        if (c < d) x = *reinterpret_cast<const float4*>(p);
      } else {
        x.x = c < d ? p[0] : 0.f;
        x.y = c + 1 < d ? p[1] : 0.f;
        x.z = c + 2 < d ? p[2] : 0.f;
        x.w = c + 3 < d ? p[3] : 0.f;
      }
    }
    *reinterpret_cast<float4*>(tile + r * kFloatRowStride<kD> + c) = x;
  }
}

// Stores a thread's rows of a D-wide product, times `factor`, into rows [row0, row0 + 64) of a
// [rows, d] matrix with rows ld apart (the part inside it).
template <int kD>
__device__ __forceinline__ void store_float_rows(float* dst, const float (&acc)[4][kD / 16], float factor,
                                                 int64_t row0, int64_t rows, int d, int64_t ld, bool vectorized,
                                                 int ty, int tx) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t row = row0 + ty + 16 * r;
    if (row >= rows) continue;
#pragma unroll
    for (int g = 0; g < kD / 64; ++g) {
      const int c = 64 * g + 4 * tx;
      float* p = dst + row * ld + c;
      const float4 x = make_float4(acc[r][4 * g] * factor, acc[r][4 * g + 1] * factor, acc[r][4 * g + 2] * factor,
                                   acc[r][4 * g + 3] * factor);
      if (vectorized) {
        if (c < d) *reinterpret_cast<float4*>(p) = x;
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (c + e < d) p[e] = component(x, e);
      }
    }
  }
}

// c[r][n] += sum_k a[ty + 16 r][k] * b[tx + 16 n][k], k < kK (row strides kSA, kSB).
template <int kK, int kSA, int kSB>
__device__ __forceinline__ void float_product_nt(float (&c)[4][4], const float* a, const float* b, int ty, int tx) {
#pragma unroll 4
  for (int k = 0; k < kK; k += 4) {
    float4 av[4], bv[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) av[r] = *reinterpret_cast<const float4*>(a + (ty + 16 * r) * kSA + k);
#pragma unroll
    for (int n = 0; n < 4; ++n) bv[n] = *reinterpret_cast<const float4*>(b + (tx + 16 * n) * kSB + k);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        c[r][n] = fmaf(av[r].x, bv[n].x, c[r][n]);
        c[r][n] = fmaf(av[r].y, bv[n].y, c[r][n]);
        c[r][n] = fmaf(av[r].z, bv[n].z, c[r][n]);
        c[r][n] = fmaf(av[r].w, bv[n].w, c[r][n]);
      }
  }
}

// c[r][4 g + e] += sum_k a[ty + 16 r][k] * b[k][64 g + 4 tx + e], k < kK (row strides kSA, kSB).
template <int kK, int kG, int kSA, int kSB>
__device__ __forceinline__ void float_product_nn(float (&c)[4][4 * kG], const float* a, const float* b, int ty,
                                                 int tx) {
#pragma unroll 2
  for (int k = 0; k < kK; k += 4) {
    float4 av[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) av[r] = *reinterpret_cast<const float4*>(a + (ty + 16 * r) * kSA + k);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const float4 bv = *reinterpret_cast<const float4*>(b + (k + u) * kSB + 64 * g + 4 * tx);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float x = component(av[r], u);
          c[r][4 * g] = fmaf(x, bv.x, c[r][4 * g]);
          c[r][4 * g + 1] = fmaf(x, bv.y, c[r][4 * g + 1]);
          c[r][4 * g + 2] = fmaf(x, bv.z, c[r][4 * g + 2]);
          c[r][4 * g + 3] = fmaf(x, bv.w, c[r][4 * g + 3]);
        }
      }
  }
}

// Combines a value over the 16 threads (tx) that share a row.
template <typename Op>
__device__ __forceinline__ float row_combine(float v, const Op& op) {
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) v = op(v, rtx_shfl_xor(v, o));
  return v;
}

template <int kD, bool kCausal>
__global__ void __launch_bounds__(kFloatThreads)
    attention_float_kernel(Heads<float> out, float* lse, Heads<const float> q, Heads<const float> k,
                           Heads<const float> v, int64_t bh, int64_t L, int64_t S, int d, int64_t q_tiles, float scale,
                           bool vectorized) {
  constexpr int kStride = kFloatRowStride<kD>, kG = kD / 64;
  float* s_q = shared_as<float>();
  float* s_kv = s_q + kFloatTileFloats<kD>;  // the key tile, then the value tile
  float* s_p = s_kv + kFloatTileFloats<kD>;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t head = blockIdx.x % bh;
  const int64_t q0 = (q_tiles - 1 - blockIdx.x / bh) * kFloatTile;  // the longest causal rows first
  const float* kh = k.head(head);
  const float* vh = v.head(head);
  load_float_tile<kD>(s_q, q.head(head), q0, L, d, q.layout.row, vectorized);
  const int64_t key_end = kCausal ? std::min(S, std::min(q0 + kFloatTile, L)) : S;

  float m[4], l[4], o[4][kD / 16] = {};
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
  }
  for (int64_t kv0 = 0; kv0 < key_end; kv0 += kFloatTile) {
    __syncthreads();  // the previous value tile and score tile are used up
    load_float_tile<kD>(s_kv, kh, kv0, S, d, k.layout.row, vectorized);
    __syncthreads();
    float s[4][4] = {};
    float_product_nt<kD, kStride, kStride>(s, s_q, s_kv, ty, tx);
    const bool masked = kv0 + kFloatTile > S || (kCausal && kv0 + kFloatTile - 1 > q0);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t row = q0 + ty + 16 * r;
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int64_t col = kv0 + tx + 16 * n;
        float x = s[r][n] * scale;
        if (masked && (col >= S || (kCausal && col > row))) x = -INFINITY;
        s[r][n] = x;
        mx = x > mx ? x : mx;
      }
      mx = row_combine(mx, MaxOp{});
      const float m_new = mx > m[r] ? mx : m[r];
      const float base = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = expf(m[r] - base);
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int c = 0; c < kD / 16; ++c) o[r][c] *= alpha;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const float p = expf(s[r][n] - base);
        l[r] += p;
        s_p[(ty + 16 * r) * kFloatScoreStride + tx + 16 * n] = p;
      }
    }
    __syncthreads();  // the scores are in place and the key tile is used up
    load_float_tile<kD>(s_kv, vh, kv0, S, d, v.layout.row, vectorized);
    __syncthreads();
    float_product_nn<kFloatTile, kG, kFloatScoreStride, kStride>(o, s_p, s_kv, ty, tx);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float total = row_combine(l[r], SumOp{});
#pragma unroll
    for (int c = 0; c < kD / 16; ++c) o[r][c] /= total;
    const int64_t row = q0 + ty + 16 * r;
    if (tx == 0 && row < L) lse[head * L + row] = m[r] + logf(total);
  }
  store_float_rows<kD>(out.head(head), o, 1.f, q0, L, d, out.layout.row, vectorized, ty, tx);
}

// A block per key tile: dv = P^T g and dk = scale * dS^T q over the query tiles.
template <int kD, bool kCausal>
__global__ void __launch_bounds__(kFloatThreads)
    attention_float_dkdv_kernel(Heads<float> dk, Heads<float> dv, Heads<const float> g, Heads<const float> q,
                                Heads<const float> k, Heads<const float> v, const float* lse, const float* dl,
                                int64_t bh, int64_t L, int64_t S, int d, float scale, bool vectorized) {
  constexpr int kStride = kFloatRowStride<kD>, kG = kD / 64;
  float* s_k = shared_as<float>();
  float* s_v = s_k + kFloatTileFloats<kD>;
  float* s_q = s_v + kFloatTileFloats<kD>;
  float* s_g = s_q + kFloatTileFloats<kD>;
  float* s_scores = s_g + kFloatTileFloats<kD>;  // P^T, then dS^T
  float* s_lse = s_scores + kFloatScoreFloats;
  float* s_dl = s_lse + kFloatTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t head = blockIdx.x % bh;
  const int64_t kv0 = blockIdx.x / bh * kFloatTile;  // the longest causal columns first
  const float* qh = q.head(head);
  const float* gh = g.head(head);
  load_float_tile<kD>(s_k, k.head(head), kv0, S, d, k.layout.row, vectorized);
  load_float_tile<kD>(s_v, v.head(head), kv0, S, d, v.layout.row, vectorized);

  float acc_k[4][kD / 16] = {}, acc_v[4][kD / 16] = {};
  for (int64_t q0 = kCausal ? kv0 : 0; q0 < L; q0 += kFloatTile) {
    __syncthreads();  // the previous tiles are used up
    load_float_tile<kD>(s_q, qh, q0, L, d, q.layout.row, vectorized);
    load_float_tile<kD>(s_g, gh, q0, L, d, g.layout.row, vectorized);
    if (threadIdx.x < kFloatTile) {
      const int64_t row = q0 + threadIdx.x;
      s_lse[threadIdx.x] = row < L ? lse[head * L + row] : INFINITY;  // P = 0 past the queries
      s_dl[threadIdx.x] = row < L ? dl[head * L + row] : 0.f;
    }
    __syncthreads();
    float p[4][4] = {}, ds[4][4] = {};
    float_product_nt<kD, kStride, kStride>(p, s_k, s_q, ty, tx);
    float_product_nt<kD, kStride, kStride>(ds, s_v, s_g, ty, tx);
    const bool masked = kCausal && q0 < kv0 + kFloatTile - 1;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int i = tx + 16 * n;
        float x = expf(p[r][n] * scale - s_lse[i]);
        if (masked && kv0 + ty + 16 * r > q0 + i) x = 0.f;
        p[r][n] = x;
        ds[r][n] = x * (ds[r][n] - s_dl[i]);
        s_scores[(ty + 16 * r) * kFloatScoreStride + i] = x;
      }
    __syncthreads();
    float_product_nn<kFloatTile, kG, kFloatScoreStride, kStride>(acc_v, s_scores, s_g, ty, tx);
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int n = 0; n < 4; ++n) s_scores[(ty + 16 * r) * kFloatScoreStride + tx + 16 * n] = ds[r][n];
    __syncthreads();
    float_product_nn<kFloatTile, kG, kFloatScoreStride, kStride>(acc_k, s_scores, s_q, ty, tx);
  }
  store_float_rows<kD>(dv.head(head), acc_v, 1.f, kv0, S, d, dv.layout.row, vectorized, ty, tx);
  store_float_rows<kD>(dk.head(head), acc_k, scale, kv0, S, d, dk.layout.row, vectorized, ty, tx);
}

// A block per query tile: dq = scale * dS k over the key tiles.
template <int kD, bool kCausal>
__global__ void __launch_bounds__(kFloatThreads)
    attention_float_dq_kernel(Heads<float> dq, Heads<const float> g, Heads<const float> q, Heads<const float> k,
                              Heads<const float> v, const float* lse, const float* dl, int64_t bh, int64_t L,
                              int64_t S, int d, int64_t q_tiles, float scale, bool vectorized) {
  constexpr int kStride = kFloatRowStride<kD>, kG = kD / 64;
  float* s_q = shared_as<float>();
  float* s_g = s_q + kFloatTileFloats<kD>;
  float* s_k = s_g + kFloatTileFloats<kD>;
  float* s_v = s_k + kFloatTileFloats<kD>;
  float* s_ds = s_v + kFloatTileFloats<kD>;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t head = blockIdx.x % bh;
  const int64_t q0 = (q_tiles - 1 - blockIdx.x / bh) * kFloatTile;
  const float* kh = k.head(head);
  const float* vh = v.head(head);
  load_float_tile<kD>(s_q, q.head(head), q0, L, d, q.layout.row, vectorized);
  load_float_tile<kD>(s_g, g.head(head), q0, L, d, g.layout.row, vectorized);
  float row_lse[4], row_dl[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t row = q0 + ty + 16 * r;
    row_lse[r] = row < L ? lse[head * L + row] : INFINITY;
    row_dl[r] = row < L ? dl[head * L + row] : 0.f;
  }
  const int64_t key_end = kCausal ? std::min(S, std::min(q0 + kFloatTile, L)) : S;

  float acc[4][kD / 16] = {};
  for (int64_t kv0 = 0; kv0 < key_end; kv0 += kFloatTile) {
    __syncthreads();  // the previous tiles are used up
    load_float_tile<kD>(s_k, kh, kv0, S, d, k.layout.row, vectorized);
    load_float_tile<kD>(s_v, vh, kv0, S, d, v.layout.row, vectorized);
    __syncthreads();
    float s[4][4] = {}, dp[4][4] = {};
    float_product_nt<kD, kStride, kStride>(s, s_q, s_k, ty, tx);
    float_product_nt<kD, kStride, kStride>(dp, s_g, s_v, ty, tx);
    const bool masked = kv0 + kFloatTile > S || (kCausal && kv0 + kFloatTile - 1 > q0);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int64_t row = q0 + ty + 16 * r, col = kv0 + tx + 16 * n;
        float p = expf(s[r][n] * scale - row_lse[r]);
        if (masked && (col >= S || (kCausal && col > row))) p = 0.f;
        s_ds[(ty + 16 * r) * kFloatScoreStride + tx + 16 * n] = p * (dp[r][n] - row_dl[r]);
      }
    __syncthreads();
    float_product_nn<kFloatTile, kG, kFloatScoreStride, kStride>(acc, s_ds, s_k, ty, tx);
  }
  store_float_rows<kD>(dq.head(head), acc, scale, q0, L, d, dq.layout.row, vectorized, ty, tx);
}

template <typename... P>
bool float_vectorizable(int64_t d, const Heads<P>&... operands) {
  return d % 4 == 0 && (operands.rows_aligned_16() && ...);
}

void float_forward(const AttentionShape& sh, Heads<float> out, float* lse, Heads<const float> q, Heads<const float> k,
                   Heads<const float> v, double scale, bool causal, cudaStream_t stream) {
  const int64_t q_tiles = ceil_div(sh.L, kFloatTile);
  const bool vec = float_vectorizable(sh.d, out, q, k, v);
  with_padded_head_dim(sh.d, [&](auto head_dim) {
    constexpr int kD = decltype(head_dim)::value;
    with_causal(causal, [&](auto causal_tag) {
      constexpr bool kCausal = decltype(causal_tag)::value;
      const size_t bytes = float_forward_shared_bytes(kD);
      allow_shared_memory(attention_float_kernel<kD, kCausal>, bytes);
      attention_float_kernel<kD, kCausal><<<static_cast<unsigned>(q_tiles * sh.bh), kFloatThreads, bytes, stream>>>(
          out, lse, q, k, v, sh.bh, sh.L, sh.S, static_cast<int>(sh.d), q_tiles, static_cast<float>(scale), vec);
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
}

void float_backward(const AttentionShape& sh, Heads<float> dq, Heads<float> dk, Heads<float> dv,
                    Heads<const float> g, Heads<const float> q, Heads<const float> k, Heads<const float> v,
                    const float* lse, const float* dl, double scale, bool causal, cudaStream_t stream) {
  const int64_t q_tiles = ceil_div(sh.L, kFloatTile), k_tiles = ceil_div(sh.S, kFloatTile);
  const bool vec = float_vectorizable(sh.d, dq, dk, dv, g, q, k, v);
  const auto s = static_cast<float>(scale);
  const int d = static_cast<int>(sh.d);
  with_padded_head_dim(sh.d, [&](auto head_dim) {
    constexpr int kD = decltype(head_dim)::value;
    with_causal(causal, [&](auto causal_tag) {
      constexpr bool kCausal = decltype(causal_tag)::value;
      const size_t dkdv_bytes = float_dkdv_shared_bytes(kD), dq_bytes = float_dq_shared_bytes(kD);
      allow_shared_memory(attention_float_dkdv_kernel<kD, kCausal>, dkdv_bytes);
      attention_float_dkdv_kernel<kD, kCausal>
          <<<static_cast<unsigned>(k_tiles * sh.bh), kFloatThreads, dkdv_bytes, stream>>>(
              dk, dv, g, q, k, v, lse, dl, sh.bh, sh.L, sh.S, d, s, vec);
      RTX_CUDA_CHECK_LAUNCH();
      allow_shared_memory(attention_float_dq_kernel<kD, kCausal>, dq_bytes);
      attention_float_dq_kernel<kD, kCausal>
          <<<static_cast<unsigned>(q_tiles * sh.bh), kFloatThreads, dq_bytes, stream>>>(
          dq, g, q, k, v, lse, dl, sh.bh, sh.L, sh.S, d, q_tiles, s, vec);
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
}

// ---- tensor cores: Half/BFloat16 through mma.sync m16n8k16, float32 through TF32 m16n8k8 -----------
//
// A block has 4 warps of 16 rows each (64 rows), or of 32 in the forward's two-tile tilings. The
// forward's tiling and the dk/dv kernel's streamed rows are picked per GPU model and shape class by
// the tuner (backend/cuda/tuner.h) among candidates that agree bit for bit, except the forward's
// 32-key tiling. Shared tiles hold the operands' raw bits (`Bits`:
// 16-bit values, or floats) in rows padded by 16 bytes, which keeps ldmatrix free of bank conflicts;
// cp.async fills them (zeros past the rows and D). The kernels are written once over MmaOps<T>,
// which gives the A fragment of 16 rows by a 16-deep slice (AFrag) and the two tile products:
// - Half/BFloat16: mma.m16n8k16, whose lane = 4 * group + quad holds, of a 16 x 8 accumulator, rows
//   group and group + 8 at columns 2 quad and 2 quad + 1; an accumulator pair of columns
//   16 kk .. 16 kk + 15 packed to 16 bits is an A fragment for the next product.
// - float (TF32, when the float32 matmul precision is not "highest"): two mma.m16n8k8 per 16-deep
//   slice, operands rounded to TF32 (cvt.rna). The accumulators of an 8-column block are an A
//   fragment once its k slots are permuted (slot quad = column 2 quad, slot quad + 4 = column
//   2 quad + 1); products with such an A read their B rows in the same permuted order.
// Either way P and dS never leave the registers.

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaRows = 16 * kMmaWarps;  // rows a block owns (queries or keys)

template <typename Bits, int kD>
constexpr int kMmaRowStride = kD + 16 / static_cast<int>(sizeof(Bits));
// Rows of the tiles a backward kernel streams by default (fewer for 128-wide heads, whose accumulators
// are twice as large, to stay within the registers). The 16-bit dk/dv kernel's are tuned among
// kDkdvStreamRows per shape class; the order of every sum is the same for each, so are the bits.
constexpr int default_stream_rows(int d_pad) { return d_pad > 64 ? 32 : 64; }
template <int kD>
constexpr int kMmaStreamRows = default_stream_rows(kD);
constexpr int kDkdvStreamRows[] = {32, 64};
constexpr int kDkdvStreamRowsCount = sizeof(kDkdvStreamRows) / sizeof(kDkdvStreamRows[0]);

template <typename Bits>
constexpr size_t mma_backward_shared_bytes(int d_pad, int stream_rows) {
  // two resident tiles of kMmaRows rows, two double-buffered streamed tiles, lse and dl per stream row
  return sizeof(Bits) * (2 * kMmaRows + 4 * stream_rows) * (d_pad + 16 / sizeof(Bits)) +
         sizeof(float) * 4 * stream_rows;
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, asynchronously; zeros when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most `kPending` of this thread's latest cp.async groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Four 8 x 8 matrices of 16-bit values (8 x 4 of 32-bit ones); lane l gives the address of row l % 8
// of matrix l / 8, and gets of matrix m, in r[m], the 32 bits at row l / 4, word l % 4.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
#else
  __trap();
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
#else
  __trap();
#endif
}

// One mma.sync of the given shape and types (a PTX string): accumulators c (four floats, in place),
// an A fragment of four registers a[0..3], a B fragment of two (b0, b1).
#define RTX_MMA_SYNC(shape_and_types, c, a, b0, b1)                                                       \
  asm volatile("mma.sync.aligned." shape_and_types                                                        \
               " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                        \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// c += a b for a 16 x 16 A fragment and a 16 x 8 B fragment (b0, b1) of T, float accumulation.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, BFloat16>)
    RTX_MMA_SYNC("m16n8k16.row.col.f32.bf16.bf16.f32", c, a, b0, b1);
  else
    RTX_MMA_SYNC("m16n8k16.row.col.f32.f16.f16.f32", c, a, b0, b1);
#else
  __trap();
#endif
}

// c += a b for a 16 x 8 TF32 A fragment (a[0..3]) and an 8 x 8 B fragment (b0, b1).
__device__ __forceinline__ void mma_1688_tf32(float (&c)[4], const uint32_t* a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  RTX_MMA_SYNC("m16n8k8.row.col.f32.tf32.tf32.f32", c, a, b0, b1);
#else
  __trap();
#endif
}

// x rounded to TF32 (to nearest, ties away from zero), as the bits mma takes.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#endif
  return r;
}
__device__ __forceinline__ uint32_t bits_to_tf32(uint32_t bits) { return to_tf32(__uint_as_float(bits)); }

template <typename T>
struct MmaOps;

// Half and BFloat16: one m16n8k16 per 16 x 8 block and 16-deep slice.
template <typename T>
struct MmaOps16 {
  using Bits = uint16_t;
  using AFrag = uint32_t[4];
  using BFrag = uint32_t[4];

  // Two floats rounded to T, lo in the low half.
  static __device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
    return static_cast<uint32_t>(static_cast<T>(lo).bits) | (static_cast<uint32_t>(static_cast<T>(hi).bits) << 16);
  }

  // The A fragment of 16 rows (from row0) of a shared tile, columns 16 kk .. 16 kk + 15.
  template <int kD>
  static __device__ __forceinline__ void load_a(AFrag& a, const Bits* tile, int row0, int kk, int lane) {
    ldmatrix_x4(a, tile + (row0 + lane % 16) * kMmaRowStride<Bits, kD> + kk * 16 + (lane / 16) * 8);
  }

  // The A fragment of columns 16 kk .. 16 kk + 15 of a row of accumulators.
  template <int kN>
  static __device__ __forceinline__ void accumulators_to_a(AFrag& a, const float (&c)[kN][4], int kk) {
    a[0] = pack_pair(c[2 * kk][0], c[2 * kk][1]);
    a[1] = pack_pair(c[2 * kk][2], c[2 * kk][3]);
    a[2] = pack_pair(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[3] = pack_pair(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }

  // The B fragment of columns 16 np .. 16 np + 15 and depth 16 kk .. 16 kk + 15 when B^T is the tile
  // (its rows row0 + 16 np .. and their columns 16 kk .., as the k dimension).
  template <int kD>
  static __device__ __forceinline__ void load_b_transposed(BFrag& b, const Bits* tile, int row0, int kk, int np,
                                                           int lane) {
    ldmatrix_x4(b, tile + (row0 + np * 16 + (lane / 16) * 8 + lane % 8) * kMmaRowStride<Bits, kD> + kk * 16 +
                       ((lane / 8) % 2) * 8);
  }

  // The B fragment of rows 16 kk .. 16 kk + 15 and columns 16 np .. 16 np + 15 of a shared tile.
  template <int kD>
  static __device__ __forceinline__ void load_b(BFrag& b, const Bits* tile, int kk, int np, int lane) {
    ldmatrix_x4_trans(b, tile + (kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kMmaRowStride<Bits, kD> + np * 16 +
                             (lane / 16) * 8);
  }

  // c[2 np], c[2 np + 1] += a * b.
  template <int kN>
  static __device__ __forceinline__ void mma(float (&c)[kN][4], const AFrag& a, const BFrag& b, int np) {
    mma_16816<T>(c[2 * np], a, b[0], b[1]);
    mma_16816<T>(c[2 * np + 1], a, b[2], b[3]);
  }

  // Columns c and c + 1 of a row.
  static __device__ __forceinline__ void store_pair(Bits* dst, float x, float y) {
    *reinterpret_cast<uint32_t*>(dst) = pack_pair(x, y);
  }
};
template <>
struct MmaOps<Half> : MmaOps16<Half> {};
template <>
struct MmaOps<BFloat16> : MmaOps16<BFloat16> {};

// float32 through TF32: two m16n8k8 per 16 x 8 block and 16-deep slice (j = 0, 1: its 8-deep halves).
template <>
struct MmaOps<float> {
  using Bits = float;
  using AFrag = uint32_t[8];  // [4 j + i]: register i of half j
  using BFrag = uint32_t[8];  // [4 h + 2 j + i]: register i of 8-deep half j, 8-column block h

  template <int kD>
  static __device__ __forceinline__ void load_a(AFrag& a, const Bits* tile, int row0, int kk, int lane) {
    const Bits* p = tile + (row0 + lane % 16) * kMmaRowStride<Bits, kD> + kk * 16 + (lane / 16) * 4;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      uint32_t r[4];
      ldmatrix_x4(r, p + 8 * j);
#pragma unroll
      for (int i = 0; i < 4; ++i) a[4 * j + i] = bits_to_tf32(r[i]);
    }
  }

  template <int kN>
  static __device__ __forceinline__ void accumulators_to_a(AFrag& a, const float (&c)[kN][4], int kk) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // k slots permuted: slot quad = column 2 quad, quad + 4 = 2 quad + 1
      a[4 * j] = to_tf32(c[2 * kk + j][0]);
      a[4 * j + 1] = to_tf32(c[2 * kk + j][2]);
      a[4 * j + 2] = to_tf32(c[2 * kk + j][1]);
      a[4 * j + 3] = to_tf32(c[2 * kk + j][3]);
    }
  }

  template <int kD>
  static __device__ __forceinline__ void load_b_transposed(BFrag& b, const Bits* tile, int row0, int kk, int np,
                                                           int lane) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t r[4];  // words 0-3, 4-7, 8-11, 12-15 of the slice, rows group of block h
      ldmatrix_x4(r, tile + (row0 + np * 16 + h * 8 + lane % 8) * kMmaRowStride<Bits, kD> + kk * 16 + (lane / 8) * 4);
#pragma unroll
      for (int i = 0; i < 4; ++i) b[4 * h + i] = bits_to_tf32(r[i]);
    }
  }

  template <int kD>
  static __device__ __forceinline__ void load_b(BFrag& b, const Bits* tile, int kk, int np, int lane) {
    constexpr int kStride = kMmaRowStride<Bits, kD>;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      // B's k slots in a's order: rows 2 quad and 2 quad + 1 of this 8-deep half.
      const Bits* rows = tile + (kk * 16 + 8 * j + 2 * (lane % 4)) * kStride + np * 16 + lane / 4;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        b[4 * h + 2 * j] = to_tf32(rows[8 * h]);
        b[4 * h + 2 * j + 1] = to_tf32(rows[kStride + 8 * h]);
      }
    }
  }

  template <int kN>
  static __device__ __forceinline__ void mma(float (&c)[kN][4], const AFrag& a, const BFrag& b, int np) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mma_1688_tf32(c[2 * np + h], a, b[4 * h], b[4 * h + 1]);
      mma_1688_tf32(c[2 * np + h], a + 4, b[4 * h + 2], b[4 * h + 3]);
    }
  }

  static __device__ __forceinline__ void store_pair(Bits* dst, float x, float y) {
    *reinterpret_cast<float2*>(dst) = make_float2(x, y);
  }
};

template <typename T>
using MmaBits = typename MmaOps<T>::Bits;

// c[2 np], c[2 np + 1] += a * B for B^T = the 16 rows from row0 + 16 np of a shared tile (B: their
// columns 16 kk .. 16 kk + 15, as the k dimension). a comes from load_a.
template <typename T, int kD, int kN>
__device__ __forceinline__ void mma_rows_transposed(float (&c)[kN][4], const typename MmaOps<T>::AFrag& a,
                                                    const MmaBits<T>* tile, int row0, int kk, int np, int lane) {
  typename MmaOps<T>::BFrag b;
  MmaOps<T>::template load_b_transposed<kD>(b, tile, row0, kk, np, lane);
  MmaOps<T>::mma(c, a, b, np);
}

// c[2 np], c[2 np + 1] += a * B for B = rows 16 kk .. 16 kk + 15 of a shared tile, columns
// 16 np .. 16 np + 15. a comes from accumulators_to_a.
template <typename T, int kD, int kN>
__device__ __forceinline__ void mma_rows(float (&c)[kN][4], const typename MmaOps<T>::AFrag& a, const MmaBits<T>* tile,
                                         int kk, int np, int lane) {
  typename MmaOps<T>::BFrag b;
  MmaOps<T>::template load_b<kD>(b, tile, kk, np, lane);
  MmaOps<T>::mma(c, a, b, np);
}

// Rows [row0, row0 + kRows) of a [rows, d] matrix with rows ld apart into a shared tile
// (asynchronously), zeros past `rows` and d (d a multiple of 16 bytes' elements, every row 16-byte
// aligned).
template <int kRows, int kD, typename Bits>
__device__ __forceinline__ void load_mma_tile(Bits* tile, const Bits* src, int64_t row0, int64_t rows, int d,
                                              int64_t ld) {
  constexpr int kPerChunk = 16 / sizeof(Bits), kChunks = kD / kPerChunk;
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kMmaThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * kPerChunk;
    const int64_t row = row0 + r;
    const bool valid = row < rows && c < d;
    cp_async_16(tile + r * kMmaRowStride<Bits, kD> + c, valid ? src + row * ld + c : src, valid);
  }
}

// Stores rows `row` of a warp's D-wide accumulators (half r: 0 for row group, 1 for group + 8),
// times factor, into a [rows, d] matrix with rows ld apart.
template <typename T, int kD>
__device__ __forceinline__ void store_mma_row(MmaBits<T>* dst, const float (&acc)[kD / 8][4], int r, float factor,
                                              int64_t row, int d, int64_t ld, int lane) {
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
    const int c = n * 8 + (lane % 4) * 2;
    if (c < d) MmaOps<T>::store_pair(dst + row * ld + c, acc[n][2 * r] * factor, acc[n][2 * r + 1] * factor);
  }
}

// The forward's tilings, which the tuner picks from per shape class (float32 keeps the first): the
// query rows of a warp, in 16-row tiles, and the keys of a streamed tile. With two row tiles every key
// or value fragment read from shared memory feeds two products (one fragment per product leaves
// ldmatrix, not the tensor cores, the limit on Hopper); fewer keys per tile leave more registers to
// 128-wide heads. Tilings with the same keys per tile give the same bits.
struct ForwardTiling {
  int row_tiles, keys;
};
constexpr ForwardTiling kForwardTilings[] = {{1, 64}, {2, 64}, {2, 32}};
constexpr int kForwardTilingCount = sizeof(kForwardTilings) / sizeof(kForwardTilings[0]);
template <typename T>
constexpr int kForwardTilingsOf = sizeof(MmaBits<T>) == 2 ? kForwardTilingCount : 1;
template <int kTiling>
constexpr int kForwardRows = 16 * kMmaWarps * kForwardTilings[kTiling].row_tiles;  // query rows of a block

template <typename T>
constexpr size_t mma_forward_shared_bytes(int d_pad, int tiling) {
  using Bits = MmaBits<T>;
  // the query tile, a key tile and a value tile
  return sizeof(Bits) * (16 * kMmaWarps * kForwardTilings[tiling].row_tiles + 2 * kForwardTilings[tiling].keys) *
         (d_pad + 16 / sizeof(Bits));
}
template <typename T>
constexpr size_t mma_forward_shared_bytes(int d_pad) {  // the most any of T's tilings needs
  size_t most = 0;
  for (int t = 0; t < kForwardTilingsOf<T>; ++t) most = std::max(most, mma_forward_shared_bytes<T>(d_pad, t));
  return most;
}

template <typename T, int kD, bool kCausal, int kTiling>
__global__ void __launch_bounds__(kMmaThreads)
    attention_mma_kernel(Heads<MmaBits<T>> out, float* lse, Heads<const MmaBits<T>> q, Heads<const MmaBits<T>> k,
                         Heads<const MmaBits<T>> v, int64_t bh, int64_t L, int64_t S, int d, int64_t q_tiles,
                         float scale_log2) {
  using Ops = MmaOps<T>;
  using Bits = MmaBits<T>;
  constexpr int kStride = kMmaRowStride<Bits, kD>, kSlices = kD / 16;
  constexpr int kTiles = kForwardTilings[kTiling].row_tiles, kKeys = kForwardTilings[kTiling].keys;
  constexpr int kRows = kForwardRows<kTiling>;
  // Query fragments stay in registers where they fit beside the accumulators; else they are read
  // from the shared query tile for each key tile.
  constexpr bool kQInRegisters = kTiles * kD <= 128;
  Bits* s_k = shared_as<Bits>();
  Bits* s_v = s_k + kKeys * kStride;
  Bits* s_q = s_v + kKeys * kStride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t head = blockIdx.x % bh;
  const int64_t q0 = (q_tiles - 1 - blockIdx.x / bh) * kRows;  // the longest causal rows first
  const int warp_row0 = warp * 16 * kTiles;                    // in the block's tile
  const int64_t warp_q0 = q0 + warp_row0, warp_q_last = warp_q0 + 16 * kTiles - 1;
  const Bits* kh = k.head(head);
  const Bits* vh = v.head(head);
  const int64_t k_ld = k.layout.row, v_ld = v.layout.row;
  load_mma_tile<kRows, kD>(s_q, q.head(head), q0, L, d, q.layout.row);
  load_mma_tile<kKeys, kD>(s_k, kh, 0, S, d, k_ld);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  typename Ops::AFrag qa[kQInRegisters ? kTiles * kSlices : 1];
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int mt = 0; mt < kTiles; ++mt)
#pragma unroll
      for (int kk = 0; kk < kSlices; ++kk) Ops::template load_a<kD>(qa[mt * kSlices + kk], s_q, warp_row0 + 16 * mt, kk, lane);
  }

  // Scores are kept in the log2 domain: x = s * scale * log2(e). Lane rows: warp_q0 + 16 mt + lane / 4
  // (accumulator halves r = 0) and 8 rows below (r = 1).
  const int64_t key_end = kCausal ? std::min(S, std::min(q0 + kRows, L)) : S;
  float m[kTiles][2], l[kTiles][2] = {}, o[kTiles][kD / 8][4] = {};
#pragma unroll
  for (int mt = 0; mt < kTiles; ++mt) m[mt][0] = m[mt][1] = -INFINITY;
  for (int64_t kv0 = 0; kv0 < key_end; kv0 += kKeys) {
    load_mma_tile<kKeys, kD>(s_v, vh, kv0, S, d, v_ld);
    cp_async_commit();
    // A causal tile whose keys all come after this warp's rows adds nothing to them.
    const bool skip = kCausal && kv0 > warp_q_last;
    float s[kTiles][kKeys / 8][4] = {};
    if (!skip) {
#pragma unroll
      for (int kk = 0; kk < kSlices; ++kk) {
        typename Ops::AFrag a[kTiles];
        if constexpr (!kQInRegisters) {
#pragma unroll
          for (int mt = 0; mt < kTiles; ++mt) Ops::template load_a<kD>(a[mt], s_q, warp_row0 + 16 * mt, kk, lane);
        }
#pragma unroll
        for (int np = 0; np < kKeys / 16; ++np) {
          typename Ops::BFrag b;
          Ops::template load_b_transposed<kD>(b, s_k, 0, kk, np, lane);
#pragma unroll
          for (int mt = 0; mt < kTiles; ++mt) Ops::mma(s[mt], kQInRegisters ? qa[mt * kSlices + kk] : a[mt], b, np);
        }
      }
      // Masked tiles: keys from kv0 + key_limit on are past S; key kv0 + c is after row warp_q0 + i when
      // c - i > first_row (both counted in the tile, as 32-bit offsets).
      const bool masked = kv0 + kKeys > S || (kCausal && kv0 + kKeys - 1 > warp_q0);
      const int key_limit = static_cast<int>(std::min<int64_t>(S - kv0, kKeys));
      const int first_row = kCausal && masked ? static_cast<int>(warp_q0 - kv0) : 0;
#pragma unroll
      for (int mt = 0; mt < kTiles; ++mt) {
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = 16 * mt + lane / 4 + (e / 2) * 8, c = n * 8 + (lane % 4) * 2 + e % 2;
            const float x = s[mt][n][e] * scale_log2;
            s[mt][n][e] = masked && (c >= key_limit || (kCausal && c - i > first_row)) ? -INFINITY : x;
          }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float mx = -INFINITY;
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * r], s[mt][n][2 * r + 1]));
          mx = fmaxf(mx, rtx_shfl_xor(mx, 1));
          mx = fmaxf(mx, rtx_shfl_xor(mx, 2));
          const float m_new = fmaxf(m[mt][r], mx);
          const float base = m_new == -INFINITY ? 0.f : m_new;
          const float alpha = exp2f(m[mt][r] - base);
          m[mt][r] = m_new;
          l[mt][r] *= alpha;
#pragma unroll
          for (int n = 0; n < kD / 8; ++n) {
            o[mt][n][2 * r] *= alpha;
            o[mt][n][2 * r + 1] *= alpha;
          }
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n) {
            s[mt][n][2 * r] = exp2f(s[mt][n][2 * r] - base);
            s[mt][n][2 * r + 1] = exp2f(s[mt][n][2 * r + 1] - base);
            l[mt][r] += s[mt][n][2 * r] + s[mt][n][2 * r + 1];
          }
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the value tile is in place and every warp is done with the key tile
    if (kv0 + kKeys < key_end) load_mma_tile<kKeys, kD>(s_k, kh, kv0 + kKeys, S, d, k_ld);
    cp_async_commit();
    if (!skip) {
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        typename Ops::AFrag pa[kTiles];
#pragma unroll
        for (int mt = 0; mt < kTiles; ++mt) Ops::accumulators_to_a(pa[mt], s[mt], kk);
#pragma unroll
        for (int np = 0; np < kD / 16; ++np) {
          typename Ops::BFrag b;
          Ops::template load_b<kD>(b, s_v, kk, np, lane);
#pragma unroll
          for (int mt = 0; mt < kTiles; ++mt) Ops::mma(o[mt], pa[mt], b, np);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the next key tile is in place and every warp is done with the value tile
  }
#pragma unroll
  for (int mt = 0; mt < kTiles; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float total = l[mt][r];
      total += rtx_shfl_xor(total, 1);
      total += rtx_shfl_xor(total, 2);
      const int64_t row = warp_q0 + 16 * mt + lane / 4 + 8 * r;
      if (row >= L) continue;
      store_mma_row<T, kD>(out.head(head), o[mt], r, 1.f / total, row, d, out.layout.row, lane);
      if (lane % 4 == 0) lse[head * L + row] = m[mt][r] * kLn2 + logf(total);
    }
}

// The stored dS^T of a head: [S_pad keys][ds_ld queries] 16-bit values, heads S_pad * ds_ld apart
// (S_pad = the keys rounded up to kMmaRows).
__host__ __device__ constexpr int64_t ds_head_elems(int64_t S, int64_t ds_ld) {
  return (S + kMmaRows - 1) / kMmaRows * kMmaRows * ds_ld;
}
// A warp's dS^T A fragment of keys key_base, key_base + 8 and queries col0 .. col0 + 15 (as
// accumulators_to_a packs them) into the stored dS^T of `head`; keys past S are left out.
__device__ __forceinline__ void store_ds_transposed(uint16_t* ds_out, const uint32_t (&dsa)[4], int64_t head,
                                                    int64_t key_base, int64_t col0, int64_t S, int64_t ds_ld,
                                                    int lane) {
  uint16_t* base = ds_out + head * ds_head_elems(S, ds_ld) + col0 + 2 * (lane % 4);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t key = key_base + 8 * r;
    if (key >= S) continue;
    uint16_t* row = base + key * ds_ld;
    *reinterpret_cast<uint32_t*>(row) = dsa[r];
    *reinterpret_cast<uint32_t*>(row + 8) = dsa[2 + r];
  }
}

// A block per key tile (a warp per 16 keys): dv = P^T g and dk = scale * dS^T q over the query tiles
// of kQ rows, which stream through double-buffered shared tiles with their lse (log2 domain) and dl.
template <typename T, int kD, bool kCausal, int kQ>
__global__ void __launch_bounds__(kMmaThreads)
    attention_mma_dkdv_kernel(Heads<MmaBits<T>> dk, Heads<MmaBits<T>> dv, Heads<const MmaBits<T>> g,
                              Heads<const MmaBits<T>> q, Heads<const MmaBits<T>> k, Heads<const MmaBits<T>> v,
                              const float* lse, const float* dl, MmaBits<T>* ds_out, int64_t ds_ld, int64_t head0,
                              int64_t bh, int64_t L, int64_t S, int d, float scale, float scale_log2) {
  using Ops = MmaOps<T>;
  using Bits = MmaBits<T>;
  constexpr int kStride = kMmaRowStride<Bits, kD>;
  Bits* s_k = shared_as<Bits>();
  Bits* s_v = s_k + kMmaRows * kStride;
  Bits* s_q = s_v + kMmaRows * kStride;  // [2][kQ * kStride]
  Bits* s_g = s_q + 2 * kQ * kStride;    // [2][kQ * kStride]
  float* s_lse = reinterpret_cast<float*>(s_g + 2 * kQ * kStride);  // [2][kQ]
  float* s_dl = s_lse + 2 * kQ;                                      // [2][kQ]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t head = head0 + blockIdx.x % bh;
  const int64_t kv0 = blockIdx.x / bh * kMmaRows;  // the longest causal columns first
  const Bits* qh = q.head(head);
  const Bits* gh = g.head(head);
  const auto load_queries = [&](int64_t q0, int buf) {
    load_mma_tile<kQ, kD>(s_q + buf * kQ * kStride, qh, q0, L, d, q.layout.row);
    load_mma_tile<kQ, kD>(s_g + buf * kQ * kStride, gh, q0, L, d, g.layout.row);
    if (threadIdx.x < kQ) {
      const int64_t row = q0 + threadIdx.x;
      s_lse[buf * kQ + threadIdx.x] = row < L ? lse[head * L + row] * static_cast<float>(kLog2e) : INFINITY;
      s_dl[buf * kQ + threadIdx.x] = row < L ? dl[head * L + row] : 0.f;
    }
  };
  const int64_t q_begin = kCausal ? kv0 : 0;  // earlier queries see none of these keys
  if (q_begin < L) {
    load_mma_tile<kMmaRows, kD>(s_k, k.head(head), kv0, S, d, k.layout.row);
    load_mma_tile<kMmaRows, kD>(s_v, v.head(head), kv0, S, d, v.layout.row);
    load_queries(q_begin, 0);
  }
  cp_async_commit();

  const int64_t key_base = kv0 + warp * 16 + lane / 4;  // keys key_base and key_base + 8
  float acc_k[kD / 8][4] = {}, acc_v[kD / 8][4] = {};
  int buf = 0;
  for (int64_t q0 = q_begin; q0 < L; q0 += kQ, buf ^= 1) {
    if (q0 + kQ < L) load_queries(q0 + kQ, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // this query tile is in place
    const Bits* t_q = s_q + buf * kQ * kStride;
    const Bits* t_g = s_g + buf * kQ * kStride;
    const float* t_lse = s_lse + buf * kQ;
    const float* t_dl = s_dl + buf * kQ;
    // S^T = k q^T and dP^T = v g^T for this warp's keys.
    float p[kQ / 8][4] = {}, ds[kQ / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      typename Ops::AFrag ka, va;
      Ops::template load_a<kD>(ka, s_k, warp * 16, kk, lane);
      Ops::template load_a<kD>(va, s_v, warp * 16, kk, lane);
#pragma unroll
      for (int np = 0; np < kQ / 16; ++np) {
        mma_rows_transposed<T, kD>(p, ka, t_q, 0, kk, np, lane);
        mma_rows_transposed<T, kD>(ds, va, t_g, 0, kk, np, lane);
      }
    }
    const bool masked = kCausal && q0 < kv0 + kMmaRows - 1;
#pragma unroll
    for (int n = 0; n < kQ / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = n * 8 + (lane % 4) * 2 + e % 2;
        float x = exp2f(p[n][e] * scale_log2 - t_lse[i]);
        if (masked && key_base + (e / 2) * 8 > q0 + i) x = 0.f;
        p[n][e] = x;
        ds[n][e] = x * (ds[n][e] - t_dl[i]);
      }
    // dv += P^T g, dk += dS^T q.
#pragma unroll
    for (int kk = 0; kk < kQ / 16; ++kk) {
      typename Ops::AFrag pa, dsa;
      Ops::accumulators_to_a(pa, p, kk);
      Ops::accumulators_to_a(dsa, ds, kk);
      if constexpr (sizeof(Bits) == 2) {
        if (ds_out != nullptr) store_ds_transposed(ds_out, dsa, head - head0, key_base, q0 + kk * 16, S, ds_ld, lane);
      }
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) {
        mma_rows<T, kD>(acc_v, pa, t_g, kk, np, lane);
        mma_rows<T, kD>(acc_k, dsa, t_q, kk, np, lane);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t key = key_base + 8 * r;
    if (key >= S) continue;
    store_mma_row<T, kD>(dv.head(head), acc_v, r, 1.f, key, d, dv.layout.row, lane);
    store_mma_row<T, kD>(dk.head(head), acc_k, r, scale, key, d, dk.layout.row, lane);
  }
}

// A block per query tile (a warp per 16 queries): dq = scale * dS k over the key tiles, which stream
// through double-buffered shared tiles.
template <typename T, int kD, bool kCausal>
__global__ void __launch_bounds__(kMmaThreads)
    attention_mma_dq_kernel(Heads<MmaBits<T>> dq, Heads<const MmaBits<T>> g, Heads<const MmaBits<T>> q,
                            Heads<const MmaBits<T>> k, Heads<const MmaBits<T>> v, const float* lse, const float* dl,
                            int64_t bh, int64_t L, int64_t S, int d, int64_t q_tiles, float scale, float scale_log2) {
  using Ops = MmaOps<T>;
  using Bits = MmaBits<T>;
  constexpr int kStride = kMmaRowStride<Bits, kD>, kKeys = kMmaStreamRows<kD>;
  Bits* s_q = shared_as<Bits>();
  Bits* s_g = s_q + kMmaRows * kStride;
  Bits* s_k = s_g + kMmaRows * kStride;  // [2][kKeys * kStride]
  Bits* s_v = s_k + 2 * kKeys * kStride;  // [2][kKeys * kStride]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t head = blockIdx.x % bh;
  const int64_t q0 = (q_tiles - 1 - blockIdx.x / bh) * kMmaRows;  // the longest causal rows first
  const Bits* kh = k.head(head);
  const Bits* vh = v.head(head);
  const auto load_keys = [&](int64_t kv0, int buf) {
    load_mma_tile<kKeys, kD>(s_k + buf * kKeys * kStride, kh, kv0, S, d, k.layout.row);
    load_mma_tile<kKeys, kD>(s_v + buf * kKeys * kStride, vh, kv0, S, d, v.layout.row);
  };
  load_mma_tile<kMmaRows, kD>(s_q, q.head(head), q0, L, d, q.layout.row);
  load_mma_tile<kMmaRows, kD>(s_g, g.head(head), q0, L, d, g.layout.row);
  load_keys(0, 0);
  cp_async_commit();

  const int64_t row_base = q0 + warp * 16 + lane / 4;  // rows row_base and row_base + 8
  float row_lse[2], row_dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row_base + 8 * r;
    row_lse[r] = row < L ? lse[head * L + row] * static_cast<float>(kLog2e) : INFINITY;  // P = 0 past the rows
    row_dl[r] = row < L ? dl[head * L + row] : 0.f;
  }
  const int64_t key_end = kCausal ? std::min(S, std::min(q0 + kMmaRows, L)) : S;
  float acc[kD / 8][4] = {};
  int buf = 0;
  for (int64_t kv0 = 0; kv0 < key_end; kv0 += kKeys, buf ^= 1) {
    if (kv0 + kKeys < key_end) load_keys(kv0 + kKeys, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // this key tile is in place
    const Bits* t_k = s_k + buf * kKeys * kStride;
    const Bits* t_v = s_v + buf * kKeys * kStride;
    // S = q k^T and dP = g v^T for this warp's rows.
    float p[kKeys / 8][4] = {}, ds[kKeys / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      typename Ops::AFrag qa, ga;
      Ops::template load_a<kD>(qa, s_q, warp * 16, kk, lane);
      Ops::template load_a<kD>(ga, s_g, warp * 16, kk, lane);
#pragma unroll
      for (int np = 0; np < kKeys / 16; ++np) {
        mma_rows_transposed<T, kD>(p, qa, t_k, 0, kk, np, lane);
        mma_rows_transposed<T, kD>(ds, ga, t_v, 0, kk, np, lane);
      }
    }
    const bool masked = kv0 + kKeys > S || (kCausal && kv0 + kKeys - 1 > q0);
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = row_base + (e / 2) * 8, col = kv0 + n * 8 + (lane % 4) * 2 + e % 2;
        float x = exp2f(p[n][e] * scale_log2 - row_lse[e / 2]);
        if (masked && (col >= S || (kCausal && col > row))) x = 0.f;
        ds[n][e] = x * (ds[n][e] - row_dl[e / 2]);
      }
    // dq += dS k.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      typename Ops::AFrag dsa;
      Ops::accumulators_to_a(dsa, ds, kk);
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) mma_rows<T, kD>(acc, dsa, t_k, kk, np, lane);
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row_base + 8 * r;
    if (row < L) store_mma_row<T, kD>(dq.head(head), acc, r, scale, row, d, dq.layout.row, lane);
  }
}

// A block per query tile (a warp per 16 queries): dq = scale * dS k from the dS^T the dk/dv kernel
// stored, its [keys][queries] tiles read transposed by ldmatrix; dS^T and key tiles stream through
// double-buffered shared tiles (16-bit types).
template <typename T, int kD, bool kCausal>
__global__ void __launch_bounds__(kMmaThreads)
    attention_mma_dq_stored_kernel(Heads<MmaBits<T>> dq, Heads<const MmaBits<T>> k, const uint16_t* ds_t,
                                   int64_t ds_ld, int64_t head0, int64_t bh, int64_t L, int64_t S, int d,
                                   int64_t q_tiles, float scale) {
  using Ops = MmaOps<T>;
  using Bits = MmaBits<T>;
  static_assert(sizeof(Bits) == 2, "dS is stored as 16-bit values");
  constexpr int kStride = kMmaRowStride<Bits, kD>, kDsStride = kMmaRowStride<Bits, kMmaRows>, kKeys = kMmaRows;
  Bits* s_ds = shared_as<Bits>();               // [2][kKeys * kDsStride]
  Bits* s_k = s_ds + 2 * kKeys * kDsStride;     // [2][kKeys * kStride]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t head = head0 + blockIdx.x % bh;
  const int64_t q0 = (q_tiles - 1 - blockIdx.x / bh) * kMmaRows;  // the longest causal rows first
  const Bits* kh = k.head(head);
  const Bits* ds_h = ds_t + (head - head0) * ds_head_elems(S, ds_ld) + q0;
  const int cols = static_cast<int>(std::min<int64_t>(kMmaRows, L - q0));
  const auto load_keys = [&](int64_t kv0, int buf) {
    load_mma_tile<kKeys, kMmaRows>(s_ds + buf * kKeys * kDsStride, ds_h, kv0, S, cols, ds_ld);
    load_mma_tile<kKeys, kD>(s_k + buf * kKeys * kStride, kh, kv0, S, d, k.layout.row);
  };
  load_keys(0, 0);
  cp_async_commit();
  const int64_t key_end = kCausal ? std::min(S, std::min(q0 + kMmaRows, L)) : S;
  float acc[kD / 8][4] = {};
  int buf = 0;
  for (int64_t kv0 = 0; kv0 < key_end; kv0 += kKeys, buf ^= 1) {
    if (kv0 + kKeys < key_end) load_keys(kv0 + kKeys, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // this tile is in place
    const Bits* t_ds = s_ds + buf * kKeys * kDsStride;
    const Bits* t_k = s_k + buf * kKeys * kStride;
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      typename Ops::AFrag dsa;  // queries warp * 16 .. + 15, keys 16 kk .. 16 kk + 15
      ldmatrix_x4_trans(dsa, t_ds + (kk * 16 + (lane / 16) * 8 + lane % 8) * kDsStride + warp * 16 +
                                 ((lane / 8) % 2) * 8);
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) mma_rows<T, kD>(acc, dsa, t_k, kk, np, lane);
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
  const int64_t row_base = q0 + warp * 16 + lane / 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row_base + 8 * r;
    if (row < L) store_mma_row<T, kD>(dq.head(head), acc, r, scale, row, d, dq.layout.row, lane);
  }
}

// An operand as the raw bits the tensor-core kernels take.
template <typename T>
Heads<const MmaBits<T>> bits_of(const Heads<const T>& h) {
  return {reinterpret_cast<const MmaBits<T>*>(h.data), h.layout};
}
template <typename T>
Heads<MmaBits<T>> bits_of(const Heads<T>& h) {
  return {reinterpret_cast<MmaBits<T>*>(h.data), h.layout};
}

// The tuner's shape class of an attention call: the dtype, the padded head, causality and the rows,
// keys and heads rounded up to powers of two.
template <typename T, int kD, bool kCausal>
std::string shape_class(const AttentionShape& sh) {
  return fmt::format("{} d{} {} L{} S{} bh{}", dtype_name(dtype_of_v<T>), kD, kCausal ? "causal" : "full",
                     pow2_ceil(sh.L), pow2_ceil(sh.S), pow2_ceil(sh.bh));
}

template <typename T>
void mma_forward(const AttentionShape& sh, Heads<T> out, float* lse, Heads<const T> q, Heads<const T> k,
                 Heads<const T> v, double scale, bool causal, int device, cudaStream_t stream) {
  with_padded_head_dim(sh.d, [&](auto head_dim) {
    constexpr int kD = decltype(head_dim)::value;
    with_causal(causal, [&](auto causal_tag) {
      constexpr bool kCausal = decltype(causal_tag)::value;
      const auto launch = [&](int tiling) {
        with_index<kForwardTilingCount>(tiling, [&](auto tiling_tag) {
          constexpr int kTiling = decltype(tiling_tag)::value;
          if constexpr (kTiling < kForwardTilingsOf<T>) {
            const int64_t q_tiles = ceil_div(sh.L, kForwardRows<kTiling>);
            const size_t bytes = mma_forward_shared_bytes<T>(kD, kTiling);
            const auto kernel = attention_mma_kernel<T, kD, kCausal, kTiling>;
            allow_shared_memory(kernel, bytes);
            kernel<<<static_cast<unsigned>(q_tiles * sh.bh), kMmaThreads, bytes, stream>>>(
                bits_of(out), lse, bits_of(q), bits_of(k), bits_of(v), sh.bh, sh.L, sh.S, static_cast<int>(sh.d),
                q_tiles, static_cast<float>(scale * kLog2e));
            RTX_CUDA_CHECK_LAUNCH();
          }
        });
      };
      int tiling = 0;
      if constexpr (kForwardTilingsOf<T> > 1) {
        tiling = detail::tuned_choice(device, stream, "attention_forward", shape_class<T, kD, kCausal>(sh),
                                      kForwardTilingsOf<T>,
                                      kD > 64 ? 1 : 0, [&](int c) {
                                        launch(c);
                                        return true;
                                      });
      }
      launch(tiling);
    });
  });
}

// The most memory the 16-bit backward spends on stored dS^T at a time: the heads go in groups that
// fit (one head needs L x S values); heads larger than this recompute dS in the dq kernel instead.
constexpr int64_t kStoredDsBytes = int64_t{1} << 30;

template <typename T>
void mma_backward(const AttentionShape& sh, Heads<T> dq, Heads<T> dk, Heads<T> dv, Heads<const T> g,
                  Heads<const T> q, Heads<const T> k, Heads<const T> v, const float* lse, const float* dl,
                  double scale, bool causal, int device, cudaStream_t stream) {
  using Bits = MmaBits<T>;
  const int64_t q_tiles = ceil_div(sh.L, kMmaRows), k_tiles = ceil_div(sh.S, kMmaRows);
  const auto s = static_cast<float>(scale), s_log2 = static_cast<float>(scale * kLog2e);
  const int d = static_cast<int>(sh.d);
  // 16-bit types store dS^T for the dq kernel, a group of heads at a time.
  const int64_t ds_ld = q_tiles * kMmaRows, ds_head_bytes = ds_head_elems(sh.S, ds_ld) * 2;
  const int64_t group = sizeof(T) == 2 ? std::min(sh.bh, kStoredDsBytes / ds_head_bytes) : 0;
  const Tensor ds_t =
      group > 0 ? rtx::detail::make_tensor({group * ds_head_bytes}, kUInt8, Device(DeviceType::CUDA, device)) : Tensor();
  Bits* ds = group > 0 ? static_cast<Bits*>(ds_t.data_ptr()) : nullptr;
  with_padded_head_dim(sh.d, [&](auto head_dim) {
    constexpr int kD = decltype(head_dim)::value;
    with_causal(causal, [&](auto causal_tag) {
      constexpr bool kCausal = decltype(causal_tag)::value;
      // dk/dv of heads [head0, head0 + heads) with query tiles of kDkdvStreamRows[rows] rows; false when
      // they do not fit in shared memory.
      const auto dkdv = [&](int rows, int64_t head0, int64_t heads) {
        bool fits = false;
        with_index<kDkdvStreamRowsCount>(rows, [&](auto rows_tag) {
          constexpr int kQ = kDkdvStreamRows[decltype(rows_tag)::value];
          if constexpr (sizeof(T) == 2 || kQ == kMmaStreamRows<kD>) {  // float32 has the default only
            const size_t bytes = mma_backward_shared_bytes<Bits>(kD, kQ);
            if (bytes > shared_memory_optin(device)) return;
            const auto kernel = attention_mma_dkdv_kernel<T, kD, kCausal, kQ>;
            allow_shared_memory(kernel, bytes);
            kernel<<<static_cast<unsigned>(k_tiles * heads), kMmaThreads, bytes, stream>>>(
                bits_of(dk), bits_of(dv), bits_of(g), bits_of(q), bits_of(k), bits_of(v), lse, dl, ds, ds_ld, head0,
                heads, sh.L, sh.S, d, s, s_log2);
            RTX_CUDA_CHECK_LAUNCH();
            fits = true;
          }
        });
        return fits;
      };
      constexpr int kDefaultRows = kMmaStreamRows<kD> == kDkdvStreamRows[0] ? 0 : 1;
      static_assert(kDkdvStreamRows[kDefaultRows] == kMmaStreamRows<kD>, "the default is a candidate");
      int rows = kDefaultRows;
      if constexpr (sizeof(T) == 2) {
        rows = detail::tuned_choice(device, stream, "attention_dkdv", shape_class<T, kD, kCausal>(sh),
                                    kDkdvStreamRowsCount, kDefaultRows,
                                    [&](int c) { return dkdv(c, 0, group > 0 ? group : sh.bh); });
        if (group > 0) {
          const size_t ds_bytes =
              sizeof(Bits) * 2 * kMmaRows * (kMmaRowStride<Bits, kMmaRows> + kMmaRowStride<Bits, kD>);
          allow_shared_memory(attention_mma_dq_stored_kernel<T, kD, kCausal>, ds_bytes);
          for (int64_t head0 = 0; head0 < sh.bh; head0 += group) {
            const int64_t heads = std::min(group, sh.bh - head0);
            dkdv(rows, head0, heads);
            attention_mma_dq_stored_kernel<T, kD, kCausal>
                <<<static_cast<unsigned>(q_tiles * heads), kMmaThreads, ds_bytes, stream>>>(
                    bits_of(dq), bits_of(k), ds, ds_ld, head0, heads, sh.L, sh.S, d, q_tiles, s);
            RTX_CUDA_CHECK_LAUNCH();
          }
          return;
        }
      }
      dkdv(rows, 0, sh.bh);
      const size_t bytes = mma_backward_shared_bytes<Bits>(kD, kMmaStreamRows<kD>);
      allow_shared_memory(attention_mma_dq_kernel<T, kD, kCausal>, bytes);
      attention_mma_dq_kernel<T, kD, kCausal><<<static_cast<unsigned>(q_tiles * sh.bh), kMmaThreads, bytes, stream>>>(
          bits_of(dq), bits_of(g), bits_of(q), bits_of(k), bits_of(v), lse, dl, sh.bh, sh.L, sh.S, d, q_tiles, s,
          s_log2);
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
}

#endif  // !__HIP_PLATFORM_AMD__

// ---- path selection ------------------------------------------------------------------------------------

enum class AttentionPath { kGeneric, kFloatTiles, kTensorCores };

// Which kernels compute attention of T with this shape on `device`, whose operands (inputs and
// outputs) are `operands`. Returning kGeneric always is correct (and slow).
template <typename T>
AttentionPath attention_path(const AttentionShape& sh, std::initializer_list<Heads<const T>> operands, int device) {
#if defined(__HIP_PLATFORM_AMD__)
  (void)sh, (void)operands, (void)device;
  return AttentionPath::kGeneric;
#else
  const int64_t rows = std::max(sh.L, sh.S);
  if (sh.L == 0 || sh.S == 0 || sh.d > 128 || sh.bh * ceil_div(rows, 64) > INT_MAX) return AttentionPath::kGeneric;
  const size_t shared_optin = shared_memory_optin(device);
  int major = 0;
  RTX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const int d_pad = sh.d <= 64 ? 64 : 128;
  const bool aligned = std::all_of(operands.begin(), operands.end(),
                                   [](const Heads<const T>& h) { return h.rows_aligned_16(); });
  // Tensor cores: 16-bit types always, float32 as TF32 when float32 matrix products may use it.
  if constexpr (sizeof(T) == 2 || std::is_same_v<T, float>) {
    const bool allowed = sizeof(T) == 2 || get_float32_matmul_precision() != "highest";
    if (allowed && sh.d % (16 / sizeof(T)) == 0 && aligned && major >= 8 &&
        std::max(mma_forward_shared_bytes<T>(d_pad),
                 mma_backward_shared_bytes<MmaBits<T>>(d_pad, default_stream_rows(d_pad))) <= shared_optin)
      return AttentionPath::kTensorCores;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (std::max(float_dkdv_shared_bytes(d_pad), float_dq_shared_bytes(d_pad)) <= shared_optin)
      return AttentionPath::kFloatTiles;
  }
  return AttentionPath::kGeneric;
#endif
}

template <typename T>
void forward(const AttentionShape& sh, Heads<T> out, opmath_t<T>* lse, Heads<const T> q, Heads<const T> k,
             Heads<const T> v, double scale, bool causal, int device, cudaStream_t stream) {
  switch (attention_path<T>(sh, {out, q, k, v}, device)) {
#if !defined(__HIP_PLATFORM_AMD__)
    case AttentionPath::kTensorCores:
      if constexpr (sizeof(T) == 2 || std::is_same_v<T, float>)
        mma_forward<T>(sh, out, lse, q, k, v, scale, causal, device, stream);
      return;
    case AttentionPath::kFloatTiles:
      if constexpr (std::is_same_v<T, float>) float_forward(sh, out, lse, q, k, v, scale, causal, stream);
      return;
#endif
    default:
      generic_forward<T>(sh, out, lse, q, k, v, scale, causal, stream);
  }
}

template <typename T>
void backward(const AttentionShape& sh, Heads<T> dq, Heads<T> dk, Heads<T> dv, Heads<const T> g, Heads<const T> q,
              Heads<const T> k, Heads<const T> v, const opmath_t<T>* lse, const opmath_t<T>* dl, double scale,
              bool causal, int device, cudaStream_t stream) {
  switch (attention_path<T>(sh, {dq, dk, dv, g, q, k, v}, device)) {
#if !defined(__HIP_PLATFORM_AMD__)
    case AttentionPath::kTensorCores:
      if constexpr (sizeof(T) == 2 || std::is_same_v<T, float>)
        mma_backward<T>(sh, dq, dk, dv, g, q, k, v, lse, dl, scale, causal, device, stream);
      return;
    case AttentionPath::kFloatTiles:
      if constexpr (std::is_same_v<T, float>)
        float_backward(sh, dq, dk, dv, g, q, k, v, lse, dl, scale, causal, stream);
      return;
#endif
    default:
      generic_backward<T>(sh, dq, dk, dv, g, q, k, v, lse, dl, scale, causal, stream);
  }
}

void attention_cuda(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                    double scale, bool causal) {
  const AttentionShape sh(q, k);
  if (out.numel() == 0) return;
  detail::KernelScope scope(q.device());
  RTX_DISPATCH_FLOATS(q.dtype(), "attention", [&] {
    using T = scalar_t;
    forward<T>(sh, heads_of<T>(out), lse.data_ptr<opmath_t<T>>(), heads_of<const T>(q), heads_of<const T>(k),
               heads_of<const T>(v), scale, causal, q.device().index, scope.stream());
  });
}

void attention_backward_cuda(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                             bool causal) {
  const AttentionShape sh(q, k);
  if (dq.numel() == 0 && dk.numel() == 0) return;
  detail::KernelScope scope(q.device());
  RTX_DISPATCH_FLOATS(q.dtype(), "attention_backward", [&] {
    using T = scalar_t;
    using acc_t = opmath_t<T>;
    const Heads<const T> gh = heads_of<const T>(g);
    const Tensor dl_t = rtx::detail::make_tensor({sh.bh, sh.L}, lse.dtype(), q.device());
    acc_t* dl = dl_t.data_ptr<acc_t>();
    const Heads<const T> oh = heads_of<const T>(out);
    const int64_t rows = sh.bh * sh.L;
    const RowLaunch rl(rows, static_cast<int>(std::min<int64_t>(kWarpSize, pow2_ceil(ceil_div(sh.d, kVecOf<T>)))));
    attention_row_dot_kernel<T><<<rl.grid, rl.block, 0, scope.stream()>>>(
        dl, gh, oh, sh.L, sh.d, rows, rl.lanes, sh.d % kVecOf<T> == 0 && gh.rows_aligned_16() && oh.rows_aligned_16());
    RTX_CUDA_CHECK_LAUNCH();
    backward<T>(sh, heads_of<T>(dq), heads_of<T>(dk), heads_of<T>(dv), gh, heads_of<const T>(q), heads_of<const T>(k),
                heads_of<const T>(v), lse.data_ptr<acc_t>(), dl, scale, causal, q.device().index, scope.stream());
  });
}

}  // namespace

RTX_REGISTER_KERNELS(attention_cuda) { RTX_ATTENTION_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
