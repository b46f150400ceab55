// CUDA kernels of softmax and log_softmax (forward and backward), embedding (forward and a
// deterministic backward), the index check and one-hot. Semantics follow src/backend/cpu/nn_cpu.cpp.
// The index check reports into the device's fault record without waiting
// (src/backend/cuda/device_faults.cuh), so the kernels that read the indices after it skip bad ones.
//
// Softmax over contiguous rows (inner == 1) keeps each row in registers when it fits (one read, one
// write, 128-bit pieces) and otherwise streams it twice, gathering the online max and sum of
// exponentials on the first pass. Other layouts reduce columns of [outer, n, inner] with threads
// along inner. The embedding backward sorts (index, position) keys and sums each weight row's
// gradient rows in position order: no atomics, the same result on every run.
#include <algorithm>
#include <vector>

#include "backend/cuda/device_faults.cuh"
#include "backend/cuda/tuner.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/rows.cuh"
#include "dispatch/nn.h"

namespace rtx::cuda {
namespace {

// ---- softmax ------------------------------------------------------------------------------------

template <typename T, int P, bool kTiled>
__global__ void __launch_bounds__(kMaxRowBlock)
    softmax_rows_kernel(T* out, const T* x, int64_t rows, int64_t n, int lanes, bool vectorized, bool log) {
  using acc_t = opmath_t<T>;
  __shared__ acc_t scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int len = row < 0 ? 0 : static_cast<int>(n);
    const int64_t off = row < 0 ? 0 : row * n;
    RowFragment<T, P, kTiled> f;
    f.load(x + off, len, lane, lanes, vectorized);
    acc_t m = neg_inf<T>();
    f.for_each(len, lane, lanes, [&](int p, int e) { m = MaxOp{}(m, f.at(p, e)); });
    m = row_reduce(m, lanes, scratch, MaxOp{});
    acc_t sum = 0;
    f.for_each(len, lane, lanes, [&](int p, int e) { sum += exp_of<T>(f.at(p, e) - m); });
    sum = row_reduce(sum, lanes, scratch, SumOp{});
    const acc_t log_sum = log_of<T>(sum), inv = acc_t(1) / sum;
    f.store(out + off, len, lane, lanes, vectorized, [&](int p, int, acc_t(&o)[kVecOf<T>]) {
#pragma unroll
      for (int e = 0; e < kVecOf<T>; ++e) o[e] = log ? (f.at(p, e) - m) - log_sum : exp_of<T>(f.at(p, e) - m) * inv;
    });
  });
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowBlock, kStreamBlocksPerSM)
    softmax_stream_kernel(T* out, const T* x, int64_t rows, int64_t n, int lanes, bool vectorized, bool log) {
  using acc_t = opmath_t<T>;
  using Stats = SoftmaxStats<T>;
  constexpr int U = kStreamPieces<T, 1>;
  __shared__ Stats scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int64_t len = row < 0 ? 0 : n, off = row < 0 ? 0 : row * n;
    Stats st = Stats::empty();
    stream_row<U>(x + off, len, lane, lanes, vectorized, neg_inf<T>(),
                  [&](acc_t(&v)[U][kVecOf<T>], int64_t, int64_t, bool) { st.template add<U * kVecOf<T>>(&v[0][0]); });
    st = row_reduce(st, lanes, scratch, MergeStats<T>{});
    const acc_t log_sum = st.log_sum(), inv = acc_t(1) / st.sum;
    map_row<U>(out + off, {x + off}, len, lane, lanes, vectorized,
               [&](int64_t, acc_t v) { return log ? (v - st.max) - log_sum : exp_of<T>(v - st.max) * inv; });
  });
}

