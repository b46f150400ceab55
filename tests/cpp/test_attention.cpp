// Tests of scaled_dot_product_attention against naive float64 loops: causal and full, L != S, odd
// and large head sizes, batch dims, non-contiguous inputs, bool and float masks (the composite path),
// 16-bit and float32 inputs at sizes that cover the GPU kernels' tiles and tails; first and second
// order gradients; the fused backward against the composite formula; float32 on TF32 tensor cores;
// bitwise reproducibility; errors.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_utils.h"

namespace rtx::testing {
namespace {

class AttentionTest : public DeviceTest {};
INSTANTIATE_DEVICE_TESTS(AttentionTest);

struct Dims {
  int64_t bh, L, S, D, Dv;
};

// softmax(q k^T * scale + mask) v per head; q [bh, L, D], k [bh, S, D], v [bh, S, Dv]; mask [L, S]
// (added; -inf drops a key) or empty.
std::vector<double> ref_attention(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const Dims& d, bool causal, double scale,
                                  const std::vector<double>& mask = {}) {
  std::vector<double> out(d.bh * d.L * d.Dv, 0.0), s(d.S);
  for (int64_t h = 0; h < d.bh; ++h)
    for (int64_t i = 0; i < d.L; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < d.S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d.D; ++e) dot += q[(h * d.L + i) * d.D + e] * k[(h * d.S + j) * d.D + e];
        s[j] = dot * scale + (mask.empty() ? 0.0 : mask[i * d.S + j]);
        if (causal && j > i) s[j] = -std::numeric_limits<double>::infinity();
        m = std::max(m, s[j]);
      }
      double total = 0;
      for (int64_t j = 0; j < d.S; ++j) total += std::exp(s[j] - m);
      for (int64_t j = 0; j < d.S; ++j)
        for (int64_t e = 0; e < d.Dv; ++e)
          out[(h * d.L + i) * d.Dv + e] += std::exp(s[j] - m) / total * v[(h * d.S + j) * d.Dv + e];
    }
  return out;
}

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  return scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
}

// The causal mask as a bool tensor: the same math through the composite path.
Tensor causal_mask(int64_t L, int64_t S, Device dev) { return tril(ones({L, S}, TensorOptions(kBool, dev))); }

TEST_P(AttentionTest, MatchesReference) {
  // {batch..., L, S, D}: L < S, L > S, odd head sizes, one key.
  const std::vector<std::vector<int64_t>> cases = {{2, 3, 5, 7, 4}, {1, 2, 9, 4, 3}, {3, 6, 6, 5}, {2, 4, 1, 8}};
  for (const auto& c : cases) {
    const size_t n = c.size();
    const Shape batch(c.begin(), c.end() - 3);
    const Dims d{numel(batch), c[n - 3], c[n - 2], c[n - 1], c[n - 1]};
    Shape qs = batch, ks = batch;
    qs.insert(qs.end(), {d.L, d.D});
    ks.insert(ks.end(), {d.S, d.D});
    const auto qv = irregular(numel(qs), 1.0), kv = irregular(numel(ks), 2.0), vv = irregular(numel(ks), 3.0);
    const Tensor q = make(qv, qs, dev()), k = make(kv, ks, dev()), v = make(vv, ks, dev());
    for (bool causal : {false, true}) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(d.D));
      EXPECT_TRUE(all_close(sdpa(q, k, v, causal), make(ref_attention(qv, kv, vv, d, causal, scale), qs)))
          << ::testing::PrintToString(c) << " causal " << causal;
      const Tensor scaled = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal, 0.3);
      EXPECT_TRUE(all_close(scaled, make(ref_attention(qv, kv, vv, d, causal, 0.3), qs)));
    }
  }
}

