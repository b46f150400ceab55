// CUDA kernels of the sorting family (sort, topk) and the device-wide radix sort the other families
// share. Every value maps to an unsigned key whose ascending order is the op's order (NaN largest,
// -0 equal to +0, bits flipped for descending), and ties keep their positions, so each row comes out
// exactly as the CPU's stable sort. Rows of up to 4096 elements are sorted in shared memory, several
// rows per block, by a bitonic network over (key, position) pairs (a total order, hence stable);
// longer rows go through CUB's stable radix sort with the row number in the key's high bits. The
// sorted positions then fetch the values from x, so values keep their exact bits. topk is the
// sorted first k of the same order; on long rows with k up to 1024 it keeps the first k of every
// 4096-element chunk, then of every chunk of those candidates, until one tile holds a row's.
#include <algorithm>
#include <type_traits>

#include "core/dtype_dispatch.h"
#include "kernels/cuda/sort.cuh"
#include "dispatch/sort.h"

#include RTX_CUB_HEADER

namespace rtx::cuda {

namespace {

template <typename K, typename V>
void radix_sort_pairs_impl(SortBuffers<K>& keys, SortBuffers<V>& values, int64_t n, int end_bit, Device device,
                           cudaStream_t stream) {
  if (n <= 1) return;
  rtx_cub::DoubleBuffer<K> k(keys.current, keys.alternate);
  rtx_cub::DoubleBuffer<V> v(values.current, values.alternate);
  size_t bytes = 0;
  RTX_CUDA_CHECK(rtx_cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, end_bit, stream));
  const Tensor temp = rtx::detail::make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, device);
  RTX_CUDA_CHECK(rtx_cub::DeviceRadixSort::SortPairs(temp.data_ptr(), bytes, k, v, n, 0, end_bit, stream));
  keys = {k.Current(), k.Alternate()};
  values = {v.Current(), v.Alternate()};
}

}  // namespace

void radix_sort_pairs(SortBuffers<uint64_t>& keys, SortBuffers<uint32_t>& values, int64_t n, int end_bit,
                      Device device, cudaStream_t stream) {
  radix_sort_pairs_impl(keys, values, n, end_bit, device, stream);
}

void radix_sort_pairs(SortBuffers<uint64_t>& keys, SortBuffers<uint64_t>& values, int64_t n, int end_bit,
                      Device device, cudaStream_t stream) {
  radix_sort_pairs_impl(keys, values, n, end_bit, device, stream);
}

