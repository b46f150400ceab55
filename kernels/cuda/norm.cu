// CUDA kernels of layer and batch normalization, forward and backward. Semantics follow
// src/backend/cpu/norm_cpu.cpp.
//
// layer_norm keeps each row in registers when it fits (one read, one write, two-pass statistics
// from the registers) and otherwise streams the row three times. Its weight and bias gradients,
// and every per-channel batch_norm statistic, are column sums over fixed chunks of rows combined in
// chunk order by a second kernel: deterministic without atomics. Where a row of the backward has a
// block of its own, that block also sums its rows' columns while it holds them (no second read of
// g and x); otherwise a column kernel reads them again.
#include <algorithm>
#include <vector>

#include "backend/cuda/tuner.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/cuda/rows.cuh"
#include "dispatch/norm.h"

namespace rtx::cuda {
namespace {

// Blocks a two-stage column or channel sum aims for (fixed, so results do not depend on the GPU).
constexpr int64_t kTargetBlocks = 1024;

// ---- layer norm ---------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ opmath_t<T> optional_at(const T* p, int64_t j, opmath_t<T> absent) {
  return p != nullptr ? static_cast<opmath_t<T>>(p[j]) : absent;
}

// Piece j of an optional parameter row: fill where the parameter is absent.
template <bool kWhole, typename T>
__device__ __forceinline__ void load_param_piece(const T* p, int j, int n, bool vectorized, opmath_t<T> fill,
                                                 opmath_t<T> (&v)[kVecOf<T>]) {
  if (p != nullptr) {
    load_piece<kWhole>(p, j, n, vectorized, fill, v);
  } else {
#pragma unroll
    for (int e = 0; e < kVecOf<T>; ++e) v[e] = fill;
  }
}

// Bounded to two blocks of kMaxRowBlock threads per multiprocessor (64 registers), so that a second
// row streams in while one is reduced; rows are held with spread kLayerNormSpread (fewer, fuller lanes)
// unless the tuner finds another spread faster for the shape.
constexpr int kLayerNormSpread = 2;
template <typename T, int P, bool kTiled>
__global__ void __launch_bounds__(kMaxRowBlock, 2)
    layer_norm_rows_kernel(T* out, opmath_t<T>* mean, opmath_t<T>* rstd, const T* x, const T* w, const T* b,
                           int64_t rows, int64_t n, int lanes, bool vectorized, opmath_t<T> eps) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  __shared__ acc_t scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int len = row < 0 ? 0 : static_cast<int>(n);
    const int64_t off = row < 0 ? 0 : row * n;
    RowFragment<T, P, kTiled> f;
    f.load(x + off, len, lane, lanes, vectorized);
    acc_t s = 0;
    f.for_each(len, lane, lanes, [&](int p, int e) { s += f.at(p, e); });
    const acc_t mu = row_reduce(s, lanes, scratch, SumOp{}) / static_cast<acc_t>(n);
    acc_t q = 0;
    f.for_each(len, lane, lanes, [&](int p, int e) { q += (f.at(p, e) - mu) * (f.at(p, e) - mu); });
    const acc_t r = acc_t(1) / sqrt_of<T>(row_reduce(q, lanes, scratch, SumOp{}) / static_cast<acc_t>(n) + eps);
    f.store(out + off, len, lane, lanes, vectorized, [&](int p, int j, acc_t(&o)[kVec]) {
      acc_t wv[kVec], bv[kVec];
      load_param_piece<kTiled>(w, j, len, vectorized, acc_t(1), wv);
      load_param_piece<kTiled>(b, j, len, vectorized, acc_t(0), bv);
#pragma unroll
      for (int e = 0; e < kVec; ++e) o[e] = (f.at(p, e) - mu) * r * wv[e] + bv[e];
    });
    if (row >= 0 && lane == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  });
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowBlock, kStreamBlocksPerSM)
    layer_norm_stream_kernel(T* out, opmath_t<T>* mean, opmath_t<T>* rstd, const T* x, const T* w, const T* b,
                             int64_t rows, int64_t n, int lanes, bool vectorized, opmath_t<T> eps) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  constexpr int U = kStreamPieces<T, 1>;
  using Piece = acc_t[U][kVec];
  __shared__ acc_t scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int64_t len = row < 0 ? 0 : n, off = row < 0 ? 0 : row * n;
    acc_t s = 0;
    stream_row<U>(x + off, len, lane, lanes, vectorized, acc_t(0), [&](Piece& v, int64_t, int64_t, bool) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < kVec; ++e) s += v[u][e];
    });
    const acc_t mu = row_reduce(s, lanes, scratch, SumOp{}) / static_cast<acc_t>(n);
    acc_t q = 0;
    stream_row<U>(x + off, len, lane, lanes, vectorized, acc_t(0), [&](Piece& v, int64_t j, int64_t stride, bool full) {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          if (full || j + u * stride + e < len) q += (v[u][e] - mu) * (v[u][e] - mu);
    });
    const acc_t r = acc_t(1) / sqrt_of<T>(row_reduce(q, lanes, scratch, SumOp{}) / static_cast<acc_t>(n) + eps);
    map_row<U>(out + off, {x + off}, len, lane, lanes, vectorized, [&](int64_t j, acc_t v) {
      return (v - mu) * r * optional_at(w, j, acc_t(1)) + optional_at(b, j, acc_t(0));
    });
    if (row >= 0 && lane == 0) {
      mean[row] = mu;
      rstd[row] = r;
    }
  });
}

