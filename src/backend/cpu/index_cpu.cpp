// CPU kernels of the indexing and joining families: gather, index_select, scatter (assign and add),
// cat and tril/triu. Copies move raw element-sized units (one instantiation per element size, not per
// dtype); sums dispatch on the dtype. Scatters own each output element with one thread and walk the
// index in order, so that results never depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/parallel.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "dispatch/index.h"
#include "backend/cpu/row_walker.h"
#include "dispatch/copy.h"

namespace rtx::cpu {

// Registers the sort family's kernels (sort_cpu.cpp).

namespace {

using kernels::IndexFault;

// An element moved as raw bytes.
template <size_t S>
struct alignas(S) Unit {
  unsigned char bytes[S];
};

// Calls f(Unit<element_size>{}).
template <typename F>
void with_unit(size_t element_size, const F& f) {
  switch (element_size) {
    case 1: f(Unit<1>{}); break;
    case 2: f(Unit<2>{}); break;
    case 4: f(Unit<4>{}); break;
    default: f(Unit<8>{}); break;
  }
}

struct Assign {
  template <typename T>
  void operator()(T& dst, const T& src) const {
    dst = src;
  }
};

template <typename T>
struct AddScaled {
  detail::opmath_t<T> alpha;
  void operator()(T& dst, const T& src) const {
    using M = detail::opmath_t<T>;
    dst = static_cast<T>(static_cast<M>(dst) + alpha * static_cast<M>(src));
  }
};

// Rows along dim are taken kGroup at a time and walked together, index position by index position,
// so that a dim with a large stride still sweeps memory in runs of neighbouring rows. Where the dim
// has stride 1 and grouping gains nothing for the indexed operand, rows are walked one by one.
constexpr int64_t kGroup = 64;

// The distance (in elements) between neighbouring rows along dim of t walked over shape.
int64_t row_stride(const Shape& shape, const Tensor& t, int64_t dim) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d)
    if (d != dim && shape[d] > 1) return std::abs(t.stride(d));
  return 0;
}

// Gather (kScatter false: dst[j] = src[index[j]]) or scatter (true: dst[index[j]] op= src[j]) along
// dim, over the rows of index's shape. Returns whether an index outside the indexed dim was skipped.
template <bool kScatter, typename T, typename I, typename Op>
bool index_rows(const Tensor& dst, const Tensor& src, const Tensor& index, int64_t dim, const Op& op) {
  const int64_t size = (kScatter ? dst : src).size(dim);
  const int64_t n = index.size(dim);
  const int64_t ds = dst.stride(dim), ss = src.stride(dim), is = index.stride(dim);
  T* dp = static_cast<T*>(dst.data_ptr());
  const T* sp = static_cast<const T*>(src.data_ptr());
  const I* ip = static_cast<const I*>(index.data_ptr());
  const RowWalker<3> walker(index.sizes(), dim, {&dst.strides(), &src.strides(), &index.strides()});
  // Element j of the row at offsets o; false for an index outside the dim (skipped).
  auto element = [&](const std::array<int64_t, 3>& o, int64_t j) {
    const int64_t v = static_cast<int64_t>(ip[o[2] + j * is]);
    if (v < 0 || v >= size) return false;
    if constexpr (kScatter) op(dp[o[0] + v * ds], sp[o[1] + j * ss]);
    else op(dp[o[0] + j * ds], sp[o[1] + v * ss]);
    return true;
  };
  const bool row_by_row = (kScatter ? ss : ds) == 1 && row_stride(index.sizes(), kScatter ? dst : src, dim) != 1;
  std::atomic<bool> bad{false};
  // Chunks of at least kGroup rows: threads then rarely write into one cache line.
  parallel_for(walker.rows(), std::max<int64_t>(kGroup, kGrainSize / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    RowWalker<3> w = walker;
    w.seek(b);
    std::array<std::array<int64_t, 3>, kGroup> offs;
    bool ok = true;
    for (int64_t g = b; g < e; g += kGroup) {
      const int64_t count = std::min(kGroup, e - g);
      for (int64_t c = 0; c < count; ++c, w.next()) offs[c] = w.offsets();
      if (row_by_row) {
        for (int64_t c = 0; c < count; ++c)
          for (int64_t j = 0; j < n; ++j) ok &= element(offs[c], j);
      } else {
        for (int64_t j = 0; j < n; ++j)
          for (int64_t c = 0; c < count; ++c) ok &= element(offs[c], j);
      }
    }
    if (!ok) bad.store(true, std::memory_order_relaxed);
  });
  return bad.load();
}