namespace {

// ---- keys -------------------------------------------------------------------------------------------

// Order-preserving unsigned key of T's values: kBits wide, ascending key order = ascending value
// order with every NaN equal and largest, -0 equal to +0.
template <typename T>
struct SortKey;

// IEEE formats: flip every bit of negatives and the sign bit of positives.
template <typename Bits, int kNumBits, Bits kAbsMask, Bits kInf>
struct FloatKey {
  static constexpr int kBits = kNumBits;
  __device__ static uint64_t of(Bits b) {
    const Bits sign = Bits{1} << (kNumBits - 1);
    const Bits mag = b & kAbsMask;
    if (mag > kInf) return (uint64_t{2} << (kNumBits - 1)) - 1;  // NaN: all ones
    if (mag == 0) return sign;                                    // +0 and -0
    return (b & sign) ? static_cast<Bits>(~b) : static_cast<Bits>(b | sign);
  }
};

template <>
struct SortKey<float> : FloatKey<uint32_t, 32, 0x7fffffffu, 0x7f800000u> {
  __device__ static uint64_t key(float v) { return of(__float_as_uint(v)); }
};
template <>
struct SortKey<double> : FloatKey<uint64_t, 64, 0x7fffffffffffffffull, 0x7ff0000000000000ull> {
  __device__ static uint64_t key(double v) { return of(static_cast<uint64_t>(__double_as_longlong(v))); }
};
template <>
struct SortKey<Half> : FloatKey<uint16_t, 16, 0x7fff, 0x7c00> {
  __device__ static uint64_t key(Half v) { return of(v.bits); }
};
template <>
struct SortKey<BFloat16> : FloatKey<uint16_t, 16, 0x7fff, 0x7f80> {
  __device__ static uint64_t key(BFloat16 v) { return of(v.bits); }
};

// Integers: the sign bit flipped (signed) or the value itself (unsigned, bool).
template <typename T>
struct SortKey {
  static_assert(std::is_integral_v<T>, "integer or floating sort keys");
  static constexpr int kBits = std::is_same_v<T, bool> ? 8 : static_cast<int>(sizeof(T) * 8);
  __device__ static uint64_t key(T v) {
    using U = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;
    const uint64_t u = static_cast<U>(v);
    if constexpr (std::is_signed_v<T>) return u ^ (uint64_t{1} << (kBits - 1));
    else return u;
  }
};

// The key of v for the requested direction (descending: the bits of the ascending key flipped).
template <typename T>
__device__ __forceinline__ uint64_t directed_key(T v, bool descending) {
  constexpr int kBits = SortKey<T>::kBits;
  const uint64_t mask = kBits == 64 ? ~uint64_t{0} : (uint64_t{1} << kBits) - 1;
  const uint64_t k = SortKey<T>::key(v);
  return descending ? (~k & mask) : k;
}

// ---- rows -------------------------------------------------------------------------------------------

// The operands of a row sort: x's rows along dim, and the first `keep` sorted elements of each row
// written to values and indices. Strides along dim in bytes.
struct RowSort {
  const char* x;
  char* values;
  char* indices;
  int64_t n, keep, rows;
  int64_t xs, vs, is;
  bool descending;
  OffsetCalculator<3, int64_t> calc;  // row offsets of values, indices, x
};

RowSort make_row_sort(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, int64_t keep,
                      bool descending) {
  RowSort s;
  s.x = static_cast<const char*>(x.data_ptr());
  s.values = static_cast<char*>(values.data_ptr());
  s.indices = static_cast<char*>(indices.data_ptr());
  s.n = x.size(dim);
  s.keep = keep;
  s.rows = x.numel() / s.n;
  s.xs = x.stride(dim) * static_cast<int64_t>(x.element_size());
  s.vs = values.stride(dim) * static_cast<int64_t>(values.element_size());
  s.is = indices.stride(dim) * static_cast<int64_t>(sizeof(int64_t));
  s.descending = descending;
  s.calc = row_offsets<3>(x.sizes(), dim, {&values, &indices, &x});
  return s;
}

// Writes sorted element j of a row: the value at position pos of x's row, and pos.
template <typename T>
__device__ __forceinline__ void write_sorted(const RowSort& s, const int64_t (&off)[3], int64_t j, int64_t pos) {
  *reinterpret_cast<T*>(s.values + off[0] + j * s.vs) = *reinterpret_cast<const T*>(s.x + off[2] + pos * s.xs);
  *reinterpret_cast<int64_t*>(s.indices + off[1] + j * s.is) = pos;
}

// ---- short rows and chunks: bitonic sort in shared memory ---------------------------------------------

constexpr int kLogTileMax = 12;
constexpr int kTileMax = 1 << kLogTileMax;  // longest run sorted in shared memory
constexpr int kBlockElements = 2048;        // elements per block when runs are shorter
constexpr int kRunsPerBlockMax = 128;
constexpr int kSortThreads = 512;
constexpr uint16_t kPadPosition = 0xffff;

// Candidates of a topk pass: the first `keep` (key, position in x's row) pairs of every chunk of
// kTileMax, `per_row` per row, contiguous. A chunk with fewer elements than keep is padded with keys
// that rank last; pads only ever end a row, so they are never among the k first.
struct Candidates {
  uint64_t* keys;
  int64_t* positions;
  int64_t per_row;
};

// A run of a block sort, in shared memory.
struct Run {
  int64_t off[3];  // row offsets of values, indices, x
  int64_t row, start;
  int len;
};

// One block sorts runs_per_block runs, each padded to tile = 2^log_tile elements. A run is chunk c
// (kTileMax elements from c * kTileMax) of a row of `len` elements: `chunks` runs per row. The
// elements come from x (kFromX) or from the candidates `in`; the first `keep` sorted ones of each run
// go to values and indices (kFinal, one run per row) or to the candidates `out`. Ties rank by
// position in the run, which orders them as in x's row in either case. K holds the keys (32 bits for
// types up to 32 bits wide).
template <typename T, typename K, bool kFromX, bool kFinal>
__global__ void __launch_bounds__(kSortThreads)
    block_sort_kernel(RowSort s, Candidates in, Candidates out, int64_t len, int64_t chunks, int64_t keep,
                      int log_tile, int runs_per_block) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int tile = 1 << log_tile;
  const int elements = tile * runs_per_block;
  Run* runs = reinterpret_cast<Run*>(smem);
  K* keys = reinterpret_cast<K*>(smem + sizeof(Run) * kRunsPerBlockMax);
  uint16_t* pos = reinterpret_cast<uint16_t*>(keys + elements);
  const int64_t first_run = static_cast<int64_t>(blockIdx.x) * runs_per_block;
  const int64_t total_runs = s.rows * chunks;

