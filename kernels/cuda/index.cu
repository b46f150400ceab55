// CUDA kernels of the indexing and joining families: gather, index_select, scatter (assign and add),
// cat and tril/triu. Copies move raw element-sized units (one instantiation per size, not per dtype);
// sums dispatch on the dtype. An index outside its dim is skipped (a gathered element is zero) and
// its row-major position in the index goes to the op's fault word, from which the device's fault
// record takes the first one without the host waiting (src/backend/cuda/device_faults.cuh).
// Scatters are deterministic without atomics, each output element being written by one thread that
// applies its updates in index order: with few updates per row one thread walks each row along dim;
// otherwise the updates are stably radix-sorted by destination and the thread at the end (assign) or
// start (add) of each run of one destination applies it. An index shared by every row (index_add)
// is sorted once for all rows.
#include <algorithm>
#include <array>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/cuda/device_faults.cuh"
#include "core/dtype_dispatch.h"
#include "kernels/cuda/sort.cuh"
#include "dispatch/index.h"
#include "dispatch/copy.h"

namespace rtx::cuda {
namespace {

using detail::IndexFaults;
using detail::report_fault;
using kernels::IndexCheck;
using kernels::IndexFault;

// ---- units and faults -------------------------------------------------------------------------------

// Calls f(U{}) with U an unsigned type of `bytes` bytes: 1, 2, 4 or 8 (an element), or 16 when kWide
// (a run of elements).
template <bool kWide = false, typename F>
void with_unit(size_t bytes, const F& f) {
  if constexpr (kWide) {
    if (bytes == 16) return f(uint4{});
  }
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    default: f(uint64_t{}); break;
  }
}

// The largest unit of at most 16 bytes dividing every quantity (byte counts and addresses): a
// divisor of 16, hence a power of two.
size_t unit_for(const std::vector<uint64_t>& quantities) {
  uint64_t g = 16;
  for (uint64_t q : quantities) g = std::gcd(g, q);
  return static_cast<size_t>(g);
}

// Reads an index value of type I.
template <typename I>
__device__ __forceinline__ int64_t load_index(const char* p) {
  return static_cast<int64_t>(*reinterpret_cast<const I*>(p));
}

// Whether every byte offset of t fits 32-bit math.
bool small_extent(const Tensor& t) {
  int64_t extent = static_cast<int64_t>(t.element_size());
  for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d) * static_cast<int64_t>(t.element_size());
  return extent < (int64_t{1} << 31);
}

// t viewed with `sizes` and t's strides but 0 at dim.
Tensor without_dim(const Tensor& t, const Shape& sizes, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return rtx::detail::make_view(t, sizes, strides, t.storage_offset());
}

// ---- gather ---------------------------------------------------------------------------------------

// out[i] = x[... index[i] ...] along dim; offsets of (out, x without dim, index) from calc.
template <typename U, typename I, typename index_t>
__global__ void gather_kernel(index_t n, char* out, const char* x, const char* index, OffsetCalculator<3, index_t> calc,
                              int64_t size, int64_t x_dim_stride, unsigned long long* fault) {
  const index_t i = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  index_t off[3];
  calc.offsets(i, off);
  const int64_t v = load_index<I>(index + off[2]);
  if (v < 0 || v >= size) {
    report_fault(fault, static_cast<int64_t>(i));
    *reinterpret_cast<U*>(out + off[0]) = U{};
    return;
  }
  *reinterpret_cast<U*>(out + off[0]) = *reinterpret_cast<const U*>(x + off[1] + v * x_dim_stride);
}

