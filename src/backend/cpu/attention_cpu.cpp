// CPU kernels of fused attention (semantics in dispatch/attention.h), in blocks of kQueryBlock query
// rows: the block's scores come from one GEMM against the keys it can see, each row's softmax is
// taken in place (keeping its log-sum-exp), and one more GEMM weights the values. The backward
// recomputes a block's probabilities from the log-sum-exp and gets dv, dp, dq and dk from four
// GEMMs, accumulating dk and dv of a head in that head's own buffers. Operands are read and written
// through their head layouts (strided heads and rows). Heads (and, in the forward, query blocks)
// are split across threads; GEMMs run single-threaded inside them, so results do not depend on the
// thread count. Math in the opmath type (float for 16-bit floats); the softmax loops are also built
// for AVX2 and AVX-512 (vector_isa.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/blas.h"
#include "backend/cpu/nn_rows.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "dispatch/attention.h"
#include "kernels/common/pointwise_functors.h"

namespace rtx::cpu {
namespace {

using detail::HeadLayout;
using detail::opmath_t;

constexpr int64_t kQueryBlock = 64;

template <typename A>
A dot(const A* a, const A* b, int64_t n) {
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// Rows of a head read as opmath values, at a row stride BLAS takes (ld() >= d): the data itself when
// T is the opmath type and its rows are at least d apart, else a contiguous converted copy.
template <typename T>
class OpmathRows {
 public:
  using A = opmath_t<T>;
  OpmathRows(const T* p, int64_t rows, int64_t d, int64_t stride) {
    if constexpr (std::is_same_v<T, A>) {
      if (stride >= d) {
        data_ = p;
        ld_ = stride;
        return;
      }
    }
    copy_.resize(static_cast<size_t>(rows * d));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t e = 0; e < d; ++e) copy_[static_cast<size_t>(i * d + e)] = static_cast<A>(p[i * stride + e]);
    data_ = copy_.data();
    ld_ = d;
  }
  const A* row(int64_t i) const { return data_ + i * ld_; }
  int64_t ld() const { return ld_; }

 private:
  int64_t ld_ = 0;
  std::vector<A> copy_;
  const A* data_ = nullptr;
};

int64_t keys_seen(int64_t i, int64_t s, bool causal) { return causal ? std::min(s, i + 1) : s; }

// One block of query rows [r0, r0 + rows) of a head: the keys it sees (all, or up to the last
// row's diagonal) and, per row, the count of keys not masked.
struct QueryBlock {
  int64_t r0, rows, keys;
  QueryBlock(int64_t block, int64_t L, int64_t S, bool causal)
      : r0(block * kQueryBlock), rows(std::min(kQueryBlock, L - block * kQueryBlock)),
        keys(keys_seen(r0 + rows - 1, S, causal)) {}
};

// p[i, j] = exp(scores[i, j] - lse_i) over the keys row i sees, 0 past them (scores: [rows, keys]).
template <typename A>
void probabilities_from_lse(A* p, const QueryBlock& b, int64_t S, bool causal, const A* lse) {
  with_vector_isa([&] {
    for (int64_t i = 0; i < b.rows; ++i) {
      A* row = p + i * b.keys;
      const int64_t n = keys_seen(b.r0 + i, S, causal);
      const A l = lse[b.r0 + i];
      for (int64_t j = 0; j < n; ++j) row[j] = fn::exp_of(row[j] - l);
      std::fill(row + n, row + b.keys, A(0));
    }
  });
}

void attention_cpu(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   double scale, bool causal) {
  use_serial_blas();
  const int64_t bh = detail::head_count(q), L = q.size(-2), S = k.size(-2), D = q.size(-1);
  const int64_t blocks = (L + kQueryBlock - 1) / kQueryBlock;
  const HeadLayout lq = detail::head_layout(q).value(), lk = detail::head_layout(k).value(),
                   lv = detail::head_layout(v).value(), lo = detail::head_layout(out).value();
  RTX_DISPATCH_FLOATS(q.dtype(), "scaled_dot_product_attention", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T *qp = q.data_ptr<T>(), *kp = k.data_ptr<T>(), *vp = v.data_ptr<T>();
    T* op = out.data_ptr<T>();
    A* lp = lse.data_ptr<A>();
    parallel_for(bh * blocks, 1, [&](int64_t w0, int64_t w1) {
      std::vector<A> scores(kQueryBlock * S), acc(kQueryBlock * D);
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t h = w / blocks;
        const QueryBlock b(w % blocks, L, S, causal);
        const OpmathRows<T> qs(qp + lq.offset(h) + b.r0 * lq.row, b.rows, D, lq.row),
            ks(kp + lk.offset(h), b.keys, D, lk.row), vs(vp + lv.offset(h), b.keys, D, lv.row);
        serial_gemm(false, true, b.rows, b.keys, D, static_cast<A>(scale), qs.row(0), qs.ld(), ks.row(0), ks.ld(),
                    A(0), scores.data(), b.keys);
        A* row_lse = lp + h * L;
        with_vector_isa([&] {
          for (int64_t i = 0; i < b.rows; ++i)
            row_lse[b.r0 + i] = rows::slice_max(scores.data() + i * b.keys, keys_seen(b.r0 + i, S, causal), rows::Unit{});
        });
        probabilities_from_lse(scores.data(), b, S, causal, row_lse);  // exp(s - max) for now
        serial_gemm(false, false, b.rows, D, b.keys, A(1), scores.data(), b.keys, vs.row(0), vs.ld(), A(0),
                    acc.data(), D);
        with_vector_isa([&] {
          for (int64_t i = 0; i < b.rows; ++i) {
            const A* p = scores.data() + i * b.keys;
            const A total = static_cast<A>(rows::lane_sum(b.keys, [&](int64_t j) { return p[j]; }));
            T* o = op + lo.offset(h) + (b.r0 + i) * lo.row;
            for (int64_t d = 0; d < D; ++d) o[d] = static_cast<T>(acc[i * D + d] / total);
            row_lse[b.r0 + i] += std::log(total);
          }
        });
      }
    });
  });
}