// The input gradient of a row: rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)), gxhat = g * w,
// from the row sums s = (sum gxhat, sum gxhat * xhat).
template <typename T>
__device__ __forceinline__ opmath_t<T> layer_norm_grad(opmath_t<T> gh, opmath_t<T> xh, opmath_t<T> r,
                                                       const SumPair<opmath_t<T>>& s, opmath_t<T> n) {
  return r * (gh - s.a / n - xh * (s.b / n));
}

// kColumns: a block per row (lanes == blockDim.x) looping over the rows blockIdx.x + k * gridDim.x,
// each lane summing (g * xhat, g) of its columns over them; partial[blockIdx.x] gets the sums.
template <typename T, int P, bool kTiled, bool kColumns>
__global__ void __launch_bounds__(kMaxRowBlock)
    layer_norm_backward_rows_kernel(T* gx, SumPair<opmath_t<T>>* partial, const T* g, const T* x,
                                    const opmath_t<T>* mean, const opmath_t<T>* rstd, const T* w, int64_t rows,
                                    int64_t n, int lanes, bool vectorized) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  __shared__ SumPair<acc_t> scratch[kMaxBlockWarps];
  SumPair<acc_t> columns[kColumns ? P : 1][kColumns ? kVec : 1] = {};
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int len = row < 0 ? 0 : static_cast<int>(n);
    const int64_t off = row < 0 ? 0 : row * n;
    const acc_t mu = row < 0 ? acc_t(0) : mean[row], r = row < 0 ? acc_t(0) : rstd[row];
    RowFragment<T, P, kTiled> gf, xf;
    gf.load(g + off, len, lane, lanes, vectorized);
    xf.load(x + off, len, lane, lanes, vectorized);
    // gxhat = g * w and xhat = (x - mean) * rstd, element e of piece p (wv: w's piece).
    const auto gxhat = [&](int p, int e, const acc_t(&wv)[kVec]) { return gf.at(p, e) * wv[e]; };
    const auto xhat = [&](int p, int e) { return (xf.at(p, e) - mu) * r; };
    SumPair<acc_t> s{0, 0};
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = gf.first(p, lane, lanes);
      acc_t wv[kVec];
      load_param_piece<kTiled>(w, j, len, vectorized, acc_t(1), wv);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if (!kTiled && j + e >= len) continue;
        s.a += gxhat(p, e, wv);
        s.b += gxhat(p, e, wv) * xhat(p, e);
      }
    }
    if constexpr (kColumns) {
#pragma unroll
      for (int p = 0; p < P && row >= 0; ++p) {
        const int j = gf.first(p, lane, lanes);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          if (!kTiled && j + e >= len) continue;
          columns[p][e].a += gf.at(p, e) * xhat(p, e);
          columns[p][e].b += gf.at(p, e);
        }
      }
    }
    s = row_reduce(s, lanes, scratch, SumOp{});
    gf.store(gx + off, len, lane, lanes, vectorized, [&](int p, int j, acc_t(&o)[kVec]) {
      acc_t wv[kVec];
      load_param_piece<kTiled>(w, j, len, vectorized, acc_t(1), wv);
#pragma unroll
      for (int e = 0; e < kVec; ++e) o[e] = layer_norm_grad<T>(gxhat(p, e, wv), xhat(p, e), r, s, static_cast<acc_t>(n));
    });
  });
  if constexpr (kColumns) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = RowFragment<T, P, kTiled>::first(p, static_cast<int>(threadIdx.x), lanes);
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        if (j + e < n) partial[blockIdx.x * n + j + e] = columns[p][e];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowBlock, kStreamBlocksPerSM)
    layer_norm_backward_stream_kernel(T* gx, const T* g, const T* x, const opmath_t<T>* mean, const opmath_t<T>* rstd,
                                      const T* w, int64_t rows, int64_t n, int lanes, bool vectorized) {
  using acc_t = opmath_t<T>;
  constexpr int kVec = kVecOf<T>;
  constexpr int U = kStreamPieces<T, 2>;
  __shared__ SumPair<acc_t> scratch[kMaxBlockWarps];
  for_each_row(rows, lanes, [&](int64_t row, int lane) {
    const int64_t len = row < 0 ? 0 : n, off = row < 0 ? 0 : row * n;
    const acc_t mu = row < 0 ? acc_t(0) : mean[row], r = row < 0 ? acc_t(0) : rstd[row];
    SumPair<acc_t> s{0, 0};
    stream_row<U>(g + off, len, lane, lanes, vectorized, acc_t(0),
                  [&](acc_t(&gv)[U][kVec], int64_t j, int64_t stride, bool) {
#pragma unroll
                    for (int u = 0; u < U; ++u) {
                      acc_t xv[kVec];
                      load_piece(x + off, j + u * stride, len, vectorized, acc_t(0), xv);
#pragma unroll
                      for (int e = 0; e < kVec; ++e) {
                        const int64_t k = j + u * stride + e;
                        if (k >= len) continue;
                        const acc_t gh = gv[u][e] * optional_at(w, k, acc_t(1));
                        s.a += gh;
                        s.b += gh * ((xv[e] - mu) * r);
                      }
                    }
                  });
    s = row_reduce(s, lanes, scratch, SumOp{});
    map_row<U>(gx + off, {g + off, x + off}, len, lane, lanes, vectorized, [&](int64_t j, acc_t gv, acc_t xv) {
      return layer_norm_grad<T>(gv * optional_at(w, j, acc_t(1)), (xv - mu) * r, r, s, static_cast<acc_t>(n));
    });
  });
}

