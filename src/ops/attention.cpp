// scaled_dot_product_attention: softmax(q k^T * scale + mask) v over the last two dims.
//
// Without a mask or dropout, and with q, k and v sharing their batch dims and head size, it runs
// the fused kernels: the L x S scores are never stored; the forward keeps each row's log-sum-exp and
// the backward recomputes the probabilities from it. Otherwise (and for a backward that is itself
// recorded, create_graph) it is composed of public ops.
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "autograd/function.h"
#include "ops/internal.h"
#include "ops/nn_internal.h"
#include "dispatch/attention.h"
#include "rtx/autograd.h"

namespace rtx {

namespace {

using detail::shape_str;

constexpr const char* kOp = "scaled_dot_product_attention";

// The scaled scores with the causal or given mask applied (composite path).
Tensor masked_scores(const Tensor& q, const Tensor& k, const Tensor& attn_mask, bool is_causal, double scale) {
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (is_causal) {
    const Tensor keep = tril(ones({q.size(-2), k.size(-2)}, TensorOptions(kBool, q.device())));
    return masked_fill(scores, logical_not(keep), neg_inf);
  }
  if (!attn_mask.defined()) return scores;
  if (attn_mask.dtype() == kBool) return masked_fill(scores, logical_not(attn_mask), neg_inf);
  return scores + attn_mask;
}

// Gradients of the unmasked, dropout-free attention from public ops (differentiable again).
TensorList attention_backward_composite(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                        bool is_causal, double scale) {
  const Tensor p = softmax(masked_scores(q, k, {}, is_causal, scale), -1);
  const Tensor dp = matmul(g, v.transpose(-2, -1));
  const Tensor ds = p * (dp - sum(dp * p, {-1}, true));
  return {matmul(ds, k) * scale, matmul(ds.transpose(-2, -1), q) * scale, matmul(p.transpose(-2, -1), g)};
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p,
                  bool is_causal) {
  detail::check_defined(q, kOp, "query");
  detail::check_defined(k, kOp, "key");
  detail::check_defined(v, kOp, "value");
  detail::check_float(q, kOp, "query");
  RTX_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), DTypeError,
            "[{}] query, key and value must share a dtype, got {}, {} and {}", kOp, q.dtype(), k.dtype(), v.dtype());
  detail::check_same_device(kOp, q, k);
  detail::check_same_device(kOp, q, v);
  RTX_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ShapeError,
            "[{}] query, key and value need at least 2 dims ([..., L, E], [..., S, E], [..., S, Ev]), got {}, {} "
            "and {}",
            kOp, shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  RTX_CHECK(q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), ShapeError,
            "[{}] expects query [..., L, E], key [..., S, E] and value [..., S, Ev], got {}, {} and {}", kOp,
            shape_str(q.sizes()), shape_str(k.sizes()), shape_str(v.sizes()));
  RTX_CHECK(!(is_causal && attn_mask.defined()), ValueError, "[{}] give attn_mask or is_causal, not both", kOp);
  RTX_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, ValueError, "[{}] dropout_p must be in [0, 1), got {}", kOp,
            dropout_p);
  if (attn_mask.defined()) detail::check_same_device(kOp, q, attn_mask);
}

bool fused_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask, double dropout_p) {
  const Shape batch(q.sizes().begin(), q.sizes().end() - 2);
  return !attn_mask.defined() && dropout_p == 0.0 && q.dim() == k.dim() && q.dim() == v.dim() &&
         Shape(k.sizes().begin(), k.sizes().end() - 2) == batch && Shape(v.sizes().begin(), v.sizes().end() - 2) == batch &&
         v.size(-1) == q.size(-1) && q.numel() > 0 && k.numel() > 0;
}

// An operand the kernels read as it is when its heads have a layout (see head_layout), else a
// contiguous copy (recorded, so gradients reach the original).
Tensor kernel_operand(const Tensor& t) { return detail::head_layout(t) ? t : t.contiguous(); }

