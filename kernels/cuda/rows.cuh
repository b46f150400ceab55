// Building blocks of the row-wise kernels of the nn and loss families (softmax, normalization,
// cross-entropy): how rows map to threads, rows held in registers or streamed in 128-bit pieces,
// the online softmax statistics, and index division for flattened layouts.
//
// A row kernel gives each row `lanes` threads, a power of two: a group within a warp (several rows
// per block, combined with shuffles) or the whole block (one row per block, combined through shared
// memory). Lane l of a row takes the 16-byte pieces l, l + lanes, l + 2 * lanes, ..., so that
// consecutive lanes touch consecutive memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/common/opmath.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/pointwise.cuh"

namespace rtx::cuda {

using rtx::detail::opmath_t;

// Elements of T in one 128-bit piece.
template <typename T>
constexpr int kVecOf = static_cast<int>(16 / sizeof(T));

// Largest block of a row kernel (one row per block); blocks of row groups have kGroupBlock threads.
constexpr int kMaxRowBlock = 512;
constexpr int kGroupBlock = 256;

// Pieces each lane of a streamed row has in flight when K inputs are read together (about 32
// values), and the blocks of kMaxRowBlock threads that streaming kernels keep resident per SM
// (bounding their registers) so that enough loads are in flight.
template <typename T, int K>
constexpr int kStreamPieces = std::clamp(32 / (kVecOf<T> * K), 1, 4);
constexpr int kStreamBlocksPerSM = 2;

// Smallest power of two >= v (v >= 1).
inline int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over `work` items, `per_block` at a time.
inline unsigned grid_stride_blocks(int64_t work, int64_t per_block) {
  return static_cast<unsigned>(std::clamp<int64_t>(ceil_div(work, per_block), 1, int64_t{1} << 16));
}

// Whether every pointer is 16-byte aligned and rows of n elements of T keep them so.
template <typename T, typename... P>
bool rows_vectorizable(int64_t n, const P*... ptrs) {
  return n % kVecOf<T> == 0 && ((reinterpret_cast<uintptr_t>(ptrs) % 16 == 0) && ...);
}

// The launch of a row kernel over `rows` rows with `lanes` threads each.
struct RowLaunch {
  int lanes = 1;
  int block = 1;
  unsigned grid = 1;
  RowLaunch(int64_t rows, int lanes_per_row)
      : lanes(lanes_per_row),
        block(lanes_per_row <= kWarpSize ? kGroupBlock : lanes_per_row),
        grid(static_cast<unsigned>(
            std::clamp<int64_t>(ceil_div(rows, block / lanes_per_row), 1, std::numeric_limits<int>::max()))) {}
};

// Most lanes of a streamed row: long rows take several steps per lane rather than more lanes, so
// that a multiprocessor streams many rows at once (their reductions overlap the others' loads).
constexpr int kMaxStreamLanes = 128;

// Lanes per row for streamed rows of n elements: just enough lanes for one step of
// kStreamPieces<T, 1> pieces, at most a warp when that suffices, at most kMaxStreamLanes.
template <typename T>
int stream_lanes(int64_t n) {
  const int64_t want = pow2_ceil(std::max<int64_t>(1, ceil_div(ceil_div(n, kVecOf<T>), kStreamPieces<T, 1>)));
  if (want <= kWarpSize) return static_cast<int>(want);
  return static_cast<int>(std::clamp<int64_t>(want, 2 * kWarpSize, kMaxStreamLanes));
}

// The spread a row kernel holds its rows with unless it says otherwise (or the tuner finds better).
constexpr int kDefaultSpread = 4;

// How rows of n elements are held in registers by a kernel keeping kFragments values per element:
// `lanes` threads per row with `pieces` 16-byte pieces each, a power of two up to kMaxPieces (32
// registers of stored values per fragment set). Rows get more lanes rather than more pieces
// (kMaxPieces / spread each, more only for the longest rows) so that register use stays moderate and
// several blocks fit an SM; a kernel whose register budget is bounded by its launch can take a
// smaller spread. fits is false for rows too long to hold.
template <typename T, int kFragments>
struct RegisterRows {
  static constexpr int kMaxPieces =
      std::max<int>(1, std::min<int>(8, 128 / static_cast<int>(sizeof(T) * kVecOf<T> * kFragments)));
  int lanes = 1;
  int pieces = 1;
  bool fits = false;
  explicit RegisterRows(int64_t n, int spread = kDefaultSpread) {
    const int64_t nv = std::max<int64_t>(1, ceil_div(n, kVecOf<T>));
    const int64_t share = std::max(1, kMaxPieces / spread);
    const int64_t l = nv <= kWarpSize * share
                          ? std::min<int64_t>(kWarpSize, pow2_ceil(nv))
                          : std::clamp<int64_t>(pow2_ceil(ceil_div(nv, share)), 2 * kWarpSize, kMaxRowBlock);
    const int64_t p = pow2_ceil(ceil_div(nv, l));
    lanes = static_cast<int>(l);
    pieces = static_cast<int>(std::min<int64_t>(p, kMaxPieces));
    fits = p <= kMaxPieces;
  }
};

// The distinct ways of holding rows of n elements over the spreads 1 to 8, the built-in `spread`'s
// first: a row kernel's candidates for the tuner (backend/cuda/tuner.h). Empty when rows do not fit.
template <typename T, int kFragments>
std::vector<RegisterRows<T, kFragments>> register_rows_spreads(int64_t n, int spread) {
  std::vector<RegisterRows<T, kFragments>> holds;
  for (int s : {spread, 1, 2, 4, 8}) {
    const RegisterRows<T, kFragments> rr(n, s);
    const bool seen = std::any_of(holds.begin(), holds.end(), [&](const RegisterRows<T, kFragments>& h) {
      return h.lanes == rr.lanes && h.pieces == rr.pieces;
    });
    if (rr.fits && !seen) holds.push_back(rr);
  }
  return holds;
}

// f(std::integral_constant<int, P>{}, std::bool_constant<kTiled>{}) for the rows of n elements that
// rr holds: P = rr.pieces, and kTiled when the rows are vectorized and exactly rr.lanes * P whole
// pieces long (see RowFragment).
template <typename T, int kFragments, int P = 1, typename F>
void with_fragments(const RegisterRows<T, kFragments>& rr, int64_t n, bool vectorized, const F& f) {
  if (rr.pieces == P) {
    if (vectorized && n == static_cast<int64_t>(rr.lanes) * P * kVecOf<T>)
      f(std::integral_constant<int, P>{}, std::true_type{});
    else
      f(std::integral_constant<int, P>{}, std::false_type{});
  } else if constexpr (P < RegisterRows<T, kFragments>::kMaxPieces) {
    with_fragments<T, kFragments, 2 * P>(rr, n, vectorized, f);
  }
}

// The launch of a kernel over the columns of an [outer, n, inner] layout (inner > 1): blocks of
// kColumnBlock threads, threadIdx.x picking one of blockDim.x consecutive columns and threadIdx.y
// splitting the column's n elements.
constexpr int kColumnBlock = 256;
struct ColumnLaunch {
  dim3 block;
  unsigned grid = 1;
  int64_t tiles = 1;  // tiles of blockDim.x columns per outer index
  ColumnLaunch(int64_t outer, int64_t inner) {
    const int bx = static_cast<int>(std::min<int64_t>(pow2_ceil(inner), kWarpSize));
    block = dim3(bx, kColumnBlock / bx);
    tiles = ceil_div(inner, bx);
    grid = grid_stride_blocks(outer * tiles, 1);
  }
};

// f(column, base, valid) for every column of an [outer, n, inner] layout taken by this thread:
// column = o * inner + i, base = o * n * inner + i the offset of its first element. The loop is
// uniform per block; threads past inner have valid false (they must still take part in reductions).
template <typename F>
__device__ __forceinline__ void for_each_column(int64_t outer, int64_t n, int64_t inner, int64_t tiles, const F& f) {
  for (int64_t tile = blockIdx.x; tile < outer * tiles; tile += gridDim.x) {
    const int64_t o = tile / tiles;
    const int64_t i = (tile - o * tiles) * blockDim.x + threadIdx.x;
    f(o * inner + i, o * n * inner + i, i < inner);
  }
}

// f(row, lane) for every row of this thread's group; row is -1 for the groups of the last step that
// have no row (they must still take part in the group's reductions). The loop is uniform per block.
template <typename F>
__device__ __forceinline__ void for_each_row(int64_t rows, int lanes, const F& f) {
  const int64_t per_block = blockDim.x / lanes;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  for (int64_t base = blockIdx.x * per_block; base < rows; base += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t row = base + threadIdx.x / lanes;
    f(row < rows ? row : int64_t{-1}, lane);
  }
}

// Loads the piece of a row starting at element j (elements past n read as fill). Vectorized rows
// are 16-byte aligned with a multiple of kVecOf<T> elements; kWhole: the piece is known to be a
// whole one of a vectorized row.
template <bool kWhole = false, typename T, typename index_t>
__device__ __forceinline__ void load_piece(const T* row, index_t j, index_t n, bool vectorized, opmath_t<T> fill,
                                           opmath_t<T> (&v)[kVecOf<T>]) {
  constexpr int kVec = kVecOf<T>;
  if (kWhole || (vectorized && j < n)) {
    const Packed<T, kVec> p = *reinterpret_cast<const Packed<T, kVec>*>(row + j);
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = static_cast<opmath_t<T>>(p.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = j + e < n ? static_cast<opmath_t<T>>(row[j + e]) : fill;
  }
}

// Stores the elements of the piece starting at element j that lie inside the row (kWhole: as
// load_piece).
template <bool kWhole = false, typename T, typename index_t>
__device__ __forceinline__ void store_piece(T* row, index_t j, index_t n, bool vectorized,
                                            const opmath_t<T> (&v)[kVecOf<T>]) {
  constexpr int kVec = kVecOf<T>;
  if (kWhole || (vectorized && j < n)) {
    Packed<T, kVec> p;
#pragma unroll
    for (int e = 0; e < kVec; ++e) p.v[e] = static_cast<T>(v[e]);
    *reinterpret_cast<Packed<T, kVec>*>(row + j) = p;
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e)
      if (j + e < n) row[j + e] = static_cast<T>(v[e]);
  }
}

// The P pieces of a row that one lane holds in registers, kept in the storage type and read in the
// opmath type (intermediate results are recomputed from them rather than held). Rows held in
// registers are short (a block's worth of pieces), so positions within them are ints.
//
// kTiled: the rows are vectorized and exactly lanes * P pieces long (see with_fragments), so every
// piece is whole and no element needs a test; a group without a row (n == 0) reads in-bounds
// memory (its caller points it at row 0) and stores nothing.
template <typename T, int P, bool kTiled = false>
struct RowFragment {
  static constexpr int kVec = kVecOf<T>;
  using acc_t = opmath_t<T>;
  Packed<T, kVec> raw[P];