// Column sums of the weight and bias gradients over a chunk of rows: partial[chunk] holds
// (sum g * xhat, sum g) for every column. Blocks are 32 columns by kColumnRows rows.
constexpr int kColumnRows = 8;

template <typename T>
__global__ void layer_norm_param_partials_kernel(SumPair<opmath_t<T>>* partial, const T* g, const T* x,
                                                 const opmath_t<T>* mean, const opmath_t<T>* rstd, int64_t m, int64_t n,
                                                 int64_t rows_per_chunk) {
  using acc_t = opmath_t<T>;
  __shared__ SumPair<acc_t> scratch[kColumnRows * 32];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t first = blockIdx.y * rows_per_chunk, last = std::min(m, first + rows_per_chunk);
  SumPair<acc_t> s{0, 0};
  if (col < n) {
    for (int64_t i = first + threadIdx.y; i < last; i += kColumnRows) {
      const acc_t gv = static_cast<acc_t>(g[i * n + col]);
      s.a += gv * (static_cast<acc_t>(x[i * n + col]) - mean[i]) * rstd[i];
      s.b += gv;
    }
  }
  s = block_reduce(s, 32, scratch, SumOp{});
  if (threadIdx.y == 0 && col < n) partial[blockIdx.y * n + col] = s;
}