IndexFault gather_cuda(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index, const IndexCheck& check) {
  const int64_t n = index.numel();
  if (n == 0) return {};
  detail::KernelScope scope(out.device());
  const IndexFaults fault(out.device(), scope.stream());
  const Tensor xv = without_dim(x, index.sizes(), dim);
  const rtx::detail::Geometry<3> g = rtx::detail::collapse<3>({&out, &xv, &index});
  RTX_CHECK(g.sizes.size() <= static_cast<size_t>(kMaxDims), Error,
            "[cuda] gather takes at most {} dims that cannot be merged, got {}", kMaxDims, g.sizes.size());
  const int64_t xds = x.stride(dim) * static_cast<int64_t>(x.element_size());
  char* op = static_cast<char*>(out.data_ptr());
  const char* xp = static_cast<const char*>(x.data_ptr());
  const char* ip = static_cast<const char*>(index.data_ptr());
  with_unit(out.element_size(), [&](auto unit) {
    using U = decltype(unit);
    RTX_DISPATCH_INDEX(index.dtype(), "gather", [&] {
      if (fits_32bit<3>(g, n)) {
        gather_kernel<U, scalar_t, uint32_t><<<grid_for(n), kBlockSize, 0, scope.stream()>>>(
            static_cast<uint32_t>(n), op, xp, ip, make_offset_calculator<3, uint32_t>(g), x.size(dim), xds,
            fault.word());
      } else {
        gather_kernel<U, scalar_t, int64_t><<<grid_for(n), kBlockSize, 0, scope.stream()>>>(
            n, op, xp, ip, make_offset_calculator<3, int64_t>(g), x.size(dim), xds, fault.word());
      }
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
  return fault.finish(index, check);
}

// ---- index_select -------------------------------------------------------------------------------------

// Contiguous x [outer, size, inner] and out [outer, n, inner], inner counted in units: out's unit t
// copies unit (o, index[j], i) of x, where t = (o * n + j) * inner + i.
template <typename U, typename I>
__global__ void index_select_kernel(int64_t total, U* out, const U* x, const char* index, int64_t index_stride,
                                    int64_t n, int64_t size, int64_t inner, Divider by_inner, Divider by_n,
                                    unsigned long long* fault) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= total) return;
  const int64_t q = by_inner.div(t), i = t - q * inner;
  const int64_t o = by_n.div(q), j = q - o * n;
  const int64_t v = load_index<I>(index + j * index_stride);
  if (v < 0 || v >= size) {
    report_fault(fault, j);
    out[t] = U{};
    return;
  }
  out[t] = x[(o * size + v) * inner + i];
}

IndexFault index_select_cuda(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                             const IndexCheck& check) {
  if (!x.is_contiguous()) {
    // index broadcast to out's shape turns the selection into a gather.
    Shape strides(out.dim(), 0);
    strides[dim] = index.stride(0);
    return gather_cuda(out, x, dim, rtx::detail::make_view(index, out.sizes(), strides, index.storage_offset()), check);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = index.numel(), size = x.size(dim);
  const uint64_t row_bytes = static_cast<uint64_t>(inner) * x.element_size();
  const size_t unit = unit_for({row_bytes, reinterpret_cast<uintptr_t>(x.data_ptr()), reinterpret_cast<uintptr_t>(out.data_ptr())});
  const int64_t inner_units = static_cast<int64_t>(row_bytes / unit);
  const int64_t total = outer * n * inner_units;
  if (total == 0) return {};
  detail::KernelScope scope(out.device());
  const IndexFaults fault(out.device(), scope.stream());
  const int64_t is = index.stride(0) * static_cast<int64_t>(index.element_size());
  with_unit<true>(unit, [&](auto u) {
    using U = decltype(u);
    RTX_DISPATCH_INDEX(index.dtype(), "index_select", [&] {
      index_select_kernel<U, scalar_t><<<grid_for(total), kBlockSize, 0, scope.stream()>>>(
          total, static_cast<U*>(out.data_ptr()), static_cast<const U*>(x.data_ptr()),
          static_cast<const char*>(index.data_ptr()), is, n, size, inner_units, Divider(inner_units, total - 1),
          Divider(n, total / inner_units - 1), fault.word());
      RTX_CUDA_CHECK_LAUNCH();
    });
  });
  return fault.finish(index, check);
}

// ---- scatter --------------------------------------------------------------------------------------

// dst = src, as raw units.
template <typename U>
struct AssignOp {
  using value_type = U;
  __device__ void operator()(char* dst, const char* src) const {
    *reinterpret_cast<U*>(dst) = *reinterpret_cast<const U*>(src);
  }
};

// acc + a * b without contraction into an fma (the CPU rounds the product, then the sum).
template <typename M>
__device__ __forceinline__ M mul_add(M acc, M a, M b) {
  if constexpr (std::is_same_v<M, float>) return __fadd_rn(acc, __fmul_rn(a, b));
  else if constexpr (std::is_same_v<M, double>) return __dadd_rn(acc, __dmul_rn(a, b));
  else return static_cast<M>(acc + a * b);
}

// dst = T(dst + alpha * src) in opmath, rounded to T at every step as on the CPU.
template <typename T>
struct AddOp {
  using value_type = T;
  using M = rtx::detail::opmath_t<T>;
  M alpha;
  __device__ T step(T acc, const char* src) const {
    return static_cast<T>(mul_add(static_cast<M>(acc), alpha, static_cast<M>(*reinterpret_cast<const T*>(src))));
  }
  __device__ void operator()(char* dst, const char* src) const {
    *reinterpret_cast<T*>(dst) = step(*reinterpret_cast<const T*>(dst), src);
  }
};

// The operands of a scatter along dim over the rows of index's shape (strides along dim in bytes).
struct ScatterArgs {
  char* out;
  const char* src;
  const char* index;
  int64_t n, rows, size, inner;  // index's size at dim, rows, out's size at dim, index's elements after dim
  int64_t ods, sds, ids;
  unsigned long long* fault;
};

// Row-major position in the index of element j of row r.
__device__ __forceinline__ int64_t index_position(const ScatterArgs& a, int64_t r, int64_t j) {
  return (r / a.inner * a.n + j) * a.inner + r % a.inner;
}

// One thread per row along dim, applying the row's updates in order.
template <typename Op, typename I>
__global__ void scatter_rows_kernel(ScatterArgs a, OffsetCalculator<3, int64_t> calc, Op op) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  int64_t off[3];
  calc.offsets(r, off);
  for (int64_t j = 0; j < a.n; ++j) {
    const int64_t v = load_index<I>(a.index + off[2] + j * a.ids);
    if (v < 0 || v >= a.size) report_fault(a.fault, index_position(a, r, j));
    else op(a.out + off[0] + v * a.ods, a.src + off[1] + j * a.sds);
  }
}

// Sort keys of the updates (destination byte offsets; `sentinel` for a skipped index) and the byte
// offsets of their sources. With a shared index (one row of n updates for every row), offsets are
// relative to the row; otherwise over all of index's elements, in row-major order.
template <typename I, typename V>
__global__ void scatter_keys_kernel(ScatterArgs a, int64_t m, bool shared, OffsetCalculator<3, int64_t> calc,
                                    uint64_t sentinel, uint64_t* keys, V* sources) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= m) return;
  int64_t off[3] = {0, 0, 0}, j = e;
  if (!shared) {
    const int64_t r = e / (a.n * a.inner) * a.inner + e % a.inner;
    j = e / a.inner % a.n;
    calc.offsets(r, off);
  }
  const int64_t v = load_index<I>(a.index + off[2] + j * a.ids);
  if (v < 0 || v >= a.size) {
    report_fault(a.fault, shared ? j * a.inner : e);
    keys[e] = sentinel;
  } else {
    keys[e] = static_cast<uint64_t>(off[0] + v * a.ods);
  }
  sources[e] = static_cast<V>(off[1] + j * a.sds);
}

