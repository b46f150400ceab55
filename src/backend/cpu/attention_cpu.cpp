// CPU kernels of fused attention (semantics in ops/nn_kernels.h). The forward walks each query row
// once: scores into a row buffer, then the softmax-weighted sum of the value rows, keeping the row's
// log-sum-exp. The backward recomputes each row's probabilities from it and accumulates the key and
// value gradients of a head in that head's own buffers, heads split across threads: no two threads
// write one element, and the sums run in a fixed order, so results do not depend on the thread count.
// Math in the opmath type (float for 16-bit floats).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/register.h"
#include "core/dtype_dispatch.h"
#include "ops/nn_kernels.h"

namespace rtx::cpu {
namespace {

using detail::opmath_t;

template <typename A>
A dot(const A* a, const A* b, int64_t n) {
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// y += alpha * x
template <typename A>
void axpy(A* y, A alpha, const A* x, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) y[d] += alpha * x[d];
}

// Rows of T read as opmath values: the data itself when T is the opmath type, else a converted copy
// of the whole [rows, d] block.
template <typename T>
class OpmathRows {
 public:
  using A = opmath_t<T>;
  OpmathRows(const T* p, int64_t rows, int64_t d) : d_(d) {
    if constexpr (std::is_same_v<T, A>) {
      data_ = p;
    } else {
      copy_.assign(p, p + rows * d);
      data_ = copy_.data();
    }
  }
  const A* row(int64_t i) const { return data_ + i * d_; }

 private:
  int64_t d_;
  std::vector<A> copy_;
  const A* data_ = nullptr;
};

int64_t keys_seen(int64_t i, int64_t s, bool causal) { return causal ? std::min(s, i + 1) : s; }

void attention_cpu(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   double scale, bool causal) {
  const int64_t bh = q.size(0), L = q.size(1), S = k.size(1), D = q.size(2);
  RTX_DISPATCH_FLOATS(q.dtype(), "scaled_dot_product_attention", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T *qp = q.data_ptr<T>(), *kp = k.data_ptr<T>(), *vp = v.data_ptr<T>();
    T* op = out.data_ptr<T>();
    A* lp = lse.data_ptr<A>();
    parallel_for(bh, 1, [&](int64_t h0, int64_t h1) {
      std::vector<A> scores(S), acc(D);
      for (int64_t h = h0; h < h1; ++h) {
        const OpmathRows<T> qs(qp + h * L * D, L, D), ks(kp + h * S * D, S, D), vs(vp + h * S * D, S, D);
        for (int64_t i = 0; i < L; ++i) {
          const int64_t n = keys_seen(i, S, causal);
          A m = -std::numeric_limits<A>::infinity();
          for (int64_t j = 0; j < n; ++j) {
            scores[j] = static_cast<A>(scale) * dot(qs.row(i), ks.row(j), D);
            m = std::max(m, scores[j]);
          }
          std::fill(acc.begin(), acc.end(), A(0));
          A total = 0;
          for (int64_t j = 0; j < n; ++j) {
            const A p = std::exp(scores[j] - m);
            total += p;
            axpy(acc.data(), p, vs.row(j), D);
          }
          T* o = op + (h * L + i) * D;
          for (int64_t d = 0; d < D; ++d) o[d] = static_cast<T>(acc[d] / total);
          lp[h * L + i] = m + std::log(total);
        }
      }
    });
  });
}

void attention_backward_cpu(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                            bool causal) {
  const int64_t bh = q.size(0), L = q.size(1), S = k.size(1), D = q.size(2);
  RTX_DISPATCH_FLOATS(q.dtype(), "scaled_dot_product_attention_backward", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const A sc = static_cast<A>(scale);
    parallel_for(bh, 1, [&](int64_t h0, int64_t h1) {
      std::vector<A> dq_row(D), dk_acc(S * D), dv_acc(S * D);
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t qo = h * L * D, ko = h * S * D;
        const OpmathRows<T> qs(q.data_ptr<T>() + qo, L, D), ks(k.data_ptr<T>() + ko, S, D),
            vs(v.data_ptr<T>() + ko, S, D), gs(g.data_ptr<T>() + qo, L, D), os(out.data_ptr<T>() + qo, L, D);
        const A* lp = lse.data_ptr<A>() + h * L;
        std::fill(dk_acc.begin(), dk_acc.end(), A(0));
        std::fill(dv_acc.begin(), dv_acc.end(), A(0));
        T* dqp = dq.data_ptr<T>() + qo;
        for (int64_t i = 0; i < L; ++i) {
          const A* qi = qs.row(i);
          const A* gi = gs.row(i);
          const A g_dot_out = dot(gi, os.row(i), D);
          std::fill(dq_row.begin(), dq_row.end(), A(0));
          for (int64_t j = 0, n = keys_seen(i, S, causal); j < n; ++j) {
            const A p = std::exp(sc * dot(qi, ks.row(j), D) - lp[i]);
            const A ds = p * (dot(gi, vs.row(j), D) - g_dot_out);
            axpy(dv_acc.data() + j * D, p, gi, D);
            axpy(dq_row.data(), ds, ks.row(j), D);
            axpy(dk_acc.data() + j * D, ds, qi, D);
          }
          for (int64_t d = 0; d < D; ++d) dqp[i * D + d] = static_cast<T>(sc * dq_row[d]);
        }
        T* dkp = dk.data_ptr<T>() + ko;
        T* dvp = dv.data_ptr<T>() + ko;
        for (int64_t e = 0; e < S * D; ++e) {
          dkp[e] = static_cast<T>(sc * dk_acc[e]);
          dvp[e] = static_cast<T>(dv_acc[e]);
        }
      }
    });
  });
}

}  // namespace

void register_attention_kernels() {
  kernels::attention_kernel.set(kCPU, attention_cpu);
  kernels::attention_backward_kernel.set(kCPU, attention_backward_cpu);
}

}  // namespace rtx::cpu