TEST_P(AttentionTest, NonContiguousInputsAndValueWidth) {
  // Heads split from [B, L, H, D] by a transpose, as in a transformer block.
  const Dims d{2 * 3, 5, 5, 4, 4};
  const auto base = irregular(2 * 5 * 3 * 4, 4.0);
  const Tensor x = make(base, {2, 5, 3, 4}, dev()).transpose(1, 2);
  const auto xv = values(x);
  EXPECT_TRUE(all_close(sdpa(x, x, x, true), make(ref_attention(xv, xv, xv, d, true, 0.5), {2, 3, 5, 4})));
  // A value width other than the key width (composite path).
  const Dims w{1, 3, 4, 2, 5};
  const auto qv = irregular(6, 1.0), kv = irregular(8, 2.0), vv = irregular(20, 3.0);
  const Tensor out = sdpa(make(qv, {3, 2}, dev()), make(kv, {4, 2}, dev()), make(vv, {4, 5}, dev()), false);
  EXPECT_TRUE(all_close(out, make(ref_attention(qv, kv, vv, w, false, 1.0 / std::sqrt(2.0)), {3, 5})));
}

TEST_P(AttentionTest, MasksMatchReference) {
  const Dims d{2, 4, 6, 3, 3};
  const auto qv = irregular(24, 1.0), kv = irregular(36, 2.0), vv = irregular(36, 3.0);
  const Tensor q = make(qv, {2, 4, 3}, dev()), k = make(kv, {2, 6, 3}, dev()), v = make(vv, {2, 6, 3}, dev());
  std::vector<double> keep(24), additive = irregular(24, 5.0), as_inf(24);
  for (int64_t i = 0; i < 24; ++i) {
    keep[i] = (i * 7) % 5 != 0 || i % 6 == 0;  // every row keeps key 0
    as_inf[i] = keep[i] ? 0.0 : -std::numeric_limits<double>::infinity();
  }
  const double scale = 1.0 / std::sqrt(3.0);
  const Tensor bool_mask = make(keep, {4, 6}, dev(), kBool);
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, bool_mask),
                        make(ref_attention(qv, kv, vv, d, false, scale, as_inf), {2, 4, 3})));
  EXPECT_TRUE(all_close(scaled_dot_product_attention(q, k, v, make(additive, {4, 6}, dev())),
                        make(ref_attention(qv, kv, vv, d, false, scale, additive), {2, 4, 3})));
  // The causal flag and the explicit causal mask agree.
  EXPECT_TRUE(all_close(sdpa(q, k, v, true), scaled_dot_product_attention(q, k, v, causal_mask(4, 6, dev()))));
}

TEST_P(AttentionTest, LowPrecisionMatchesFloat64AtKernelTileSizes) {
  // Sizes past the GPU kernels' tiles, with tails: 130 rows, 200 keys, head sizes 64 and 128.
  const std::vector<Dims> sizes = {{2, 130, 130, 64, 64}, {1, 70, 200, 128, 128}, {3, 33, 17, 40, 40}};
  for (const Dims& d : sizes) {
    for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
      const Tensor q = make(smooth(d.bh * d.L * d.D, 1), {d.bh, d.L, d.D}, dev(), dt);
      const Tensor k = make(smooth(d.bh * d.S * d.D, 2), {d.bh, d.S, d.D}, dev(), dt);
      const Tensor v = make(smooth(d.bh * d.S * d.D, 3), {d.bh, d.S, d.D}, dev(), dt);
      for (bool causal : {false, true}) {
        const Tensor out = sdpa(q, k, v, causal);
        EXPECT_EQ(out.dtype(), dt);
        const auto ref = ref_attention(values(q), values(k), values(v), d, causal, 1.0 / std::sqrt(double(d.D)));
        const double tol = dt == kFloat32 ? 2e-5 : dt == kFloat16 ? 4e-3 : 3e-2;
        EXPECT_TRUE(all_close(out, make(ref, {d.bh, d.L, d.D}), tol, tol)) << dt << " L " << d.L << " causal " << causal;
      }
    }
  }
}