template <typename T>
__global__ void softmax_columns_kernel(T* out, const T* x, int64_t outer, int64_t n, int64_t inner, int64_t tiles,
                                       bool log) {
  using acc_t = opmath_t<T>;
  using Stats = SoftmaxStats<T>;
  __shared__ Stats scratch[kColumnBlock];
  for_each_column(outer, n, inner, tiles, [&](int64_t, int64_t base, bool valid) {
    Stats st = Stats::empty();
    if (valid) {
      for (int64_t j = threadIdx.y; j < n; j += blockDim.y) {
        const acc_t v = static_cast<acc_t>(x[base + j * inner]);
        st.template add<1>(&v);
      }
    }
    st = block_reduce(st, blockDim.x, scratch, MergeStats<T>{});
    if (!valid) return;
    const acc_t log_sum = st.log_sum(), inv = acc_t(1) / st.sum;
    for (int64_t j = threadIdx.y; j < n; j += blockDim.y) {
      const acc_t v = static_cast<acc_t>(x[base + j * inner]);
      out[base + j * inner] = static_cast<T>(log ? (v - st.max) - log_sum : exp_of<T>(v - st.max) * inv);
    }
  });
}

// The gradient of softmax from the row sum `dot` of g * out (of g for log_softmax).
template <typename T>
__device__ __forceinline__ opmath_t<T> softmax_grad(opmath_t<T> g, opmath_t<T> y, opmath_t<T> dot, bool log) {
  return log ? g - exp_of<T>(y) * dot : y * (g - dot);
}

template <typename T, int P, bool kTiled>
__global__ void __launch_bounds__(kMaxRowBlock)
    softmax_backward_rows_kernel(T* gx, const T* g, const T* y, int64_t rows, int64_t n, int lanes, bool vectorized,
                                 bool log) {
  using acc_t = opmath_t<T>;
  __shared__ acc_t scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int len = row < 0 ? 0 : static_cast<int>(n);
    const int64_t off = row < 0 ? 0 : row * n;
    RowFragment<T, P, kTiled> gf, yf;
    gf.load(g + off, len, lane, lanes, vectorized);
    yf.load(y + off, len, lane, lanes, vectorized);
    acc_t dot = 0;
    gf.for_each(len, lane, lanes, [&](int p, int e) { dot += log ? gf.at(p, e) : gf.at(p, e) * yf.at(p, e); });
    dot = row_reduce(dot, lanes, scratch, SumOp{});
    gf.store(gx + off, len, lane, lanes, vectorized, [&](int p, int, acc_t(&o)[kVecOf<T>]) {
#pragma unroll
      for (int e = 0; e < kVecOf<T>; ++e) o[e] = softmax_grad<T>(gf.at(p, e), yf.at(p, e), dot, log);
    });
  });
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowBlock, kStreamBlocksPerSM)
    softmax_backward_stream_kernel(T* gx, const T* g, const T* y, int64_t rows, int64_t n, int lanes, bool vectorized,
                                   bool log) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  constexpr int U = kStreamPieces<T, 2>;
  __shared__ acc_t scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int64_t len = row < 0 ? 0 : n, off = row < 0 ? 0 : row * n;
    acc_t dot = 0;
    stream_row<U>(g + off, len, lane, lanes, vectorized, acc_t(0),
                  [&](acc_t(&gv)[U][kVec], int64_t j, int64_t stride, bool) {
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                      acc_t yv[kVec];
                      load_piece(y + off, j + u * stride, len, vectorized, acc_t(0), yv);
#pragma unroll
                      for (int e = 0; e < kVec; ++e) dot += log ? gv[u][e] : gv[u][e] * yv[e];
                    }
                  });
    dot = row_reduce(dot, lanes, scratch, SumOp{});
    map_row<U>(gx + off, {g + off, y + off}, len, lane, lanes, vectorized,
               [&](int64_t, acc_t gv, acc_t yv) { return softmax_grad<T>(gv, yv, dot, log); });
  });
}

template <typename T>
__global__ void softmax_backward_columns_kernel(T* gx, const T* g, const T* y, int64_t outer, int64_t n, int64_t inner,
                                                int64_t tiles, bool log) {
  using acc_t = opmath_t<T>;
  __shared__ acc_t scratch[kColumnBlock];
  for_each_column(outer, n, inner, tiles, [&](int64_t, int64_t base, bool valid) {
    acc_t dot = 0;
    if (valid) {
      for (int64_t j = threadIdx.y; j < n; j += blockDim.y) {
        const acc_t gv = static_cast<acc_t>(g[base + j * inner]);
        dot += log ? gv : gv * static_cast<acc_t>(y[base + j * inner]);
      }
    }
    dot = block_reduce(dot, blockDim.x, scratch, SumOp{});
    if (!valid) return;
    for (int64_t j = threadIdx.y; j < n; j += blockDim.y) {
      const int64_t k = base + j * inner;
      gx[k] = static_cast<T>(softmax_grad<T>(static_cast<acc_t>(g[k]), static_cast<acc_t>(y[k]), dot, log));
    }
  });
}