// Applies the sorted updates: thread t takes update p = t / rows of row t % rows (rows is 1 unless
// the index is shared). Assign: the last update of each destination; add: all, in order, from the
// first.
template <typename Op, typename V, bool kAdd>
__global__ void scatter_sorted_kernel(ScatterArgs a, int64_t m, OffsetCalculator<2, int64_t> calc, Divider by_rows,
                                      uint64_t sentinel, const uint64_t* keys, const V* sources, Op op) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= m * a.rows) return;
  const int64_t p = by_rows.div(t), r = t - p * a.rows;
  const uint64_t key = keys[p];
  if (key == sentinel) return;
  if (kAdd ? (p > 0 && keys[p - 1] == key) : (p + 1 < m && keys[p + 1] == key)) return;
  int64_t off[2];
  calc.offsets(r, off);
  char* dst = a.out + off[0] + key;
  const char* src = a.src + off[1];
  if constexpr (kAdd) {
    using T = typename Op::value_type;
    T acc = *reinterpret_cast<const T*>(dst);
    for (int64_t q = p; q < m && keys[q] == key; ++q) acc = op.step(acc, src + sources[q]);
    *reinterpret_cast<T*>(dst) = acc;
  } else {
    op(dst, src + sources[p]);
  }
}

// Updates per row up to which one thread walks each row; as many rows as this make that walk the
// faster way even for long rows.
constexpr int64_t kWalkUpdates = 32;
constexpr int64_t kWalkRows = 32768;

