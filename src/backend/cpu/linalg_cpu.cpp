// CPU matmul kernel. float32/float64 go to OpenBLAS GEMM with the operands as they are whenever their
// strides fit a BLAS layout (plain or transposed); float16/bfloat16 are packed to float for sgemm and
// the result converted back; integers use a blocked loop with wrapping arithmetic. Batches run
// concurrently with single-threaded GEMMs when they are small or many; otherwise one after another,
// each threaded by BLAS.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/blas.h"
#include "backend/cpu/parallel.h"
#include "core/dtype_dispatch.h"
#include "dispatch/linalg.h"

namespace rtx::cpu {
namespace {

MatrixView matrix_of(const Tensor& t) {
  const int64_t nd = t.dim();
  return {t.size(nd - 2), t.size(nd - 1), t.stride(nd - 2), t.stride(nd - 1)};
}

// Element offset of each batch's matrix in t [..., rows, cols], batches in row-major order.
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t batches) {
  const int64_t nb = t.dim() - 2;
  std::vector<int64_t> offsets(batches);
  std::vector<int64_t> idx(nb, 0);
  int64_t cur = 0;
  for (int64_t i = 0; i < batches; ++i) {
    offsets[i] = cur;
    for (int64_t d = nb - 1; d >= 0; --d) {
      if (++idx[d] < t.size(d)) {
        cur += t.stride(d);
        break;
      }
      cur -= (t.size(d) - 1) * t.stride(d);
      idx[d] = 0;
    }
  }
  return offsets;
}

// One batched product: sizes, operand layouts and where each batch's matrices start.
struct Problem {
  int64_t batches, m, n, k;
  MatrixView a, b;
  std::vector<int64_t> a_offsets, b_offsets;
};

// Per-thread buffers: packed operands and the float result of a 16-bit product.
template <typename C>
struct Scratch {
  std::vector<C> a, b, c;
};

// An operand in BLAS type C: src itself when its strides fit BLAS, else packed (and converted) into buf.
template <typename T, typename C>
std::pair<const C*, BlasLayout> gemm_operand(const T* src, const MatrixView& v, std::vector<C>& buf) {
  if constexpr (std::is_same_v<T, C>) {
    if (auto layout = blas_layout(v)) return {src, *layout};
  }
  buf.resize(static_cast<size_t>(v.rows * v.cols));
  pack_matrix(src, v, buf.data());
  return {buf.data(), BlasLayout{false, std::max<int64_t>(1, v.cols)}};
}

// out [m, n] = a @ b through GEMM in type C (T is C itself or a 16-bit float computed in C).
template <typename T, typename C>
void gemm_product(T* out, const T* a, const T* b, const Problem& p, Scratch<C>& s) {
  const auto [pa, la] = gemm_operand<T, C>(a, p.a, s.a);
  const auto [pb, lb] = gemm_operand<T, C>(b, p.b, s.b);
  C* c;
  if constexpr (std::is_same_v<T, C>) {
    c = out;
  } else {
    s.c.resize(static_cast<size_t>(p.m * p.n));
    c = s.c.data();
  }
  gemm(la.trans, lb.trans, p.m, p.n, p.k, C(1), pa, la.ld, pb, lb.ld, C(0), c, p.n);
  if constexpr (!std::is_same_v<T, C>) {
    for (int64_t i = 0; i < p.m * p.n; ++i) out[i] = static_cast<T>(c[i]);
  }
}

// out [m, n] = a @ b for integers (wrapping like PyTorch), rows [r0, r1) only. b must be contiguous
// row-major [k, n]; blocks of k and n keep a tile of b in cache across rows.
template <typename T>
void int_product_rows(T* out, const T* a, const MatrixView& av, const T* b, const Problem& p, int64_t r0, int64_t r1) {
  using U = std::make_unsigned_t<T>;
  constexpr int64_t kBlockK = 128, kBlockN = 512;
  U* o = reinterpret_cast<U*>(out);
  std::fill(o + r0 * p.n, o + r1 * p.n, U(0));
  for (int64_t j0 = 0; j0 < p.n; j0 += kBlockN) {
    const int64_t j1 = std::min(p.n, j0 + kBlockN);
    for (int64_t k0 = 0; k0 < p.k; k0 += kBlockK) {
      const int64_t k1 = std::min(p.k, k0 + kBlockK);
      for (int64_t i = r0; i < r1; ++i) {
        U* orow = o + i * p.n;
        for (int64_t kk = k0; kk < k1; ++kk) {
          const U aik = static_cast<U>(a[i * av.s0 + kk * av.s1]);
          const T* brow = b + kk * p.n;
          for (int64_t j = j0; j < j1; ++j) orow[j] = static_cast<U>(orow[j] + aik * static_cast<U>(brow[j]));
        }
      }
    }
  }
}

// Integer products: b packed to contiguous rows when needed, rows of each batch split across threads.
template <typename T>
void int_matmul(T* out, const T* a, const T* b, const Problem& p) {
  std::vector<T> packed;
  const int64_t row_work = std::max<int64_t>(1, p.n * p.k);
  for (int64_t i = 0; i < p.batches; ++i) {
    const T* bi = b + p.b_offsets[i];
    if (p.b.s1 != 1 || p.b.s0 != p.n) {
      packed.resize(static_cast<size_t>(p.k * p.n));
      pack_matrix(bi, p.b, packed.data());
      bi = packed.data();
    }
    T* oi = out + i * p.m * p.n;
    const T* ai = a + p.a_offsets[i];
    parallel_for(p.m, std::max<int64_t>(1, kGrainSize / row_work),
                 [&](int64_t r0, int64_t r1) { int_product_rows(oi, ai, p.a, bi, p, r0, r1); });
  }
}

// Floating products, concurrently over batches or one after another (see gemm_grain).
template <typename T, typename C>
void float_matmul(T* out, const T* a, const T* b, const Problem& p) {
  parallel_for(p.batches, gemm_grain(p.batches, p.m * p.n * p.k), [&](int64_t b0, int64_t b1) {
    Scratch<C> s;
    for (int64_t i = b0; i < b1; ++i)
      gemm_product<T, C>(out + i * p.m * p.n, a + p.a_offsets[i], b + p.b_offsets[i], p, s);
  });
}

// Adds bias [N] to every row of the contiguous 2-d out.
void add_bias_rows(const Tensor& out, const Tensor& bias) {
  const int64_t n = out.size(out.dim() - 1), rows = out.numel() / n;
  RTX_DISPATCH_FLOATS(out.dtype(), "matmul", [&] {
    auto* o = static_cast<scalar_t*>(out.data_ptr());
    const auto* bv = static_cast<const scalar_t*>(bias.data_ptr());
    using C = detail::opmath_t<scalar_t>;
    parallel_for(rows, std::max<int64_t>(1, kGrainSize / n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j) o[r * n + j] = static_cast<scalar_t>(static_cast<C>(o[r * n + j]) + static_cast<C>(bv[j]));
    });
  });
}