void softmax_cuda(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_FLOATS(x.dtype(), "softmax", [&] {
    using T = scalar_t;
    T* o = out.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    if (inner > 1) {
      const ColumnLaunch l(outer, inner);
      softmax_columns_kernel<T><<<l.grid, l.block, 0, scope.stream()>>>(o, xp, outer, n, inner, l.tiles, log);
      RTX_CUDA_CHECK_LAUNCH();
      return;
    }
    const bool vec = rows_vectorizable<T>(n, o, xp);
    const std::vector<RegisterRows<T, 1>> holds = register_rows_spreads<T, 1>(n, kDefaultSpread);
    if (!holds.empty()) {
      const auto launch = [&](const RegisterRows<T, 1>& rr) {
        const RowLaunch l(outer, rr.lanes);
        with_fragments(rr, n, vec, [&](auto p, auto tiled) {
          softmax_rows_kernel<T, p, tiled><<<l.grid, l.block, 0, scope.stream()>>>(o, xp, outer, n, l.lanes, vec, log);
        });
      };
      const int choice = detail::tuned_row_choice(scope.device(), scope.stream(),
                                                  log ? "log_softmax_rows" : "softmax_rows", dtype_of_v<T>, outer, n,
                                                  static_cast<int>(holds.size()), 0, [&](int c) {
                                                    launch(holds[c]);
                                                    return true;
                                                  });
      launch(holds[choice]);
    } else {
      const RowLaunch l(outer, stream_lanes<T>(n));
      softmax_stream_kernel<T><<<l.grid, l.block, 0, scope.stream()>>>(o, xp, outer, n, l.lanes, vec, log);
    }
    RTX_CUDA_CHECK_LAUNCH();
  });
}

void softmax_backward_cuda(const Tensor& grad_x, const Tensor& g, const Tensor& out, int64_t outer, int64_t n,
                           int64_t inner, bool log) {
  detail::KernelScope scope(out.device());
  RTX_DISPATCH_FLOATS(out.dtype(), "softmax_backward", [&] {
    using T = scalar_t;
    T* gx = grad_x.data_ptr<T>();
    const T* gp = g.data_ptr<T>();
    const T* yp = out.data_ptr<T>();
    if (inner > 1) {
      const ColumnLaunch l(outer, inner);
      softmax_backward_columns_kernel<T>
          <<<l.grid, l.block, 0, scope.stream()>>>(gx, gp, yp, outer, n, inner, l.tiles, log);
      RTX_CUDA_CHECK_LAUNCH();
      return;
    }
    const bool vec = rows_vectorizable<T>(n, gx, gp, yp);
    const RegisterRows<T, 2> rr(n);
    if (rr.fits) {
      const RowLaunch l(outer, rr.lanes);
      with_fragments(rr, n, vec, [&](auto p, auto tiled) {
        softmax_backward_rows_kernel<T, p, tiled>
            <<<l.grid, l.block, 0, scope.stream()>>>(gx, gp, yp, outer, n, l.lanes, vec, log);
      });
    } else {
      const RowLaunch l(outer, stream_lanes<T>(n));
      softmax_backward_stream_kernel<T>
          <<<l.grid, l.block, 0, scope.stream()>>>(gx, gp, yp, outer, n, l.lanes, vec, log);
    }
    RTX_CUDA_CHECK_LAUNCH();
  });
}

// ---- embedding ----------------------------------------------------------------------------------

// Lanes per row for rows of `units` independent items: a group within a warp for short rows, up
// to a 256-thread block for long ones.
int lanes_for(int64_t units) {
  return static_cast<int>(std::min<int64_t>(pow2_ceil(std::max<int64_t>(units, 1)), 256));
}

