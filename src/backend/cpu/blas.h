// GEMM for the CPU kernels: typed wrappers over OpenBLAS's row-major CBLAS, the test that lets a strided
// matrix go to BLAS as it is (plain or transposed, with a leading dimension), packing into a contiguous
// buffer (converting the element type) when it cannot, and the threading policy for many products:
// OpenMP over products with single-threaded GEMMs, or one product at a time threaded by BLAS.
#pragma once

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>

#include "backend/cpu/parallel.h"
#include "kernels/common/opmath.h"

namespace rtx::cpu {

// A GEMM with at most this many multiply-adds runs single-threaded inside OpenBLAS anyway
// (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD): many such products are best spread over threads.
constexpr int64_t kSerialGemmWork = 65536 * 4;
// Multiply-adds below which splitting a group of products across threads costs more than it saves.
constexpr int64_t kGemmGrainWork = 65536;

// While alive, OpenBLAS runs every call on the calling thread, so that OpenMP threads may each run
// their own GEMMs (the two thread pools never nest). Scopes may overlap across threads: the first one
// in saves OpenBLAS's thread count and the last one out restores it.
class BlasSingleThreadScope {
 public:
  BlasSingleThreadScope() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().depth++ == 0) {
      state().saved_threads = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~BlasSingleThreadScope() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (--state().depth == 0) openblas_set_num_threads(state().saved_threads);
  }
  BlasSingleThreadScope(const BlasSingleThreadScope&) = delete;
  BlasSingleThreadScope& operator=(const BlasSingleThreadScope&) = delete;

 private:
  struct State {
    std::mutex mutex;
    int depth = 0;
    int saved_threads = 1;
  };
  static State& state() {
    static State s;
    return s;
  }
};

// How many of `count` independent items (each gemms_per_item GEMMs of gemm_work multiply-adds) one
// thread takes at least. Items run concurrently, each GEMM single-threaded, when BLAS would not thread
// such GEMMs anyway (grouped into about kGemmGrainWork per thread) or when there are enough items to
// keep every thread busy; otherwise the grain is count: one after another, BLAS threading each GEMM.
inline int64_t gemm_grain(int64_t count, int64_t gemm_work, int64_t gemms_per_item = 1) {
  if (gemm_work <= kSerialGemmWork)
    return std::max<int64_t>(1, kGemmGrainWork / std::max<int64_t>(1, gemm_work * gemms_per_item));
  return count >= omp_get_max_threads() ? 1 : count;
}

// Runs f(b, e) over ranges of [0, count) of at least grain items: in parallel with BLAS single-threaded,
// or once over everything when count <= grain.
template <typename F>
void for_gemm_ranges(int64_t count, int64_t grain, const F& f) {
  if (count <= grain) {
    f(int64_t{0}, count);
    return;
  }
  BlasSingleThreadScope single_threaded_blas;
  parallel_for(count, grain, f);
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