// The chunks' sums combined in a fixed order: blocks of 32 columns by kFinishRows threads, thread y
// summing chunks y, y + kFinishRows, ... before the block combines the kFinishRows sums.
constexpr int kFinishRows = 32;

template <typename T>
__global__ void layer_norm_param_finish_kernel(T* gw, T* gb, const SumPair<opmath_t<T>>* partial, int64_t chunks,
                                               int64_t n) {
  using acc_t = opmath_t<T>;
  __shared__ SumPair<acc_t> scratch[kFinishRows * 32];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  SumPair<acc_t> s{0, 0};
  if (col < n)
    for (int64_t c = threadIdx.y; c < chunks; c += kFinishRows) s = s + partial[c * n + col];
  s = block_reduce(s, 32, scratch, SumOp{});
  if (threadIdx.y != 0 || col >= n) return;
  if (gw != nullptr) gw[col] = static_cast<T>(s.a);
  if (gb != nullptr) gb[col] = static_cast<T>(s.b);
}

// A block of the backward that sums the columns takes kColumnChunkRows rows or more, and the chunks
// number few enough to keep their partial sums within kMaxPartialValues pairs.
constexpr int64_t kColumnChunkRows = 8;
constexpr int64_t kMaxPartialValues = int64_t{1} << 22;

template <typename T>
T* optional_ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

void layer_norm_cuda(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x, const Tensor& weight,
                     const Tensor& bias, int64_t m, int64_t n, double eps) {
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_FLOATS(x.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    using acc_t = opmath_t<T>;
    T* o = out.data_ptr<T>();
    acc_t* mp = mean.data_ptr<acc_t>();
    acc_t* rp = rstd.data_ptr<acc_t>();
    const T* xp = x.data_ptr<T>();
    const T* w = optional_ptr<T>(weight);
    const T* b = optional_ptr<T>(bias);
    const bool vec = rows_vectorizable<T>(n, o, xp, w, b);
    const std::vector<RegisterRows<T, 1>> holds = register_rows_spreads<T, 1>(n, kLayerNormSpread);
    if (!holds.empty()) {
      const auto launch = [&](const RegisterRows<T, 1>& rr) {
        const RowLaunch l(m, rr.lanes);
        with_fragments(rr, n, vec, [&](auto p, auto tiled) {
          layer_norm_rows_kernel<T, p, tiled><<<l.grid, l.block, 0, scope.stream()>>>(
              o, mp, rp, xp, w, b, m, n, l.lanes, vec, static_cast<acc_t>(eps));
        });
      };
      const int choice = detail::tuned_row_choice(scope.device(), scope.stream(), "layer_norm_rows", dtype_of_v<T>, m,
                                                  n, static_cast<int>(holds.size()), 0, [&](int c) {
                                                    launch(holds[c]);
                                                    return true;
                                                  });
      launch(holds[choice]);
    } else {
      const RowLaunch l(m, stream_lanes<T>(n));
      layer_norm_stream_kernel<T>
          <<<l.grid, l.block, 0, scope.stream()>>>(o, mp, rp, xp, w, b, m, n, l.lanes, vec, static_cast<acc_t>(eps));
    }
    RTX_CUDA_CHECK_LAUNCH();
  });
}