  for (int r = threadIdx.x; r < runs_per_block; r += blockDim.x) {
    const int64_t g = first_run + r;
    if (g >= total_runs) continue;
    Run& run = runs[r];
    run.row = g / chunks;
    run.start = (g - run.row * chunks) << kLogTileMax;
    run.len = static_cast<int>(len - run.start < kTileMax ? len - run.start : kTileMax);
    if constexpr (kFromX || kFinal) s.calc.offsets(run.row, run.off);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < elements; e += blockDim.x) {
    const int r = e >> log_tile, j = e & (tile - 1);
    if (first_run + r < total_runs && j < runs[r].len) {
      const Run& run = runs[r];
      if constexpr (kFromX) {
        const T v = *reinterpret_cast<const T*>(s.x + run.off[2] + (run.start + j) * s.xs);
        keys[e] = static_cast<K>(directed_key(v, s.descending));
      } else {
        keys[e] = static_cast<K>(in.keys[run.row * in.per_row + run.start + j]);
      }
      pos[e] = static_cast<uint16_t>(j);
    } else {
      keys[e] = ~K{0};  // after every real element, which all have smaller positions
      pos[e] = kPadPosition;
    }
  }
  __syncthreads();
  // Bitonic network over each tile: stage k merges runs of k/2 into runs of k; the last stage of a
  // tile sorts it ascending.
  for (int k = 2; k <= tile; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < elements / 2; i += blockDim.x) {
        const int a = ((i & ~(j - 1)) << 1) | (i & (j - 1));
        const int b = a | j;
        const bool ascending = ((a & (tile - 1)) & k) == 0;
        const K ka = keys[a], kb = keys[b];
        const uint16_t pa = pos[a], pb = pos[b];
        const bool a_after_b = ka > kb || (ka == kb && pa > pb);
        if (a_after_b == ascending) {
          keys[a] = kb;
          keys[b] = ka;
          pos[a] = pb;
          pos[b] = pa;
        }
      }
      __syncthreads();
    }
  }
  for (int e = threadIdx.x; e < elements; e += blockDim.x) {
    const int r = e >> log_tile, j = e & (tile - 1);
    if (first_run + r >= total_runs || j >= keep) continue;
    const Run& run = runs[r];
    int64_t x_pos = -1;
    if (j < run.len) {
      x_pos = run.start + pos[e];
      if constexpr (!kFromX) x_pos = in.positions[run.row * in.per_row + x_pos];
    }
    if constexpr (kFinal) {
      write_sorted<T>(s, run.off, j, x_pos);
    } else {
      const int64_t slot = run.row * out.per_row + (run.start >> kLogTileMax) * keep + j;
      out.keys[slot] = j < run.len ? static_cast<uint64_t>(keys[e]) : ~uint64_t{0};
      out.positions[slot] = x_pos;
    }
  }
}