TEST_P(AttentionTest, Gradients) {
  for (bool causal : {false, true}) {
    auto fn = [causal](const TensorList& in) { return TensorList{sdpa(in[0], in[1], in[2], causal)}; };
    const TensorList in{leaf({2, 4, 3}, dev(), 1), leaf({2, 5, 3}, dev(), 2), leaf({2, 5, 3}, dev(), 3)};
    EXPECT_TRUE(gradcheck(fn, in)) << "causal " << causal;
    EXPECT_TRUE(gradgradcheck(fn, in)) << "causal " << causal;
  }
  // Heads split by a transpose (non-contiguous inputs), first and second order.
  auto ft = [](const TensorList& in) {
    return TensorList{sdpa(in[0].transpose(0, 1), in[1].transpose(0, 1), in[2].transpose(0, 1), true)};
  };
  const TensorList tin{leaf({4, 2, 3}, dev(), 11), leaf({5, 2, 3}, dev(), 12), leaf({5, 2, 3}, dev(), 13)};
  EXPECT_TRUE(gradcheck(ft, tin));
  EXPECT_TRUE(gradgradcheck(ft, tin));
  // More queries than keys, batch dims, only some inputs requiring grad.
  const Tensor k = make(smooth(2 * 2 * 3 * 2, 5), {2, 2, 3, 2}, dev());
  auto fq = [&k](const TensorList& in) { return TensorList{sdpa(in[0], k, in[1], true)}; };
  EXPECT_TRUE(gradcheck(fq, {leaf({2, 2, 6, 2}, dev(), 6), leaf({2, 2, 3, 2}, dev(), 7)}));
  // Masked (composite) attention.
  const Tensor mask = make({1, 0, 1, 1, 1, 0}, {2, 3}, dev(), kBool);
  auto fm = [&mask](const TensorList& in) { return TensorList{scaled_dot_product_attention(in[0], in[1], in[2], mask)}; };
  EXPECT_TRUE(gradcheck(fm, {leaf({2, 3}, dev(), 8), leaf({3, 3}, dev(), 9), leaf({3, 3}, dev(), 10)}));
}

TEST_P(AttentionTest, FusedBackwardMatchesCompositeFormula) {
  const Dims d{2, 97, 80, 64, 64};
  for (DType dt : {kFloat32, kBFloat16}) {
    for (bool causal : {false, true}) {
      TensorList fused, composite;
      for (bool use_mask : {false, true}) {
        const Tensor q = make(smooth(d.bh * d.L * d.D, 1), {d.bh, d.L, d.D}, dev(), dt).requires_grad_();
        const Tensor k = make(smooth(d.bh * d.S * d.D, 2), {d.bh, d.S, d.D}, dev(), dt).requires_grad_();
        const Tensor v = make(smooth(d.bh * d.S * d.D, 3), {d.bh, d.S, d.D}, dev(), dt).requires_grad_();
        const Tensor g = make(smooth(d.bh * d.L * d.D, 4), {d.bh, d.L, d.D}, dev(), dt);
        // The composite path in float64 is the reference.
        const auto up = [&](const Tensor& t) { return use_mask ? t.to(kFloat64) : t; };
        const Tensor mask = causal ? causal_mask(d.L, d.S, dev()) : ones({d.L, d.S}, TensorOptions(kBool, dev()));
        Tensor out = use_mask ? scaled_dot_product_attention(up(q), up(k), up(v), mask) : sdpa(q, k, v, causal);
        out.backward(up(g));
        const TensorList grads{q.grad(), k.grad(), v.grad()};
        if (use_mask) composite = grads;
        else fused = grads;
      }
      const double tol = dt == kFloat32 ? 1e-4 : 5e-2;
      for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(all_close(fused[i], composite[i].to(dt), tol, tol)) << dt << " causal " << causal << " grad " << i;
    }
  }
}

TEST_P(AttentionTest, BitwiseReproducible) {
  const Dims d{4, 150, 150, 64, 64};
  for (DType dt : {kFloat32, kBFloat16}) {
    TensorList first;
    for (int run = 0; run < 2; ++run) {
      const Tensor q = make(smooth(d.bh * d.L * d.D, 1), {d.bh, d.L, d.D}, dev(), dt).requires_grad_();
      const Tensor k = make(smooth(d.bh * d.S * d.D, 2), {d.bh, d.S, d.D}, dev(), dt).requires_grad_();
      const Tensor v = make(smooth(d.bh * d.S * d.D, 3), {d.bh, d.S, d.D}, dev(), dt).requires_grad_();
      Tensor out = sdpa(q, k, v, true);
      out.backward(make(smooth(d.bh * d.L * d.D, 4), {d.bh, d.L, d.D}, dev(), dt));
      const TensorList now{out, q.grad(), k.grad(), v.grad()};
      if (run == 0) first = now;
      else
        for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(first[i], now[i])) << dt << " tensor " << i;
    }
  }
}