void layer_norm_backward_cuda(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                              const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t m,
                              int64_t n) {
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_FLOATS(x.dtype(), "layer_norm_backward", [&] {
    using T = scalar_t;
    using acc_t = opmath_t<T>;
    const T* gp = g.data_ptr<T>();
    const T* xp = x.data_ptr<T>();
    const acc_t* mp = mean.data_ptr<acc_t>();
    const acc_t* rp = rstd.data_ptr<acc_t>();
    const bool want_x = grad_x.defined() && grad_x.numel() > 0;
    const bool want_params = (grad_weight.defined() || grad_bias.defined()) && n > 0;
    if (want_params && m == 0) {  // sums over no rows
      for (const Tensor* t : {&grad_weight, &grad_bias})
        if (t->defined()) RTX_CUDA_CHECK(cudaMemsetAsync(t->data_ptr(), 0, t->nbytes(), scope.stream()));
    }
    if (m == 0 || (!want_x && !want_params)) return;
    const RegisterRows<T, 2> rr(n);
    // The row pass sums the columns too when a row has a block of its own and a lane's column sums
    // stay within 16 pairs of registers.
    const bool fused = want_x && want_params && rr.fits && rr.lanes > kWarpSize && rr.pieces * kVecOf<T> <= 16;
    Tensor partial_t;
    SumPair<acc_t>* partial = nullptr;
    int64_t chunks = 0;
    const auto make_partial = [&](int64_t count) {
      chunks = count;
      partial_t = rtx::detail::make_tensor({chunks, n, 2}, mean.dtype(), x.device());
      partial = static_cast<SumPair<acc_t>*>(partial_t.data_ptr());
    };
    if (want_x) {
      T* gx = grad_x.data_ptr<T>();
      const T* w = optional_ptr<T>(weight);
      const bool vec = rows_vectorizable<T>(n, gx, gp, xp, w);
      if (rr.fits) {
        RowLaunch l(m, rr.lanes);
        if (fused) {
          make_partial(std::min(ceil_div(m, kColumnChunkRows), std::max<int64_t>(1, kMaxPartialValues / n)));
          l.grid = static_cast<unsigned>(chunks);
        }
        with_fragments(rr, n, vec, [&](auto p, auto tiled) {
          const auto launch = [&](auto columns) {
            layer_norm_backward_rows_kernel<T, p, tiled, columns>
                <<<l.grid, l.block, 0, scope.stream()>>>(gx, partial, gp, xp, mp, rp, w, m, n, l.lanes, vec);
          };
          if (fused) launch(std::true_type{});
          else launch(std::false_type{});
        });
      } else {
        const RowLaunch l(m, stream_lanes<T>(n));
        layer_norm_backward_stream_kernel<T>
            <<<l.grid, l.block, 0, scope.stream()>>>(gx, gp, xp, mp, rp, w, m, n, l.lanes, vec);
      }
      RTX_CUDA_CHECK_LAUNCH();
    }
    if (!want_params) return;
    if (!fused) {
      const int64_t col_blocks = ceil_div(n, 32);
      const int64_t chunks0 = std::clamp<int64_t>(ceil_div(kTargetBlocks, col_blocks), 1, ceil_div(m, kColumnRows));
      const int64_t rows_per_chunk = ceil_div(m, chunks0);
      make_partial(ceil_div(m, rows_per_chunk));
      layer_norm_param_partials_kernel<T>
          <<<dim3(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks)), dim3(32, kColumnRows), 0,
             scope.stream()>>>(partial, gp, xp, mp, rp, m, n, rows_per_chunk);
      RTX_CUDA_CHECK_LAUNCH();
    }
    layer_norm_param_finish_kernel<T>
        <<<static_cast<unsigned>(ceil_div(n, 32)), dim3(32, kFinishRows), 0, scope.stream()>>>(
            optional_ptr<T>(grad_weight), optional_ptr<T>(grad_bias), partial, chunks, n);
    RTX_CUDA_CHECK_LAUNCH();
  });
}

// ---- batch norm ---------------------------------------------------------------------------------