bool matmul_cpu(const Tensor& out, const Tensor& a, const Tensor& b, const kernels::MatmulEpilogue& epilogue) {
  const Tensor& bias = epilogue.bias;
  const int64_t nd = out.dim();
  Problem p;
  p.m = out.size(nd - 2);
  p.n = out.size(nd - 1);
  p.k = a.size(nd - 1);
  p.batches = out.numel() / (p.m * p.n);
  if (p.k == 0) {
    std::memset(out.data_ptr(), 0, out.nbytes());  // all-zero bits are zero in every dtype
    if (bias.defined()) add_bias_rows(out, bias);
    return false;
  }
  p.a = matrix_of(a);
  p.b = matrix_of(b);
  p.a_offsets = batch_offsets(a, p.batches);
  p.b_offsets = batch_offsets(b, p.batches);
  RTX_DISPATCH_NUMERIC(out.dtype(), "matmul", [&] {
    auto* o = static_cast<scalar_t*>(out.data_ptr());
    const auto* pa = static_cast<const scalar_t*>(a.data_ptr());
    const auto* pb = static_cast<const scalar_t*>(b.data_ptr());
    if constexpr (std::is_integral_v<scalar_t>) {
      int_matmul(o, pa, pb, p);
    } else {
      float_matmul<scalar_t, detail::opmath_t<scalar_t>>(o, pa, pb, p);
    }
  });
  if (bias.defined()) add_bias_rows(out, bias);
  return false;  // the front-end sums a's rows itself
}

}  // namespace

RTX_REGISTER_KERNELS(linalg_cpu) { RTX_LINALG_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