// One pass of block_sort_kernel over rows of len elements (chunks of kTileMax when longer).
template <typename T, bool kFromX, bool kFinal>
void block_sort_pass(const RowSort& s, const Candidates& in, const Candidates& out, int64_t len, int64_t keep,
                     cudaStream_t stream) {
  using K = std::conditional_t<(SortKey<T>::kBits <= 32), uint32_t, uint64_t>;
  const int64_t chunks = (len + kTileMax - 1) / kTileMax;
  int log_tile = 0;
  while ((int64_t{1} << log_tile) < std::min<int64_t>(len, kTileMax)) ++log_tile;
  const int tile = 1 << log_tile;
  const int runs_per_block = std::max(1, std::min(kRunsPerBlockMax, kBlockElements / tile));
  const int elements = tile * runs_per_block;
  const size_t smem = sizeof(Run) * kRunsPerBlockMax + elements * (sizeof(K) + sizeof(uint16_t));
  const int64_t blocks = (s.rows * chunks + runs_per_block - 1) / runs_per_block;
  block_sort_kernel<T, K, kFromX, kFinal><<<static_cast<unsigned>(blocks), kSortThreads, smem, stream>>>(
      s, in, out, len, chunks, keep, log_tile, runs_per_block);
  RTX_CUDA_CHECK_LAUNCH();
}

// Rows of up to kTileMax elements: one pass.
template <typename T>
void block_sort(const RowSort& s, cudaStream_t stream) {
  block_sort_pass<T, true, true>(s, {}, {}, s.n, s.keep, stream);
}

// Candidates per chunk up to which a long-row topk selects in chunks instead of sorting whole rows.
constexpr int64_t kChunkedTopkMax = 1024;

// topk of long rows: the first `keep` of every chunk of kTileMax, then of every chunk of those
// candidates, until a row's candidates fit one tile, whose first `keep` are the result.
template <typename T>
void chunked_topk(const RowSort& s, Device device, cudaStream_t stream) {
  auto candidates = [&](int64_t len, Tensor& keys, Tensor& positions) {
    const int64_t per_row = (len + kTileMax - 1) / kTileMax * s.keep;
    keys = scratch<uint64_t>(s.rows * per_row, device);
    positions = scratch<int64_t>(s.rows * per_row, device);
    return Candidates{static_cast<uint64_t*>(keys.data_ptr()), static_cast<int64_t*>(positions.data_ptr()), per_row};
  };
  Tensor keys, positions, next_keys, next_positions;
  Candidates c = candidates(s.n, keys, positions);
  block_sort_pass<T, true, false>(s, {}, c, s.n, s.keep, stream);
  while (c.per_row > kTileMax) {
    const Candidates next = candidates(c.per_row, next_keys, next_positions);
    block_sort_pass<T, false, false>(s, c, next, c.per_row, s.keep, stream);
    c = next;
    std::swap(keys, next_keys);
    std::swap(positions, next_positions);
  }
  block_sort_pass<T, false, true>(s, c, {}, c.per_row, s.keep, stream);
}

// ---- long rows: device-wide radix sort ------------------------------------------------------------

constexpr int kRowThreads = 256;
constexpr int64_t kMaxGridY = 65535;

// A grid of rows (y, strided) by positions in a row (x, strided).
dim3 row_grid(int64_t rows, int64_t n) {
  const int64_t x = std::min<int64_t>((n + kRowThreads - 1) / kRowThreads, 1 << 16);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(std::min(rows, kMaxGridY)));
}

// Runs body(row, offsets of the row, j) for every element of a row grid.
template <typename Body>
__device__ __forceinline__ void for_each_row_element(const RowSort& s, int64_t per_row, const Body& body) {
  __shared__ int64_t off[3];
  for (int64_t row = blockIdx.y; row < s.rows; row += gridDim.y) {
    __syncthreads();  // the previous row's offsets are no longer read
    if (threadIdx.x == 0) s.calc.offsets(row, off);
    __syncthreads();
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < per_row;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x)
      body(row, off, j);
  }
}

// The key of element (row, j), with the row number above key_bits when with_row, and its flat
// position row * n + j.
template <typename T, typename V>
__global__ void row_keys_kernel(RowSort s, int key_bits, bool with_row, uint64_t* keys, V* flat) {
  for_each_row_element(s, s.n, [&](int64_t row, const int64_t (&off)[3], int64_t j) {
    const uint64_t key = directed_key(*reinterpret_cast<const T*>(s.x + off[2] + j * s.xs), s.descending);
    const int64_t p = row * s.n + j;
    keys[p] = with_row ? (static_cast<uint64_t>(row) << key_bits) | key : key;
    flat[p] = static_cast<V>(p);
  });
}