// The causal backward with many heads and tiles in flight at once (L = S, more queries than keys,
// more keys than queries): bf16 and float16 (on the GPU, dq from the dS^T the dk/dv kernel stores)
// and TF32 float32 (dq recomputing dS) gradients match float64 through the composite formula and
// repeat bit for bit.
TEST_P(AttentionTest, CausalGradientsOverManyTilesMatchFloat64AndRepeat) {
  const std::vector<Dims> sizes =
      dev().is_cpu() ? std::vector<Dims>{{2, 70, 52, 64, 64}}
                     : std::vector<Dims>{{48, 333, 333, 64, 64}, {24, 700, 520, 128, 128}, {16, 260, 700, 128, 128}};
  Float32PrecisionGuard precision("high");
  for (const Dims& d : sizes) {
    for (DType dt : {kBFloat16, kFloat16, kFloat32}) {
      const auto input = [&](int64_t rows, uint64_t seed) {
        return make(smooth(d.bh * rows * d.D, seed), {d.bh, rows, d.D}, dev(), dt);
      };
      const Tensor q = input(d.L, 1), k = input(d.S, 2), v = input(d.S, 3), g = input(d.L, 4);
      const auto grads_of = [&](const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool composite) {
        const Tensor ql = q_in.detach().requires_grad_(), kl = k_in.detach().requires_grad_(),
                     vl = v_in.detach().requires_grad_();
        Tensor out = composite ? scaled_dot_product_attention(ql, kl, vl, causal_mask(d.L, d.S, dev()))
                               : sdpa(ql, kl, vl, true);
        out.backward(composite ? g.to(kFloat64) : g);
        return TensorList{ql.grad(), kl.grad(), vl.grad()};
      };
      const TensorList first = grads_of(q, k, v, false), second = grads_of(q, k, v, false);
      const TensorList expected = grads_of(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), true);
      const double tol = dt == kFloat32 ? 3e-3 : 5e-2;
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(all_close(first[i], expected[i].to(dt), tol, tol)) << dt << " L " << d.L << " S " << d.S
                                                                        << " D " << d.D << " grad " << i;
        EXPECT_TRUE(same_bytes(first[i], second[i])) << dt << " L " << d.L << " D " << d.D << " grad " << i;
      }
    }
  }
}

// The GPU's 16-bit backward stores dS^T for a group of heads at a time, within a memory budget
// (1 GiB): three heads of 16384 x 16384 go as two groups, whose gradients equal those of each head
// run alone, bit for bit.
TEST_P(AttentionTest, HeadGroupsOfTheStoredScoresGradientMatchOneHeadAtATime) {
  if (dev().is_cpu()) GTEST_SKIP() << "the head groups are the GPU kernels'; a CPU run at this size is slow";
  const Dims d{3, 16384, 16384, 64, 64};
  const auto input = [&](uint64_t seed) {
    return make(smooth(d.bh * d.L * d.D, seed), {d.bh, d.L, d.D}, dev(), kBFloat16);
  };
  const Tensor q = input(1), k = input(2), v = input(3), g = input(4);
  const auto grads_of = [&](const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& g_in) {
    const Tensor ql = q_in.detach().requires_grad_(), kl = k_in.detach().requires_grad_(),
                 vl = v_in.detach().requires_grad_();
    sdpa(ql, kl, vl, true).backward(g_in);
    return TensorList{ql.grad(), kl.grad(), vl.grad()};
  };
  const TensorList all = grads_of(q, k, v, g);
  for (int64_t h = 0; h < d.bh; ++h) {
    const auto head = [&](const Tensor& t) { return t.narrow(0, h, 1).contiguous(); };
    const TensorList alone = grads_of(head(q), head(k), head(v), head(g));
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(isfinite(alone[i]).all().item().to<bool>()) << "head " << h << " grad " << i;
      EXPECT_TRUE(same_bytes(head(all[i]), alone[i])) << "head " << h << " grad " << i;
    }
  }
}