// The first index (row-major) outside [0, check.bound): the slow path taken only after a kernel
// skipped one.
IndexFault first_fault(const Tensor& index, const kernels::IndexCheck& check) {
  IndexFault fault;
  const int64_t size = check.bound;
  const int64_t last = index.dim() - 1;
  RTX_DISPATCH_INDEX(index.dtype(), "index", [&] {
    const auto* ip = static_cast<const scalar_t*>(index.data_ptr());
    RowWalker<1> w(index.sizes(), last, {&index.strides()});
    const int64_t n = index.size(last), is = index.stride(last);
    for (int64_t r = 0; r < w.rows() && !fault.found; ++r, w.next()) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t v = static_cast<int64_t>(ip[w.offsets()[0] + j * is]);
        if (v < 0 || v >= size) {
          fault = {true, check, v};
          break;
        }
      }
    }
  });
  return fault;
}

IndexFault gather_cpu(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                      const kernels::IndexCheck& check) {
  bool bad = false;
  with_unit(out.element_size(), [&](auto unit) {
    using T = decltype(unit);
    RTX_DISPATCH_INDEX(index.dtype(), "gather", [&] { bad = index_rows<false, T, scalar_t>(out, x, index, dim, Assign{}); });
  });
  return bad ? first_fault(index, check) : IndexFault{};
}

// Contiguous x: out's rows of `inner` elements are copied whole from the selected rows of x.
template <typename T, typename I>
bool index_select_rows(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t size = x.size(dim), n = index.numel(), is = index.stride(0);
  T* op = static_cast<T*>(out.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  const I* ip = static_cast<const I*>(index.data_ptr());
  std::atomic<bool> bad{false};
  parallel_for(outer * n, std::max<int64_t>(1, kGrainSize / inner), [&](int64_t b, int64_t e) {
    bool local_bad = false;
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / n, v = static_cast<int64_t>(ip[(r % n) * is]);
      if (v < 0 || v >= size) {
        local_bad = true;
        continue;
      }
      const T* src = xp + (o * size + v) * inner;
      if (inner == 1) op[r] = *src;
      else std::memcpy(op + r * inner, src, static_cast<size_t>(inner) * sizeof(T));
    }
    if (local_bad) bad.store(true, std::memory_order_relaxed);
  });
  return bad.load();
}

IndexFault index_select_cpu(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                            const kernels::IndexCheck& check) {
  if (!x.is_contiguous()) {
    // index broadcast to out's shape turns the selection into a gather.
    Shape strides(out.dim(), 0);
    strides[dim] = index.stride(0);
    return gather_cpu(out, x, dim, detail::make_view(index, out.sizes(), strides, index.storage_offset()), check);
  }
  bool bad = false;
  with_unit(out.element_size(), [&](auto unit) {
    using T = decltype(unit);
    RTX_DISPATCH_INDEX(index.dtype(), "index_select", [&] { bad = index_select_rows<T, scalar_t>(out, x, dim, index); });
  });
  return bad ? first_fault(index, check) : IndexFault{};
}