// out row r = weight row idx[r] (zero for an index outside [0, num)), moved in units of U (whose
// size divides the row's bytes).
template <typename U, typename I>
__global__ void embedding_rows_kernel(U* out, const U* weight, const I* idx, int64_t k, int64_t num, int64_t units,
                                      int lanes) {
  for_each_row(k, lanes, [&](int64_t row, int lane) {
    if (row < 0) return;
    const int64_t v = static_cast<int64_t>(idx[row]);
    U* dst = out + row * units;
    if (v < 0 || v >= num) {
      for (int64_t j = lane; j < units; j += lanes) dst[j] = U{};
      return;
    }
    const U* src = weight + v * units;
    for (int64_t j = lane; j < units; j += lanes) dst[j] = src[j];
  });
}

// The widest unit (16, 8, 4, 2 or 1 bytes) that divides row_bytes and aligns both pointers.
template <typename F>
void with_copy_unit(size_t row_bytes, const void* a, const void* b, const F& f) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | row_bytes;
  if (bits % 16 == 0)
    f(uint4{});
  else if (bits % 8 == 0)
    f(uint2{});
  else if (bits % 4 == 0)
    f(uint32_t{});
  else if (bits % 2 == 0)
    f(uint16_t{});
  else
    f(uint8_t{});
}

void embedding_cuda(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  detail::KernelScope scope(weight.device());
  const int64_t k = indices.numel();
  const size_t row_bytes = static_cast<size_t>(weight.size(1)) * weight.element_size();
  RTX_DISPATCH_INDEX(indices.dtype(), "embedding", [&] {
    using I = scalar_t;
    with_copy_unit(row_bytes, out.data_ptr(), weight.data_ptr(), [&](auto unit) {
      using U = decltype(unit);
      const int64_t units = static_cast<int64_t>(row_bytes / sizeof(U));
      const RowLaunch l(k, lanes_for(units));
      embedding_rows_kernel<U, I><<<l.grid, l.block, 0, scope.stream()>>>(static_cast<U*>(out.data_ptr()),
                                                                          static_cast<const U*>(weight.data_ptr()),
                                                                          indices.data_ptr<I>(), k, weight.size(0),
                                                                          units, l.lanes);
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
}

// Sort keys: index << shift | position, so that sorted keys group the positions of each index in
// increasing order; padding keys and those of indices outside [0, num) (all ones) sort last.
template <typename I>
__global__ void embedding_keys_kernel(uint64_t* keys, const I* idx, int64_t k, int64_t num, int64_t padded, int shift) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < padded;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = i < k ? static_cast<int64_t>(idx[i]) : -1;
    keys[i] = v >= 0 && v < num ? (static_cast<uint64_t>(v) << shift) | static_cast<uint64_t>(i) : ~uint64_t{0};
  }
}

// Bitonic sort of 64-bit keys (a power-of-two count, a multiple of kSortTile): tiles of kSortTile
// keys are sorted and merged in shared memory by blocks of kSortTile / 2 threads; merge steps with
// strides of a tile or more run over global memory.
constexpr int kSortTile = 2048;

// One compare-exchange per thread of a shared tile, for the merge of bitonic sequences of `size`
// at `stride` (the sort direction of element i is ascending when (global i) & size is 0).
__device__ __forceinline__ void bitonic_tile_step(uint64_t* s, int64_t tile_base, int64_t size, int stride) {
  const int t = static_cast<int>(threadIdx.x);
  const int i = 2 * stride * (t / stride) + t % stride;
  const bool ascending = ((tile_base + i) & size) == 0;
  const uint64_t a = s[i], b = s[i + stride];
  if ((a > b) == ascending) {
    s[i] = b;
    s[i + stride] = a;
  }
}

// Sorts each tile (sizes 2 .. kSortTile), or with merge_size finishes the merge of sequences of
// merge_size over the strides below a tile.
__global__ void __launch_bounds__(kSortTile / 2) bitonic_tiles_kernel(uint64_t* keys, int64_t merge_size) {
  __shared__ uint64_t s[kSortTile];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kSortTile;
  s[threadIdx.x] = keys[base + threadIdx.x];
  s[threadIdx.x + kSortTile / 2] = keys[base + threadIdx.x + kSortTile / 2];
  if (merge_size == 0) {
    for (int size = 2; size <= kSortTile; size <<= 1) {
      for (int stride = size / 2; stride > 0; stride >>= 1) {
        __syncthreads();
        bitonic_tile_step(s, base, size, stride);
      }
    }
  } else {
    for (int stride = kSortTile / 2; stride > 0; stride >>= 1) {
      __syncthreads();
      bitonic_tile_step(s, base, merge_size, stride);
    }
  }
  __syncthreads();
  keys[base + threadIdx.x] = s[threadIdx.x];
  keys[base + threadIdx.x + kSortTile / 2] = s[threadIdx.x + kSortTile / 2];
}

__global__ void bitonic_global_kernel(uint64_t* keys, int64_t pairs, int64_t size, int log_stride) {
  const int64_t stride = int64_t{1} << log_stride;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < pairs;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = ((t >> log_stride) << (log_stride + 1)) | (t & (stride - 1));
    const bool ascending = (i & size) == 0;
    const uint64_t a = keys[i], b = keys[i + stride];
    if ((a > b) == ascending) {
      keys[i] = b;
      keys[i + stride] = a;
    }
  }
}

void sort_keys(uint64_t* keys, int64_t count, cudaStream_t stream) {
  const unsigned tiles = static_cast<unsigned>(count / kSortTile);
  bitonic_tiles_kernel<<<tiles, kSortTile / 2, 0, stream>>>(keys, 0);
  RTX_CUDA_CHECK_LAUNCH();
  for (int64_t size = 2 * kSortTile; size <= count; size <<= 1) {
    int log_stride = 0;
    while ((int64_t{1} << (log_stride + 1)) < size) ++log_stride;  // stride = size / 2
    for (; (int64_t{1} << log_stride) >= kSortTile; --log_stride) {
      bitonic_global_kernel<<<grid_stride_blocks(count / 2, kBlockSize), kBlockSize, 0, stream>>>(keys, count / 2, size,
                                                                                                  log_stride);
      RTX_CUDA_CHECK_LAUNCH();
    }
    bitonic_tiles_kernel<<<tiles, kSortTile / 2, 0, stream>>>(keys, size);
    RTX_CUDA_CHECK_LAUNCH();
  }
}

// The positions of each index in the sorted keys[0, k): [bounds[v], bounds[num + v]), left empty
// (zeros) for indices that do not occur; keys of all ones (padding, indices outside [0, num)) sort
// last and are skipped.
__global__ void embedding_bounds_kernel(int64_t* bounds, const uint64_t* keys, int64_t k, int64_t num, int shift) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < k;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t key = keys[p];
    if (key == ~uint64_t{0}) continue;
    const uint64_t v = key >> shift;
    if (p == 0 || (keys[p - 1] >> shift) != v) bounds[v] = p;
    if (p + 1 == k || (keys[p + 1] >> shift) != v) bounds[num + v] = p + 1;
  }
}