// x as [batch, channels, spatial] for the per-channel kernels.
struct ChannelLayout {
  int64_t batch, channels, spatial;
  explicit ChannelLayout(const Tensor& x)
      : batch(x.size(0)), channels(x.size(1)), spatial(x.numel() == 0 ? 0 : x.numel() / (x.size(0) * x.size(1))) {}
  int64_t count() const { return batch * spatial; }
  int64_t numel() const { return batch * channels * spatial; }
};

// Per-channel sums of f(offset, channel) over chunks of the channel's batch * spatial elements: block
// (c, chunk) writes partial[c * chunks + chunk].
template <typename index_t, typename F>
__global__ void channel_partials_kernel(SumPair<typename F::acc_t>* partial, F f, index_t channels, index_t spatial,
                                        Divider<index_t> by_spatial, index_t count, index_t per_chunk) {
  using S = SumPair<typename F::acc_t>;
  __shared__ S scratch[kMaxBlockWarps];
  const index_t c = blockIdx.x;
  const index_t first = blockIdx.y * per_chunk, last = count - first < per_chunk ? count : first + per_chunk;
  S s{0, 0};
  for (index_t k = first + threadIdx.x; k < last; k += blockDim.x) {
    const index_t b = by_spatial.div(k);
    s = s + f((b * channels + c) * spatial + (k - b * spatial), c);
  }
  s = block_reduce(s, 1, scratch, SumOp{});
  if (threadIdx.x == 0) partial[static_cast<int64_t>(c) * gridDim.y + blockIdx.y] = s;
}

// f(c, total) for every channel with the chunk sums combined in chunk order.
template <typename F>
__global__ void channel_finish_kernel(const SumPair<typename F::acc_t>* partial, int64_t channels, int64_t chunks,
                                      F f) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < channels;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    SumPair<typename F::acc_t> s{0, 0};
    for (int64_t k = 0; k < chunks; ++k) s = s + partial[c * chunks + k];
    f(c, s);
  }
}

// out[i] = f(i, channel of i) over x's [batch, channels, spatial] layout.
template <typename index_t, typename T, typename F>
__global__ void channel_map_kernel(T* out, F f, index_t numel, Divider<index_t> by_spatial,
                                   Divider<index_t> by_channels) {
  for (index_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += gridDim.x * blockDim.x) {
    const index_t q = by_spatial.div(i);
    out[i] = static_cast<T>(f(i, q - by_channels.div(q) * by_channels.divisor()));
  }
}

// Sums every channel's f over its elements (two-stage, chunked as kTargetBlocks suggests) and hands
// each total to finish(c, total).
template <typename F, typename Finish>
void channel_sums(const ChannelLayout& l, const F& f, const Finish& finish, Device device, cudaStream_t stream) {
  using acc_t = typename F::acc_t;
  const int64_t count = l.count();
  const int64_t chunks0 = std::clamp<int64_t>(ceil_div(kTargetBlocks, l.channels), 1, ceil_div(count, 4 * kBlockSize));
  const int64_t per_chunk = ceil_div(count, chunks0), chunks = ceil_div(count, per_chunk);
  const Tensor partial_t = rtx::detail::make_tensor({l.channels, chunks, 2}, dtype_of<acc_t>::value, device);
  auto* partial = static_cast<SumPair<acc_t>*>(partial_t.data_ptr());
  with_index_type(l.numel(), [&](auto tag) {
    using index_t = decltype(tag);
    channel_partials_kernel<index_t, F>
        <<<dim3(static_cast<unsigned>(l.channels), static_cast<unsigned>(chunks)), kBlockSize, 0, stream>>>(
            partial, f, static_cast<index_t>(l.channels), static_cast<index_t>(l.spatial), Divider<index_t>(l.spatial),
            static_cast<index_t>(count), static_cast<index_t>(per_chunk));
  });
  RTX_CUDA_CHECK_LAUNCH();
  channel_finish_kernel<Finish>
      <<<grid_stride_blocks(l.channels, kBlockSize), kBlockSize, 0, stream>>>(partial, l.channels, chunks, finish);
  RTX_CUDA_CHECK_LAUNCH();
}