  // First element of piece p of this lane.
  static __device__ __forceinline__ int first(int p, int lane, int lanes) { return (p * lanes + lane) * kVec; }
  __device__ __forceinline__ acc_t at(int p, int e) const { return static_cast<opmath_t<T>>(raw[p].v[e]); }

  // Elements past n read as zero (they are never visited or stored).
  __device__ __forceinline__ void load(const T* row, int n, int lane, int lanes, bool vectorized) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = first(p, lane, lanes);
      if (kTiled || (vectorized && j < n)) {
        raw[p] = *reinterpret_cast<const Packed<T, kVec>*>(row + j);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) raw[p].v[e] = j + e < n ? row[j + e] : T();
      }
    }
  }
  // f(p, e) for every held element inside the row (one test per piece unless it straddles the end).
  template <typename F>
  __device__ __forceinline__ void for_each(int n, int lane, int lanes, const F& f) const {
    const auto each = [&] {
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int e = 0; e < kVec; ++e) f(p, e);
    };
    if constexpr (kTiled) {
      each();
    } else if (first(P - 1, lane, lanes) + kVec <= n) {  // every piece inside the row: no tests
      each();
    } else {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const int j = first(p, lane, lanes);
#pragma unroll
        for (int e = 0; e < kVec; ++e)
          if (j + kVec <= n || j + e < n) f(p, e);
      }
    }
  }
  // Writes this lane's pieces of an output row: f(p, j, o) fills o with the values of piece p, whose
  // first element is j; the elements inside the row are stored.
  template <typename F>
  __device__ __forceinline__ void store(T* row, int n, int lane, int lanes, bool vectorized, const F& f) const {
    if (kTiled && n == 0) return;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int j = first(p, lane, lanes);
      acc_t o[kVec];
      f(p, j, o);
      store_piece<kTiled>(row, j, n, vectorized, o);
    }
  }
};