// Whether index (of sizes) is the same along every dim but dim.
bool index_shared(const Tensor& index, int64_t dim) {
  for (int64_t d = 0; d < index.dim(); ++d)
    if (d != dim && index.size(d) > 1 && index.stride(d) != 0) return false;
  return true;
}

template <typename Op, typename I, typename V>
void scatter_sorted(const ScatterArgs& a, const Tensor& out, const Tensor& src, const Tensor& index, int64_t dim,
                    bool shared, const Op& op, cudaStream_t stream) {
  const Device device = out.device();
  const int64_t m = shared ? a.n : index.numel();
  const int64_t row_bytes = (a.size - 1) * a.ods + static_cast<int64_t>(out.element_size());
  int64_t extent = row_bytes;
  if (!shared)
    for (int64_t d = 0; d < out.dim(); ++d)
      if (d != dim) extent += (index.size(d) - 1) * out.stride(d) * static_cast<int64_t>(out.element_size());
  const uint64_t sentinel = static_cast<uint64_t>(extent);
  const Tensor k0 = scratch<uint64_t>(m, device), k1 = scratch<uint64_t>(m, device);
  const Tensor v0 = scratch<V>(m, device), v1 = scratch<V>(m, device);
  SortBuffers<uint64_t> keys{static_cast<uint64_t*>(k0.data_ptr()), static_cast<uint64_t*>(k1.data_ptr())};
  SortBuffers<V> sources{static_cast<V*>(v0.data_ptr()), static_cast<V*>(v1.data_ptr())};
  scatter_keys_kernel<I, V><<<grid_for(m), kBlockSize, 0, stream>>>(
      a, m, shared, row_offsets<3>(index.sizes(), dim, {&out, &src, &index}), sentinel, keys.current, sources.current);
  RTX_CUDA_CHECK_LAUNCH();
  radix_sort_pairs(keys, sources, m, bit_width(sentinel), device, stream);
  ScatterArgs b = a;
  if (!shared) b.rows = 1;
  const OffsetCalculator<2, int64_t> calc =
      shared ? row_offsets<2>(index.sizes(), dim, {&out, &src}) : OffsetCalculator<2, int64_t>{};
  const int64_t threads = m * b.rows;
  constexpr bool kAdd = !std::is_same_v<Op, AssignOp<typename Op::value_type>>;
  scatter_sorted_kernel<Op, V, kAdd><<<grid_for(threads), kBlockSize, 0, stream>>>(
      b, m, calc, Divider(b.rows, threads - 1), sentinel, keys.current, sources.current, op);
  RTX_CUDA_CHECK_LAUNCH();
}