// out = f(i, c) over x's layout.
template <typename T, typename F>
void channel_map(const ChannelLayout& l, T* out, const F& f, cudaStream_t stream) {
  with_index_type(l.numel(), [&](auto tag) {
    using index_t = decltype(tag);
    channel_map_kernel<index_t, T, F><<<grid_stride_blocks(l.numel(), kBlockSize), kBlockSize, 0, stream>>>(
        out, f, static_cast<index_t>(l.numel()), Divider<index_t>(l.spatial), Divider<index_t>(l.channels));
  });
  RTX_CUDA_CHECK_LAUNCH();
}

// Channel sums of x, of (x - mean)^2.
template <typename T>
struct SumX {
  using acc_t = opmath_t<T>;
  const T* x;
  template <typename index_t>
  __device__ SumPair<acc_t> operator()(index_t i, index_t) const {
    return {static_cast<acc_t>(x[i]), acc_t(0)};
  }
};
template <typename T>
struct SumSquaredDeviation {
  using acc_t = opmath_t<T>;
  const T* x;
  const acc_t* mean;
  template <typename index_t>
  __device__ SumPair<acc_t> operator()(index_t i, index_t c) const {
    const acc_t d = static_cast<acc_t>(x[i]) - mean[c];
    return {d * d, acc_t(0)};
  }
};
// out[c] = total.a / count.
template <typename A>
struct StoreMean {
  using acc_t = A;
  A* out;
  A count;
  __device__ void operator()(int64_t c, const SumPair<A>& s) const { out[c] = s.a / count; }
};

template <typename T>
void batch_norm_stats_impl(const Tensor& mean, const Tensor& var, const Tensor& x, cudaStream_t stream) {
  using acc_t = opmath_t<T>;
  const ChannelLayout l(x);
  const acc_t count = static_cast<acc_t>(l.count());
  acc_t* mp = mean.data_ptr<acc_t>();
  channel_sums(l, SumX<T>{x.data_ptr<T>()}, StoreMean<acc_t>{mp, count}, x.device(), stream);
  channel_sums(l, SumSquaredDeviation<T>{x.data_ptr<T>(), mp}, StoreMean<acc_t>{var.data_ptr<acc_t>(), count},
               x.device(), stream);
}

// x * scale + shift per channel, scale = invstd * w, shift = b - mean * scale.
template <typename T>
struct ApplyNorm {
  using acc_t = opmath_t<T>;
  const T* x;
  const acc_t* mean;
  const acc_t* invstd;
  const T* w;
  const T* b;
  template <typename index_t>
  __device__ acc_t operator()(index_t i, index_t c) const {
    const acc_t scale = invstd[c] * optional_at(w, c, acc_t(1));
    const acc_t shift = optional_at(b, c, acc_t(0)) - mean[c] * scale;
    return static_cast<acc_t>(x[i]) * scale + shift;
  }
};