// The row of each sorted flat position (for the second, by-row pass).
template <typename V>
__global__ void row_of_kernel(const V* flat, uint64_t* rows, int64_t total, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) rows[i] = static_cast<uint64_t>(flat[i]) / static_cast<uint64_t>(n);
}

// Writes the first `keep` elements of every sorted row.
template <typename T, typename V>
__global__ void write_rows_kernel(RowSort s, const V* flat) {
  for_each_row_element(s, s.keep, [&](int64_t row, const int64_t (&off)[3], int64_t j) {
    write_sorted<T>(s, off, j, static_cast<int64_t>(flat[row * s.n + j]) - row * s.n);
  });
}

template <typename T, typename V>
void radix_sort_rows(const RowSort& s, Device device, cudaStream_t stream) {
  const int64_t total = s.rows * s.n;
  const int key_bits = SortKey<T>::kBits;
  const int row_bits = bit_width(static_cast<uint64_t>(s.rows - 1));
  // One pass when the row number fits above the key; else by key, then stably by row.
  const bool one_pass = key_bits + row_bits <= 64, with_row = one_pass && row_bits > 0;
  const Tensor k0 = scratch<uint64_t>(total, device), k1 = scratch<uint64_t>(total, device);
  const Tensor v0 = scratch<V>(total, device), v1 = scratch<V>(total, device);
  SortBuffers<uint64_t> keys{static_cast<uint64_t*>(k0.data_ptr()), static_cast<uint64_t*>(k1.data_ptr())};
  SortBuffers<V> flat{static_cast<V*>(v0.data_ptr()), static_cast<V*>(v1.data_ptr())};
  row_keys_kernel<T, V><<<row_grid(s.rows, s.n), kRowThreads, 0, stream>>>(s, key_bits, with_row, keys.current,
                                                                             flat.current);
  RTX_CUDA_CHECK_LAUNCH();
  radix_sort_pairs(keys, flat, total, one_pass ? key_bits + row_bits : key_bits, device, stream);
  if (!one_pass && row_bits > 0) {
    row_of_kernel<V><<<grid_for(total), kBlockSize, 0, stream>>>(flat.current, keys.current, total, s.n);
    RTX_CUDA_CHECK_LAUNCH();
    radix_sort_pairs(keys, flat, total, row_bits, device, stream);
  }
  write_rows_kernel<T, V><<<row_grid(s.rows, s.keep), kRowThreads, 0, stream>>>(s, flat.current);
  RTX_CUDA_CHECK_LAUNCH();
}

// Sorts every row of s and writes its first s.keep elements.
void sort_rows(const RowSort& s, DType dtype, Device device, cudaStream_t stream) {
  RTX_DISPATCH_ALL(dtype, "sort", [&] {
    if (s.n <= kTileMax) block_sort<scalar_t>(s, stream);
    else if (s.keep <= kChunkedTopkMax) chunked_topk<scalar_t>(s, device, stream);
    else if (s.rows * s.n <= (int64_t{1} << 32)) radix_sort_rows<scalar_t, uint32_t>(s, device, stream);
    else radix_sort_rows<scalar_t, uint64_t>(s, device, stream);
  });
}

void sort_cuda(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool descending) {
  detail::KernelScope scope(x.device());
  sort_rows(make_row_sort(values, indices, x, dim, x.size(dim), descending), x.dtype(), x.device(), scope.stream());
}

// Sorted or not, the k are returned in order: the first k of the stable sort (largest: descending).
void topk_cuda(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, int64_t k, bool largest,
               bool) {
  detail::KernelScope scope(x.device());
  sort_rows(make_row_sort(values, indices, x, dim, k, largest), x.dtype(), x.device(), scope.stream());
}

}  // namespace

RTX_REGISTER_KERNELS(sort_cuda) { RTX_SORT_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