// float32 under the "high" matmul precision, which lets the GPU kernels run TF32 tensor cores: the
// results match float64 at TF32's precision, forward and backward, at the kernels' tile sizes with
// tails, for head sizes the tensor cores take (64, 128, 40: padded) and one they do not (6); heads
// strided as a transformer splits them; bitwise reproducible. On CUDA the TF32 results are not the
// exact float32 ones (the setting takes effect).
TEST_P(AttentionTest, Float32UnderHighPrecisionMatchesFloat64) {
  const std::vector<Dims> sizes = {
      {2, 130, 130, 64, 64}, {1, 70, 200, 128, 128}, {3, 33, 17, 40, 40}, {2, 20, 20, 6, 6}};
  for (const Dims& d : sizes) {
    for (bool causal : {false, true}) {
      TensorList runs[3];  // "high" twice, then "highest"
      for (int run = 0; run < 3; ++run) {
        Float32PrecisionGuard precision(run < 2 ? "high" : "highest");
        // [bh, L, D] heads viewed out of [L, bh, D] tensors: every row strided.
        const auto leaf_rows = [&](int64_t rows, uint64_t seed) {
          return make(smooth(d.bh * rows * d.D, seed), {rows, d.bh, d.D}, dev(), kFloat32).requires_grad_();
        };
        const Tensor q_rows = leaf_rows(d.L, 1), k_rows = leaf_rows(d.S, 2), v_rows = leaf_rows(d.S, 3);
        const Tensor q = q_rows.transpose(0, 1), k = k_rows.transpose(0, 1), v = v_rows.transpose(0, 1);
        Tensor out = sdpa(q, k, v, causal);
        out.backward(make(smooth(d.bh * d.L * d.D, 4), {d.bh, d.L, d.D}, dev(), kFloat32));
        runs[run] = {out, q_rows.grad().transpose(0, 1), k_rows.grad().transpose(0, 1), v_rows.grad().transpose(0, 1)};
        if (run > 0) continue;
        // float64 through the composite path is the reference.
        const auto up = [](const Tensor& t) { return t.detach().to(kFloat64).requires_grad_(); };
        const Tensor q64 = up(q), k64 = up(k), v64 = up(v);
        const Tensor mask = causal ? causal_mask(d.L, d.S, dev()) : ones({d.L, d.S}, TensorOptions(kBool, dev()));
        Tensor ref = scaled_dot_product_attention(q64, k64, v64, mask);
        ref.backward(make(smooth(d.bh * d.L * d.D, 4), {d.bh, d.L, d.D}, dev(), kFloat64));
        const TensorList expected{ref, q64.grad(), k64.grad(), v64.grad()};
        for (int i = 0; i < 4; ++i)
          EXPECT_TRUE(all_close(runs[0][i], expected[i].to(kFloat32), 3e-3, 3e-3))
              << "D " << d.D << " L " << d.L << " causal " << causal << " tensor " << i;
      }
      for (int i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(runs[0][i], runs[1][i])) << "D " << d.D << " tensor " << i;
      if (!dev().is_cpu() && d.D % 4 == 0) {
        EXPECT_FALSE(same_bytes(runs[0][0], runs[2][0])) << "D " << d.D << ": TF32 gave the exact float32 result";
      }
    }
  }
}