template <typename Op>
void scatter_with(const ScatterArgs& a, const Tensor& out, const Tensor& src, const Tensor& index, int64_t dim,
                  const Op& op, cudaStream_t stream) {
  RTX_DISPATCH_INDEX(index.dtype(), "scatter", [&] {
    const bool shared = index_shared(index, dim) && a.rows > 1;
    if (a.n <= kWalkUpdates || (!shared && a.rows >= kWalkRows)) {
      scatter_rows_kernel<Op, scalar_t><<<grid_for(a.rows), kBlockSize, 0, stream>>>(
          a, row_offsets<3>(index.sizes(), dim, {&out, &src, &index}), op);
      RTX_CUDA_CHECK_LAUNCH();
    } else if (small_extent(src) && a.n * a.sds < (int64_t{1} << 32)) {
      scatter_sorted<Op, scalar_t, uint32_t>(a, out, src, index, dim, shared, op, stream);
    } else {
      scatter_sorted<Op, scalar_t, uint64_t>(a, out, src, index, dim, shared, op, stream);
    }
  });
}

IndexFault scatter_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                        kernels::ScatterMode mode, const Scalar& alpha, const IndexCheck& check) {
  const int64_t n = index.size(dim);
  if (index.numel() == 0) return {};
  detail::KernelScope scope(out.device());
  const IndexFaults fault(out.device(), scope.stream());
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < index.dim(); ++d) inner *= index.size(d);
  const ScatterArgs a{static_cast<char*>(out.data_ptr()),
                      static_cast<const char*>(src.data_ptr()),
                      static_cast<const char*>(index.data_ptr()),
                      n,
                      index.numel() / n,
                      out.size(dim),
                      inner,
                      out.stride(dim) * static_cast<int64_t>(out.element_size()),
                      src.stride(dim) * static_cast<int64_t>(src.element_size()),
                      index.stride(dim) * static_cast<int64_t>(index.element_size()),
                      fault.word()};
  if (mode == kernels::ScatterMode::Assign) {
    with_unit(out.element_size(), [&](auto unit) {
      scatter_with(a, out, src, index, dim, AssignOp<decltype(unit)>{}, scope.stream());
    });
  } else {
    RTX_DISPATCH_ALL(out.dtype(), "scatter_add", [&] {
      const AddOp<scalar_t> op{alpha.to<rtx::detail::opmath_t<scalar_t>>()};
      scatter_with(a, out, src, index, dim, op, scope.stream());
    });
  }
  return fault.finish(index, check);
}

// ---- cat ------------------------------------------------------------------------------------------

// One input of a batched cat: its units go to out's rows at `offset`, `len` per row.
struct CatPiece {
  const void* src;
  int64_t offset, len, total;  // in units; total = rows * len
  Divider by_len;
};

constexpr int kCatBatch = 32;
struct CatBatch {
  CatPiece pieces[kCatBatch];
};

// Block row y copies piece y: unit k of it lands in out row k / len at offset + k % len.
template <typename U>
__global__ void cat_kernel(const RTX_GRID_CONSTANT CatBatch batch, U* out, int64_t out_row) {
  const CatPiece& p = batch.pieces[blockIdx.y];
  const U* src = static_cast<const U*>(p.src);
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < p.total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = p.by_len.div(k);
    out[row * out_row + p.offset + (k - row * p.len)] = src[k];
  }
}