IndexFault scatter_cpu(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, kernels::ScatterMode mode,
                       const Scalar& alpha, const kernels::IndexCheck& check) {
  bool bad = false;
  if (mode == kernels::ScatterMode::Assign) {
    with_unit(out.element_size(), [&](auto unit) {
      using T = decltype(unit);
      RTX_DISPATCH_INDEX(index.dtype(), "scatter", [&] { bad = index_rows<true, T, scalar_t>(out, src, index, dim, Assign{}); });
    });
  } else {
    RTX_DISPATCH_ALL(out.dtype(), "scatter_add", [&] {
      using T = scalar_t;
      const AddScaled<T> add{alpha.to<detail::opmath_t<T>>()};
      RTX_DISPATCH_INDEX(index.dtype(), "scatter_add", [&] { bad = index_rows<true, T, scalar_t>(out, src, index, dim, add); });
    });
  }
  return bad ? first_fault(index, check) : IndexFault{};
}

void cat_cpu(const Tensor& out, const TensorList& inputs, int64_t dim) {
  const int64_t es = static_cast<int64_t>(out.element_size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.size(d);
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  const int64_t out_row = out.size(dim) * inner * es;
  // Inputs of out's dtype that are contiguous: one memcpy per (outer slice, input).
  struct Block {
    const char* src;
    int64_t offset;  // in bytes within an out row
    int64_t bytes;   // per outer slice
  };
  std::vector<Block> blocks;
  int64_t offset = 0, total = 0;
  for (const Tensor& t : inputs) {
    const int64_t len = t.size(dim);
    if (t.numel() > 0) {
      if (t.dtype() == out.dtype() && t.is_contiguous()) {
        blocks.push_back({static_cast<const char*>(t.data_ptr()), offset * inner * es, len * inner * es});
        total += len * inner * es;
      } else {
        Shape sizes = out.sizes();
        sizes[dim] = len;
        const Tensor part = detail::make_view(out, sizes, out.strides(), out.storage_offset() + offset * out.stride(dim));
        kernels::copy_kernel.get(out.device())(part, t);
      }
    }
    offset += len;
  }
  if (blocks.empty()) return;
  const int64_t nb = static_cast<int64_t>(blocks.size());
  const int64_t avg_bytes = std::max<int64_t>(1, total / nb);
  char* base = static_cast<char*>(out.data_ptr());
  parallel_for(outer * nb, std::max<int64_t>(1, kGrainSize * 4 / avg_bytes), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / nb;
      const Block& blk = blocks[i % nb];
      std::memcpy(base + o * out_row + blk.offset, blk.src + o * blk.bytes, static_cast<size_t>(blk.bytes));
    }
  });
}

void triangle_cpu(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper) {
  const int64_t last = x.dim() - 1;
  const int64_t rows = x.size(last - 1), cols = x.size(last), xs = x.stride(last);
  const RowWalker<2> walker(x.sizes(), last, {&out.strides(), &x.strides()});
  with_unit(out.element_size(), [&](auto unit) {
    using T = decltype(unit);
    T* op = static_cast<T*>(out.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    parallel_for(walker.rows(), std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
      RowWalker<2> w = walker;
      w.seek(b);
      for (int64_t r = b; r < e; ++r, w.next()) {
        // Row i keeps columns c with c - i <= diagonal (tril) or c - i >= diagonal (triu).
        const int64_t i = r % rows;
        const int64_t lo = upper ? std::clamp<int64_t>(i + diagonal, 0, cols) : 0;
        const int64_t hi = upper ? cols : std::clamp<int64_t>(i + diagonal + 1, 0, cols);
        T* o = op + w.offsets()[0];
        const T* s = xp + w.offsets()[1];
        std::memset(o, 0, static_cast<size_t>(lo) * sizeof(T));
        if (xs == 1) std::memcpy(o + lo, s + lo, static_cast<size_t>(hi - lo) * sizeof(T));
        else
          for (int64_t c = lo; c < hi; ++c) o[c] = s[c * xs];
        std::memset(o + hi, 0, static_cast<size_t>(cols - hi) * sizeof(T));
      }
    });
  });
}

}  // namespace

RTX_REGISTER_KERNELS(index_cpu) { RTX_INDEX_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