// q, k and v as a transformer splits them off one [B, L, 3 * H * D] projection (split, view,
// transpose): the kernels read such heads in place, and their results match the same inputs made
// contiguous, forward and backward, on every kernel path (16-bit tensor cores and float tiles at
// D = 64, the generic path at D = 6 whose rows are not 16-byte aligned).
TEST_P(AttentionTest, StridedHeadsMatchContiguousCopies) {
  const int64_t B = 2, L = 70, H = 3;
  for (int64_t D : {64, 6}) {
    const int64_t C = H * D;
    for (DType dt : {kFloat32, kBFloat16}) {
      for (bool causal : {false, true}) {
        TensorList results[2];
        for (bool copy : {false, true}) {
          const Tensor x = make(smooth(B * L * 3 * C, 21), {B, L, 3 * C}, dev(), dt).requires_grad_();
          const auto head = [&](int64_t i) {
            const Tensor t = x.narrow(2, i * C, C).view({B, L, H, D}).transpose(1, 2);
            return copy ? t.contiguous() : t;
          };
          Tensor out = sdpa(head(0), head(1), head(2), causal);
          EXPECT_EQ(out.sizes(), (Shape{B, H, L, D}));
          // Stored as [B, L, H, D], so merging the heads back needs no copy.
          EXPECT_TRUE(out.transpose(1, 2).is_contiguous());
          out.backward(make(smooth(B * H * L * D, 22), {B, H, L, D}, dev(), dt));
          results[copy] = {out, x.grad()};
        }
        const double tol = dt == kFloat32 ? 1e-5 : 2e-2;
        for (int i = 0; i < 2; ++i)
          EXPECT_TRUE(all_close(results[0][i], results[1][i], tol, tol))
              << dt << " D " << D << " causal " << causal << (i == 0 ? " out" : " grad");
      }
    }
  }
}

// Other layouts: rows that are not dense and batch dims that do not merge into one stride are
// copied first; heads expanded from one (stride 0) are read in place. Each matches the reference.
TEST_P(AttentionTest, OtherLayoutsMatchReference) {
  const auto base = irregular(2 * 2 * 3 * 5 * 4, 2.0);
  const Tensor rows_strided = make(base, {2, 2, 3, 4, 5}, dev()).transpose(-1, -2);  // stride(-1) = 5
  const Tensor batch_permuted = make(base, {2, 2, 3, 5, 4}, dev()).transpose(0, 1);
  const Tensor expanded = make(irregular(5 * 4, 3.0), {1, 1, 5, 4}, dev()).expand({2, 3, 5, 4});
  const TensorList layouts{rows_strided, batch_permuted, expanded};
  for (size_t i = 0; i < layouts.size(); ++i) {
    const Tensor& t = layouts[i];
    const auto tv = values(t);
    const Dims d{t.numel() / 20, 5, 5, 4, 4};
    for (bool causal : {false, true})
      EXPECT_TRUE(all_close(sdpa(t, t, t, causal), make(ref_attention(tv, tv, tv, d, causal, 0.5), t.sizes())))
          << "layout " << i << " causal " << causal;
  }
}

TEST_P(AttentionTest, Errors) {
  const auto f32 = TensorOptions(kFloat32, dev());
  const Tensor q = ones({2, 4, 8}, f32), k = ones({2, 5, 8}, f32);
  EXPECT_TRUE(throws<ShapeError>([&] { sdpa(q, ones({2, 5, 7}, f32), k, false); },
                                 "[scaled_dot_product_attention] expects query [..., L, E], key [..., S, E] and value "
                                 "[..., S, Ev], got [2, 4, 8], [2, 5, 7] and [2, 5, 8]"));
  EXPECT_TRUE(throws<ShapeError>([&] { sdpa(q, k, ones({2, 6, 8}, f32), false); }, "value [..., S, Ev]"));
  EXPECT_TRUE(throws<ShapeError>([&] { sdpa(ones({8}, f32), k, k, false); }, "need at least 2 dims"));
  EXPECT_TRUE(throws<DTypeError>([&] { sdpa(q, k.to(kFloat64), k, false); },
                                 "query, key and value must share a dtype, got float32, float64 and float32"));
  EXPECT_TRUE(throws<DTypeError>([&] { sdpa(ones({2, 3}, TensorOptions(kInt64, dev())), k, k, false); },
                                 "[scaled_dot_product_attention] query must be a float tensor"));
  EXPECT_TRUE(throws<ValueError>(
      [&] { scaled_dot_product_attention(q, k, k, ones({4, 5}, TensorOptions(kBool, dev())), 0.0, true); },
      "give attn_mask or is_causal, not both"));
  EXPECT_TRUE(throws<ValueError>([&] { scaled_dot_product_attention(q, k, k, Tensor(), 1.0); },
                                 "dropout_p must be in [0, 1), got 1"));
}

}  // namespace
}  // namespace rtx::testing