void cat_cuda(const Tensor& out, const TensorList& inputs, int64_t dim) {
  const int64_t es = static_cast<int64_t>(out.element_size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  struct Part {
    const Tensor* t;
    int64_t offset;  // in bytes within an out row
  };
  std::vector<Part> direct;
  std::vector<uint64_t> quantities{static_cast<uint64_t>(out.size(dim) * inner * es),
                                   reinterpret_cast<uintptr_t>(out.data_ptr())};
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    const int64_t len = t.size(dim);
    if (t.numel() > 0) {
      if (t.dtype() == out.dtype() && t.is_contiguous()) {
        direct.push_back({&t, offset * inner * es});
        quantities.push_back(static_cast<uint64_t>(offset * inner * es));
        quantities.push_back(static_cast<uint64_t>(len * inner * es));
        quantities.push_back(reinterpret_cast<uintptr_t>(t.data_ptr()));
      } else {
        Shape sizes = out.sizes();
        sizes[dim] = len;
        const Tensor part =
            rtx::detail::make_view(out, sizes, out.strides(), out.storage_offset() + offset * out.stride(dim));
        kernels::copy_kernel.get(out.device())(part, t);
      }
    }
    offset += len;
  }
  if (direct.empty()) return;
  const int64_t unit = static_cast<int64_t>(unit_for(quantities));
  detail::KernelScope scope(out.device());
  const int64_t out_row = out.size(dim) * inner * es / unit;
  with_unit<true>(static_cast<size_t>(unit), [&](auto u) {
    using U = decltype(u);
    for (size_t first = 0; first < direct.size(); first += kCatBatch) {
      const size_t count = std::min<size_t>(kCatBatch, direct.size() - first);
      CatBatch batch{};
      int64_t most = 0;
      for (size_t b = 0; b < count; ++b) {
        const Part& part = direct[first + b];
        const int64_t len = part.t->size(dim) * inner * es / unit, total = outer * len;
        batch.pieces[b] = {part.t->data_ptr(), part.offset / unit, len, total, Divider(len, total - 1)};
        most = std::max(most, total);
      }
      const int64_t blocks = std::min<int64_t>((most + kBlockSize - 1) / kBlockSize, 65536);
      cat_kernel<U><<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), kBlockSize, 0,
                      scope.stream()>>>(batch, static_cast<U*>(out.data_ptr()), out_row);
      RTX_CUDA_CHECK_LAUNCH();
    }
  });
}

// ---- tril / triu ---------------------------------------------------------------------------------------

// out (contiguous [..., rows, cols]) element e: x's element where column - row is on the kept side
// of the diagonal, else zero.
template <typename U, typename index_t>
__global__ void triangle_kernel(index_t n, U* out, const char* x, OffsetCalculator<2, index_t> calc, Divider by_cols,
                                Divider by_rows, int64_t rows, int64_t cols, int64_t diagonal, bool upper) {
  const index_t e = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= n) return;
  const int64_t q = by_cols.div(e), c = e - q * cols;
  const int64_t i = q - by_rows.div(q) * rows;
  const bool keep = upper ? c - i >= diagonal : c - i <= diagonal;
  if (!keep) {
    out[e] = U{};
    return;
  }
  index_t off[2];
  calc.offsets(e, off);
  out[e] = *reinterpret_cast<const U*>(x + off[1]);
}

void triangle_cuda(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper) {
  const int64_t n = out.numel();
  const int64_t rows = x.size(x.dim() - 2), cols = x.size(x.dim() - 1);
  detail::KernelScope scope(out.device());
  const rtx::detail::Geometry<2> g = rtx::detail::collapse<2>({&out, &x});
  RTX_CHECK(g.sizes.size() <= static_cast<size_t>(kMaxDims), Error,
            "[cuda] tril/triu take at most {} dims that cannot be merged, got {}", kMaxDims, g.sizes.size());
  const Divider by_cols(cols, n - 1), by_rows(rows, (n - 1) / cols);
  with_unit(out.element_size(), [&](auto u) {
    using U = decltype(u);
    U* op = static_cast<U*>(out.data_ptr());
    const char* xp = static_cast<const char*>(x.data_ptr());
    if (fits_32bit<2>(g, n)) {
      triangle_kernel<U, uint32_t><<<grid_for(n), kBlockSize, 0, scope.stream()>>>(
          static_cast<uint32_t>(n), op, xp, make_offset_calculator<2, uint32_t>(g), by_cols, by_rows, rows, cols,
          diagonal, upper);
    } else {
      triangle_kernel<U, int64_t><<<grid_for(n), kBlockSize, 0, scope.stream()>>>(
          n, op, xp, make_offset_calculator<2, int64_t>(g), by_cols, by_rows, rows, cols, diagonal, upper);
    }
    RTX_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

RTX_REGISTER_KERNELS(index_cuda) { RTX_INDEX_KERNELS(RTX_SET_CUDA_KERNEL) }

}  // namespace rtx::cuda
