// GEMM for the CPU kernels: typed wrappers over OpenBLAS's row-major CBLAS, the test that lets a strided
// matrix go to BLAS as it is (plain or transposed, with a leading dimension), and packing into a
// contiguous buffer (converting the element type) when it cannot.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "kernels/common/opmath.h"

namespace rtx::cpu {

// A GEMM with at most this many multiply-adds runs single-threaded inside OpenBLAS (SMP_THRESHOLD_MIN *
// GEMM_MULTITHREAD_THRESHOLD), so callers may run such products concurrently from OpenMP threads
// without nesting two thread pools; larger ones are called serially and left to OpenBLAS's threads.
constexpr int64_t kSerialGemmWork = 65536 * 4;

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

// c[m, n] = alpha * op(a)[m, k] @ op(b)[k, n] + beta * c (row-major; op transposes when asked).
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                 const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b,
              static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

}  // namespace rtx::cpu