void attention_backward_cpu(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                            bool causal) {
  use_serial_blas();
  const int64_t bh = detail::head_count(q), L = q.size(-2), S = k.size(-2), D = q.size(-1);
  const int64_t blocks = (L + kQueryBlock - 1) / kQueryBlock;
  const HeadLayout lq = detail::head_layout(q).value(), lk = detail::head_layout(k).value(),
                   lv = detail::head_layout(v).value(), lg = detail::head_layout(g).value(),
                   lo = detail::head_layout(out).value(), ldq = detail::head_layout(dq).value(),
                   ldk = detail::head_layout(dk).value(), ldv = detail::head_layout(dv).value();
  RTX_DISPATCH_FLOATS(q.dtype(), "scaled_dot_product_attention_backward", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const A sc = static_cast<A>(scale);
    parallel_for(bh, 1, [&](int64_t h0, int64_t h1) {
      std::vector<A> p(kQueryBlock * S), ds(kQueryBlock * S), dq_block(kQueryBlock * D), dk_acc(S * D),
          dv_acc(S * D), g_dot_out(L);
      for (int64_t h = h0; h < h1; ++h) {
        const OpmathRows<T> qs(q.data_ptr<T>() + lq.offset(h), L, D, lq.row),
            ks(k.data_ptr<T>() + lk.offset(h), S, D, lk.row), vs(v.data_ptr<T>() + lv.offset(h), S, D, lv.row),
            gs(g.data_ptr<T>() + lg.offset(h), L, D, lg.row), os(out.data_ptr<T>() + lo.offset(h), L, D, lo.row);
        const A* lp = lse.data_ptr<A>() + h * L;
        for (int64_t i = 0; i < L; ++i) g_dot_out[i] = dot(gs.row(i), os.row(i), D);
        std::fill(dk_acc.begin(), dk_acc.end(), A(0));
        std::fill(dv_acc.begin(), dv_acc.end(), A(0));
        T* dqp = dq.data_ptr<T>() + ldq.offset(h);
        for (int64_t block = 0; block < blocks; ++block) {
          const QueryBlock b(block, L, S, causal);
          const A *qb = qs.row(b.r0), *gb = gs.row(b.r0);
          serial_gemm(false, true, b.rows, b.keys, D, sc, qb, qs.ld(), ks.row(0), ks.ld(), A(0), p.data(), b.keys);
          probabilities_from_lse(p.data(), b, S, causal, lp);
          // dv += p^T g; dp = g v^T; ds = p (dp - <g, out>); dq = scale ds k; dk += scale ds^T q
          serial_gemm(true, false, b.keys, D, b.rows, A(1), p.data(), b.keys, gb, gs.ld(), A(1), dv_acc.data(), D);
          serial_gemm(false, true, b.rows, b.keys, D, A(1), gb, gs.ld(), vs.row(0), vs.ld(), A(0), ds.data(), b.keys);
          with_vector_isa([&] {
            for (int64_t i = 0; i < b.rows; ++i) {
              const A gi = g_dot_out[b.r0 + i];
              for (int64_t j = 0; j < b.keys; ++j) ds[i * b.keys + j] = p[i * b.keys + j] * (ds[i * b.keys + j] - gi);
            }
          });
          serial_gemm(false, false, b.rows, D, b.keys, sc, ds.data(), b.keys, ks.row(0), ks.ld(), A(0),
                      dq_block.data(), D);
          serial_gemm(true, false, b.keys, D, b.rows, sc, ds.data(), b.keys, qb, qs.ld(), A(1), dk_acc.data(), D);
          for (int64_t i = 0; i < b.rows; ++i)
            for (int64_t e = 0; e < D; ++e) dqp[(b.r0 + i) * ldq.row + e] = static_cast<T>(dq_block[i * D + e]);
        }
        T* dkp = dk.data_ptr<T>() + ldk.offset(h);
        T* dvp = dv.data_ptr<T>() + ldv.offset(h);
        for (int64_t j = 0; j < S; ++j)
          for (int64_t e = 0; e < D; ++e) {
            dkp[j * ldk.row + e] = static_cast<T>(dk_acc[j * D + e]);
            dvp[j * ldv.row + e] = static_cast<T>(dv_acc[j * D + e]);
          }
      }
    });
  });
}

}  // namespace

RTX_REGISTER_KERNELS(attention_cpu) { RTX_ATTENTION_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