// Channel sums (g, g * xhat) of the backward.
template <typename T>
struct SumGradTerms {
  using acc_t = opmath_t<T>;
  const T* g;
  const T* x;
  const acc_t* mean;
  const acc_t* invstd;
  template <typename index_t>
  __device__ SumPair<acc_t> operator()(index_t i, index_t c) const {
    const acc_t gv = static_cast<acc_t>(g[i]);
    return {gv, gv * (static_cast<acc_t>(x[i]) - mean[c]) * invstd[c]};
  }
};
// The weight and bias gradients, and the coefficients of grad_x per channel: coef[c] = (scale, mean(g),
// mean(g * xhat)), the means zero for running statistics (constants).
template <typename T>
struct FinishGrad {
  using acc_t = opmath_t<T>;
  T* gw;
  T* gb;
  acc_t* coef;
  const acc_t* invstd;
  const T* w;
  acc_t count;
  bool batch_stats;
  __device__ void operator()(int64_t c, const SumPair<acc_t>& s) const {
    if (gw != nullptr) gw[c] = static_cast<T>(s.b);
    if (gb != nullptr) gb[c] = static_cast<T>(s.a);
    coef[3 * c] = invstd[c] * optional_at(w, c, acc_t(1));
    coef[3 * c + 1] = batch_stats ? s.a / count : acc_t(0);
    coef[3 * c + 2] = batch_stats ? s.b / count : acc_t(0);
  }
};
// grad_x = scale * (g - mean(g) - xhat * mean(g * xhat)).
template <typename T>
struct InputGrad {
  using acc_t = opmath_t<T>;
  const T* g;
  const T* x;
  const acc_t* mean;
  const acc_t* invstd;
  const acc_t* coef;
  template <typename index_t>
  __device__ acc_t operator()(index_t i, index_t c) const {
    const acc_t xh = (static_cast<acc_t>(x[i]) - mean[c]) * invstd[c];
    return coef[3 * c] * (static_cast<acc_t>(g[i]) - coef[3 * c + 1] - xh * coef[3 * c + 2]);
  }
};

template <typename T>
void batch_norm_backward_impl(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                              const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                              bool batch_stats, cudaStream_t stream) {
  using acc_t = opmath_t<T>;
  const ChannelLayout l(x);
  if (l.numel() == 0) {  // sums over no elements
    for (const Tensor* t : {&grad_weight, &grad_bias})
      if (t->defined() && t->numel() > 0) RTX_CUDA_CHECK(cudaMemsetAsync(t->data_ptr(), 0, t->nbytes(), stream));
    return;
  }
  const acc_t* mp = mean.data_ptr<acc_t>();
  const acc_t* ip = invstd.data_ptr<acc_t>();
  const Tensor coef_t = rtx::detail::make_tensor({l.channels, 3}, mean.dtype(), x.device());
  acc_t* coef = coef_t.data_ptr<acc_t>();
  channel_sums(l, SumGradTerms<T>{g.data_ptr<T>(), x.data_ptr<T>(), mp, ip},
               FinishGrad<T>{optional_ptr<T>(grad_weight), optional_ptr<T>(grad_bias), coef, ip,
                             optional_ptr<T>(weight), static_cast<acc_t>(l.count()), batch_stats},
               x.device(), stream);
  if (grad_x.defined())
    channel_map(l, grad_x.data_ptr<T>(), InputGrad<T>{g.data_ptr<T>(), x.data_ptr<T>(), mp, ip, coef}, stream);
}

void batch_norm_stats_cuda(const Tensor& mean, const Tensor& var, const Tensor& x) {
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_FLOATS(x.dtype(), "batch_norm", [&] { batch_norm_stats_impl<scalar_t>(mean, var, x, scope.stream()); });
}

void batch_norm_apply_cuda(const Tensor& out, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                           const Tensor& weight, const Tensor& bias) {
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_FLOATS(x.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    using acc_t = opmath_t<T>;
    channel_map(ChannelLayout(x), out.data_ptr<T>(),
                ApplyNorm<T>{x.data_ptr<T>(), mean.data_ptr<acc_t>(), invstd.data_ptr<acc_t>(), optional_ptr<T>(weight),
                             optional_ptr<T>(bias)},
                scope.stream());
  });
}

void batch_norm_backward_cuda(const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& g,
                              const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                              bool batch_stats) {
  detail::KernelScope scope(x.device());
  RTX_DISPATCH_FLOATS(x.dtype(), "batch_norm_backward", [&] {
    batch_norm_backward_impl<scalar_t>(grad_x, grad_weight, grad_bias, g, x, mean, invstd, weight, batch_stats,
                                       scope.stream());
  });
}

}  // namespace

RTX_REGISTER_KERNELS(norm_cuda) { RTX_NORM_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