// A new [..., n, D] tensor stored as [..., n, heads, D] when it has a heads dim (4 or more dims):
// the layout in which a transformer's transpose(-3, -2) back to [..., n, heads, D] and the merge of
// the heads need no copy. Fewer dims: contiguous.
Tensor make_head_major(const Shape& shape, DType dtype, Device device) {
  const auto n = static_cast<int64_t>(shape.size());
  if (n < 4) return detail::make_tensor(shape, dtype, device);
  std::vector<int64_t> layout(shape.size());
  std::iota(layout.begin(), layout.end(), int64_t{0});
  std::swap(layout[n - 3], layout[n - 2]);
  return detail::make_permuted(shape, layout, dtype, device);
}

// The node records q, k and v as the kernels read them (strided heads as they are; other layouts
// through the recorded contiguous()), so its backward hands them to the kernel unchanged.
Tensor attention_fused(const Tensor& query, const Tensor& key, const Tensor& value, bool is_causal, double scale) {
  const Tensor q = kernel_operand(query), k = kernel_operand(key), v = kernel_operand(value);
  Tensor out = make_head_major(q.sizes(), q.dtype(), q.device());
  Tensor lse = detail::make_tensor({detail::head_count(q), q.size(-2)}, detail::acc_dtype(q.dtype()), q.device());
  kernels::attention_kernel.get(q.device())(out, lse, q, k, v, scale, is_causal);
  if (auto node = autograd::make_node(kOp, q, k, v)) {
    node->save(q);
    node->save(k);
    node->save(v);
    node->save_output(out);
    node->save(lse);
    node->set_backward([is_causal, scale](const TensorList& grads, const TensorList& s) {
      const Tensor &g = grads[0], &q = s[0], &k = s[1], &v = s[2];
      if (detail::needs_differentiable_backward({g, q, k, v}))
        return attention_backward_composite(g, q, k, v, is_causal, scale);
      Tensor dq = make_head_major(q.sizes(), q.dtype(), q.device());
      Tensor dk = make_head_major(k.sizes(), k.dtype(), k.device());
      Tensor dv = make_head_major(v.sizes(), v.dtype(), v.device());
      Tensor gc = detail::cast(g, q.dtype());
      if (!detail::head_layout(gc)) gc = detail::contiguous_raw(gc);
      kernels::attention_backward_kernel.get(q.device())(dq, dk, dv, gc, q, k, v, s[3], s[4], scale, is_causal);
      return TensorList{dq, dk, dv};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// Attention of Hq query heads over Hkv key and value heads (Hq a multiple of Hkv): query head h
// reads key and value head h / (Hq / Hkv). Queries are viewed as [..., Hkv, group, L, E] and keys and
// values expanded (stride 0) to the same group, so that no head is copied on the way in and the
// gradients of a group sum back to its key and value head.
Tensor grouped_query_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                               double dropout_p, bool is_causal, std::optional<double> scale) {
  const int64_t hq = q.size(-3), hkv = k.size(-3);
  RTX_CHECK(v.size(-3) == hkv && hkv > 0 && hq % hkv == 0, ShapeError,
            "[{}] with enable_gqa the query heads ({}) must be a multiple of the key and value heads ({} and {})", kOp,
            hq, hkv, v.size(-3));
  const int64_t group = hq / hkv;
  const auto grouped = [group](const Tensor& t) {
    Shape shape = t.sizes();
    shape.insert(shape.end() - 2, group);
    return t.unsqueeze(-3).expand(shape);
  };
  Tensor mask = attn_mask;
  if (mask.defined() && mask.dim() >= 3)
    mask = mask.size(-3) == hq ? mask.unflatten(-3, {hkv, group}) : mask.unsqueeze(-3);
  const Tensor out = scaled_dot_product_attention(q.unflatten(-3, {hkv, group}), grouped(k), grouped(v), mask,
                                                  dropout_p, is_causal, scale);
  return out.flatten(-4, -3);
}

}  // namespace


Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  RTX_AUTOCAST(lower, scaled_dot_product_attention, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  check_inputs(q, k, v, attn_mask, dropout_p, is_causal);
  if (enable_gqa && q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim() && k.size(-3) != q.size(-3))
    return grouped_query_attention(q, k, v, attn_mask, dropout_p, is_causal, scale);
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (fused_applies(q, k, v, attn_mask, dropout_p)) return attention_fused(q, k, v, is_causal, s);
  Tensor weights = softmax(masked_scores(q, k, attn_mask, is_causal, s), -1);
  if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
  return matmul(weights, v);
}

}  // namespace rtx