// Weight row v of the gradient: the gradient rows at the positions of index v, summed in position
// order (zero for padding_idx and for indices that do not occur).
template <typename T>
__global__ void embedding_backward_kernel(T* gw, const T* g, const uint64_t* keys, const int64_t* bounds, int64_t num,
                                          int64_t dim, int shift, int64_t padding_idx, int lanes) {
  using acc_t = opmath_t<T>;
  const uint64_t mask = (uint64_t{1} << shift) - 1;
  for_each_row(num, lanes, [&](int64_t v, int lane) {
    if (v < 0) return;
    const int64_t lo = v == padding_idx ? 0 : bounds[v], hi = v == padding_idx ? 0 : bounds[num + v];
    for (int64_t d = lane; d < dim; d += lanes) {
      acc_t acc = 0;
#pragma unroll 4
      for (int64_t p = lo; p < hi; ++p) acc += static_cast<acc_t>(g[static_cast<int64_t>(keys[p] & mask) * dim + d]);
      gw[v * dim + d] = static_cast<T>(acc);
    }
  });
}

// Bits needed for values 0 .. v - 1.
int bits_for(int64_t v) {
  int b = 0;
  while (b < 63 && (int64_t{1} << b) < v) ++b;
  return b;
}

void embedding_backward_cuda(const Tensor& grad_weight, const Tensor& g, const Tensor& indices,
                             std::optional<int64_t> padding_idx) {
  detail::KernelScope scope(g.device());
  const int64_t k = indices.numel(), num = grad_weight.size(0), dim = grad_weight.size(1);
  const int shift = std::max(1, bits_for(k));
  RTX_CHECK(bits_for(num) + shift <= 63, Error,
            "[embedding_backward] {} indices into {} embeddings exceed the 63-bit sort keys of the CUDA kernel", k,
            num);
  const int64_t padded = std::max<int64_t>(pow2_ceil(std::max<int64_t>(k, 1)), kSortTile);
  const Tensor keys_t = rtx::detail::make_tensor({padded}, kInt64, g.device());
  uint64_t* keys = static_cast<uint64_t*>(keys_t.data_ptr());
  RTX_DISPATCH_INDEX(indices.dtype(), "embedding_backward", [&] {
    embedding_keys_kernel<scalar_t><<<grid_stride_blocks(padded, kBlockSize), kBlockSize, 0, scope.stream()>>>(
        keys, indices.data_ptr<scalar_t>(), k, num, padded, shift);
    RTX_CUDA_CHECK_LAUNCH();
  });
  sort_keys(keys, padded, scope.stream());
  const Tensor bounds_t = rtx::detail::make_tensor({2, num}, kInt64, g.device());
  int64_t* bounds = bounds_t.data_ptr<int64_t>();
  RTX_CUDA_CHECK(cudaMemsetAsync(bounds, 0, static_cast<size_t>(bounds_t.nbytes()), scope.stream()));
  if (k > 0) {
    embedding_bounds_kernel<<<grid_stride_blocks(k, kBlockSize), kBlockSize, 0, scope.stream()>>>(bounds, keys, k, num,
                                                                                                   shift);
    RTX_CUDA_CHECK_LAUNCH();
  }
  RTX_DISPATCH_FLOATS(g.dtype(), "embedding_backward", [&] {
    const RowLaunch l(num, lanes_for(dim));
    embedding_backward_kernel<scalar_t>
        <<<l.grid, l.block, 0, scope.stream()>>>(grad_weight.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), keys, bounds,
                                                 num, dim, shift, padding_idx.value_or(-1), l.lanes);
    RTX_CUDA_CHECK_LAUNCH();
  });
}

