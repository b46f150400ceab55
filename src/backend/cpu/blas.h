// GEMM for the CPU kernels: typed wrappers over row-major GEMMs (single-threaded, split across OpenMP
// threads here): OpenBLAS's CBLAS, and in a build with oneDNN its sgemm for float32 products past a
// few thousand multiply-adds; the test that lets a strided matrix go to BLAS as it is (plain or
// transposed, with a leading dimension), packing into a contiguous buffer (converting the element
// type) when it cannot, and the threading policy for many products.
#pragma once

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "backend/cpu/parallel.h"
#include "core/check.h"
#include "kernels/common/opmath.h"
#include "rtx/config.h"

#if RTX_WITH_ONEDNN
#include <oneapi/dnnl/dnnl.h>

#include "backend/cpu/onednn_signals.h"
#endif

namespace rtx::cpu {

// A GEMM with at most this many multiply-adds runs on one thread (threads would cost more than they
// save): many such products are best spread over threads, one product each.
constexpr int64_t kSerialGemmWork = 65536 * 4;
// Multiply-adds below which splitting a group of products across threads costs more than it saves.
constexpr int64_t kGemmGrainWork = 65536;

// How many of `count` independent items (each gemms_per_item GEMMs of gemm_work multiply-adds) one
// thread takes at least: small products are grouped into about kGemmGrainWork per thread; large ones
// run concurrently when there are enough to keep every thread busy, else one after another, each
// GEMM split across the threads by gemm() itself.
inline int64_t gemm_grain(int64_t count, int64_t gemm_work, int64_t gemms_per_item = 1) {
  if (gemm_work <= kSerialGemmWork)
    return std::max<int64_t>(1, kGemmGrainWork / std::max<int64_t>(1, gemm_work * gemms_per_item));
  return count >= omp_get_max_threads() ? 1 : count;
}

// A [rows, cols] matrix view: element strides between rows (s0) and columns (s1).
struct MatrixView {
  int64_t rows = 0, cols = 0, s0 = 0, s1 = 0;
};

// How a matrix is handed to row-major BLAS.
struct BlasLayout {
  bool trans = false;
  int64_t ld = 1;
};

// The BLAS layout that reads m in place: unit stride along one dim and a leading dimension that covers
// the other; nullopt when the strides allow neither (the matrix must be packed).
inline std::optional<BlasLayout> blas_layout(const MatrixView& m) {
  const bool one_row = m.rows == 1, one_col = m.cols == 1;
  if ((one_col || m.s1 == 1) && (one_row || m.s0 >= std::max<int64_t>(1, m.cols)))
    return BlasLayout{false, one_row ? std::max<int64_t>(1, m.cols) : m.s0};
  if ((one_row || m.s0 == 1) && (one_col || m.s1 >= std::max<int64_t>(1, m.rows)))
    return BlasLayout{true, one_col ? std::max<int64_t>(1, m.rows) : m.s1};
  return std::nullopt;
}

// Copies the matrix at src into dst as a contiguous row-major [rows, cols] block, converting to Dst.
template <typename Src, typename Dst>
void pack_matrix(const Src* src, const MatrixView& m, Dst* dst) {
  for (int64_t r = 0; r < m.rows; ++r) {
    const Src* row = src + r * m.s0;
    Dst* out = dst + r * m.cols;
    for (int64_t c = 0; c < m.cols; ++c) out[c] = static_cast<Dst>(static_cast<detail::opmath_t<Src>>(row[c * m.s1]));
  }
}

// OpenBLAS runs single-threaded, always: the library's threads are OpenMP's, and a BLAS thread pool
// spinning beside them (OpenBLAS's threads busy-wait between calls) would slow both down.
inline void use_serial_blas() {
  static const bool once = (openblas_set_num_threads(1), true);
  (void)once;
}

// float32 products of at least this many multiply-adds go to oneDNN's sgemm in a build with oneDNN:
// its kernels follow the CPU whatever the environment says, where OpenBLAS's follow
// OPENBLAS_CORETYPE ("Haswell" holds an AVX-512 CPU to AVX2 kernels at half the speed); below the
// threshold oneDNN's fixed cost of a call (about 0.2 us) outweighs its speed.
constexpr int64_t kOnednnGemmWork = 32 * 32 * 32;

#if RTX_WITH_ONEDNN
// oneDNN's sgemm on the calling thread: outside a parallel region it would spread itself over the
// OpenMP threads, and its sums would then depend on their number.
inline void onednn_serial_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads > 1) omp_set_num_threads(1);
  dnnl_status_t status;
  {
    AsyncSignalsBlocked no_signals;  // onednn_signals.h says why
    status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  if (threads > 1) omp_set_num_threads(threads);
  RTX_CHECK(status == dnnl_success, Error, "[matmul] oneDNN's sgemm failed with status {} ([{}, {}] x [{}, {}])",
            static_cast<int>(status), m, k, k, n);
}
#endif

inline void serial_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if RTX_WITH_ONEDNN
  if (m * n * k >= kOnednnGemmWork) {
    onednn_serial_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}
inline void serial_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                        int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// A product above kSerialGemmWork multiply-adds is cut into at most this many pieces.
constexpr int64_t kGemmPieces = 16;

// c[m, n] = alpha * op(a)[m, k] @ op(b)[k, n] + beta * c (row-major; op transposes when asked). Above
// kSerialGemmWork multiply-adds (and outside another parallel region) c is cut into pieces of whole
// blocks of 16 rows, or of 16 columns when c is wider than tall, which the threads share. The pieces
// do not depend on the thread count (BLAS kernels may sum in another order for another shape, e.g.
// OpenBLAS's small-matrix kernels), so each element's sum runs in the same order with any count.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  use_serial_blas();
  constexpr int64_t kBlock = 16;
  const int64_t work = m * n * k;
  if (work <= kSerialGemmWork) {
    serial_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const bool split_rows = m >= n;
  const int64_t extent = split_rows ? m : n;
  const int64_t blocks = (extent + kBlock - 1) / kBlock;
  const int64_t block_work = std::max<int64_t>(1, work / blocks);
  const int64_t piece_blocks =
      std::max((blocks + kGemmPieces - 1) / kGemmPieces, std::max<int64_t>(1, kSerialGemmWork / block_work));
  const int64_t pieces = (blocks + piece_blocks - 1) / piece_blocks;
  parallel_for(pieces, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t lo = p * piece_blocks * kBlock, hi = std::min(extent, (p + 1) * piece_blocks * kBlock);
      if (split_rows) {
        const T* a_rows = ta ? a + lo : a + lo * lda;  // op(a) rows are a's columns when transposed
        serial_gemm(ta, tb, hi - lo, n, k, alpha, a_rows, lda, b, ldb, beta, c + lo * ldc, ldc);
      } else {
        const T* b_cols = tb ? b + lo * ldb : b + lo;  // op(b) columns are b's rows when transposed
        serial_gemm(ta, tb, m, hi - lo, k, alpha, a, lda, b_cols, ldb, beta, c + lo, ldc);
      }
    }
  });
}

}  // namespace rtx::cpu