// Streams this lane's pieces of a row U at a time: f(v, j, stride, full) with v[u][e] the element
// j + u * stride + e (fill past n) and full whether all of them lie inside the row.
template <int U, typename T, typename F>
__device__ __forceinline__ void stream_row(const T* row, int64_t n, int lane, int lanes, bool vectorized,
                                           opmath_t<T> fill, const F& f) {
  constexpr int kVec = kVecOf<T>;
  const int64_t stride = static_cast<int64_t>(lanes) * kVec;
  for (int64_t j = static_cast<int64_t>(lane) * kVec; j < n; j += U * stride) {
    opmath_t<T> v[U][kVec];
#pragma unroll
    for (int u = 0; u < U; ++u) load_piece(row, j + u * stride, n, vectorized, fill, v[u]);
    f(v, j, stride, j + (U - 1) * stride + kVec <= n);
  }
}

// out[j] = f(j, in[0][j], ..., in[K - 1][j]) over this lane's elements of a row, pieces taken U at
// a time like stream_row.
template <int U, typename T, int K, typename F>
__device__ __forceinline__ void map_row(T* out, const T* const (&in)[K], int64_t n, int lane, int lanes,
                                        bool vectorized, const F& f) {
  static_assert(K == 1 || K == 2, "map_row takes one or two inputs");
  constexpr int kVec = kVecOf<T>;
  using acc_t = opmath_t<T>;
  const int64_t stride = static_cast<int64_t>(lanes) * kVec;
  for (int64_t j = static_cast<int64_t>(lane) * kVec; j < n; j += U * stride) {
    acc_t v[K][U][kVec];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int u = 0; u < U; ++u) load_piece(in[k], j + u * stride, n, vectorized, acc_t(0), v[k][u]);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if constexpr (K == 1)
          v[0][u][e] = f(j + u * stride + e, v[0][u][e]);
        else
          v[0][u][e] = f(j + u * stride + e, v[0][u][e], v[1][u][e]);
      }
      store_piece(out, j + u * stride, n, vectorized, v[0][u]);
    }
  }
}