// ---- index check, one-hot ----------------------------------------------------------------------

template <typename I>
__global__ void index_check_kernel(const I* idx, int64_t k, detail::DeviceCheck check, unsigned long long* fault) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < k;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (check.bad(static_cast<int64_t>(idx[i]))) detail::report_fault(fault, i);
}

kernels::IndexFault index_check_cuda(const Tensor& indices, const kernels::IndexCheck& check) {
  const int64_t k = indices.numel();
  detail::KernelScope scope(indices.device());
  const detail::IndexFaults fault(indices.device(), scope.stream());
  RTX_DISPATCH_INDEX(indices.dtype(), "index_check", [&] {
    index_check_kernel<scalar_t><<<grid_stride_blocks(k, kBlockSize), kBlockSize, 0, scope.stream()>>>(
        indices.data_ptr<scalar_t>(), k, detail::device_check(check), fault.word());
    RTX_CUDA_CHECK_LAUNCH();
  });
  return fault.finish(indices, check);
}

// Row r: 1 at column idx[r], zeros elsewhere (all zeros for an index outside [0, classes)).
__global__ void one_hot_rows_kernel(int64_t* out, const int64_t* idx, int64_t k, int64_t classes, int lanes) {
  for_each_row(k, lanes, [&](int64_t row, int lane) {
    if (row < 0) return;
    const int64_t t = idx[row];
    for (int64_t c = lane; c < classes; c += lanes) out[row * classes + c] = c == t ? 1 : 0;
  });
}

void one_hot_cuda(const Tensor& out, const Tensor& indices) {
  detail::KernelScope scope(out.device());
  const int64_t k = indices.numel(), classes = out.numel() / k;
  const RowLaunch l(k, lanes_for(classes));
  one_hot_rows_kernel<<<l.grid, l.block, 0, scope.stream()>>>(out.data_ptr<int64_t>(), indices.data_ptr<int64_t>(), k,
                                                              classes, l.lanes);
  RTX_CUDA_CHECK_LAUNCH();
}

}  // namespace

RTX_REGISTER_KERNELS(nn_cuda) { RTX_NN_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
