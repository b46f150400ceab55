// parallel_for over [0, n) with OpenMP: one contiguous chunk per thread, serial below the grain size
// or inside another parallel region.
#pragma once

#include <algorithm>
#include <cstdint>

#include <omp.h>

namespace rtx::cpu {

// Elements below which splitting across threads costs more than it saves (pointwise work).
constexpr int64_t kGrainSize = 32768;

template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel() || omp_get_max_threads() == 1) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t max_threads = std::min<int64_t>(omp_get_max_threads(), (n + grain - 1) / grain);
#pragma omp parallel num_threads(static_cast<int>(max_threads))
  {
    const int64_t nt = omp_get_num_threads();
    const int64_t t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = t * chunk;
    const int64_t e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

}  // namespace rtx::cpu