// exp, log and sqrt in the opmath type of T. The 16-bit floats use the base-2 hardware exponential,
// whose error is far below their rounding; float and double use the accurate functions.
template <typename T>
__device__ __forceinline__ opmath_t<T> exp_of(opmath_t<T> x) {
  if constexpr (sizeof(T) == 2) {
    return exp2f(x * 1.4426950408889634f);
  } else if constexpr (sizeof(T) == 4) {
    return expf(x);
  } else {
    return ::exp(x);
  }
}
template <typename T>
__device__ __forceinline__ opmath_t<T> log_of(opmath_t<T> x) {
  if constexpr (sizeof(opmath_t<T>) == 4) {
    return logf(x);
  } else {
    return ::log(x);
  }
}

template <typename T>
__device__ __forceinline__ opmath_t<T> sqrt_of(opmath_t<T> x) {
  if constexpr (sizeof(opmath_t<T>) == 4) {
    return sqrtf(x);
  } else {
    return ::sqrt(x);
  }
}

template <typename T>
__device__ __forceinline__ opmath_t<T> neg_inf() {
  return -std::numeric_limits<opmath_t<T>>::infinity();
}

// Softmax statistics of the values seen so far, combinable in any grouping: max (NaN ignored, -inf
// when none), sum of exp(x - max), and for label smoothing dev = sum of w * (max - x) and weight =
// sum of w. Like the CPU kernels, a NaN or +inf makes sum NaN, and a slice of only -inf has max -inf
// (so its outputs are NaN).
template <typename T>
struct SoftmaxStats {
  using acc_t = opmath_t<T>;
  acc_t max, sum, dev, weight;

  static __device__ __forceinline__ SoftmaxStats empty() { return {neg_inf<T>(), acc_t(0), acc_t(0), acc_t(0)}; }

  // Moves max up to m (>= max), rescaling sum and dev.
  __device__ __forceinline__ void raise_max(acc_t m) {
    if (m == max) return;
    sum *= exp_of<T>(max - m);
    if (weight != acc_t(0)) dev += (m - max) * weight;
    max = m;
  }
  // Folds in K values with one rescale.
  template <int K>
  __device__ __forceinline__ void add(const acc_t* v) {
    acc_t m = max;
#pragma unroll
    for (int k = 0; k < K; ++k) m = v[k] > m ? v[k] : m;
    raise_max(m);
    if (m == neg_inf<T>()) {
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (v[k] != v[k]) sum = v[k];
      return;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) sum += exp_of<T>(v[k] - m);
  }
  // Folds w * (max - x) into dev for a value x already added.
  __device__ __forceinline__ void add_weighted(acc_t x, acc_t w) {
    if (max != neg_inf<T>()) dev += w * (max - x);
    weight += w;
  }
  static __device__ __forceinline__ SoftmaxStats merge(SoftmaxStats a, SoftmaxStats b) {
    const acc_t m = b.max > a.max ? b.max : a.max;
    a.raise_max(m);
    b.raise_max(m);
    return {m, a.sum + b.sum, a.dev + b.dev, a.weight + b.weight};
  }
  // log(sum): the log-sum-exp is max + log_sum().
  __device__ __forceinline__ acc_t log_sum() const { return log_of<T>(sum); }
};

template <typename T>
struct MergeStats {
  __device__ __forceinline__ SoftmaxStats<T> operator()(const SoftmaxStats<T>& a, const SoftmaxStats<T>& b) const {
    return SoftmaxStats<T>::merge(a, b);
  }
};

// Division by a fixed divisor for flattened index math: multiply-shift for 32-bit indices (values
// and divisor below 2^31), plain division for 64-bit ones.
template <typename index_t>
struct Divider;
template <>
struct Divider<uint32_t> {
  IntDivider d;
  explicit Divider(int64_t v) : d(static_cast<uint32_t>(v)) {}
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return d.div(n); }
  __device__ __forceinline__ uint32_t divisor() const { return d.divisor; }
};
template <>
struct Divider<int64_t> {
  int64_t d;
  explicit Divider(int64_t v) : d(v) {}
  __device__ __forceinline__ int64_t div(int64_t n) const { return n / d; }
  __device__ __forceinline__ int64_t divisor() const { return d; }
};

// f(index_t{}) with uint32_t when every index is below `bound` < 2^31, int64_t otherwise.
template <typename F>
void with_index_type(int64_t bound, const F& f) {
  if (bound < (int64_t{1} << 31))
    f(uint32_t{});
  else
    f(int64_t{});
}

}  // namespace rtx::cuda
