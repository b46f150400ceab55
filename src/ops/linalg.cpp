// Linear algebra front-ends: matmul with numpy semantics, mm, bmm and linear. Every product comes down
// to one recorded op on operands of equal batch shape (broadcast batch dims are stride-0 views, 1-d
// operands get a unit dim, batch dims fold into rows when the right operand is a matrix); its
// backward is matmul again, so gradients of any order follow. linear with a matrix weight is one
// product with its bias fused in and one node whose backward is matmuls and a sum.
#include <algorithm>
#include <utility>

#include "autograd/function.h"
#include "ops/internal.h"
#include "dispatch/linalg.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::shape_str;

// Checks every product shares: defined operands on one device with one (non-bool) dtype.
void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  check_defined(a, op, "first operand");
  check_defined(b, op, "second operand");
  detail::check_same_device(op, a, b);
  RTX_CHECK(a.dtype() == b.dtype(), DTypeError,
            "[{}] expected both operands to have the same dtype, got {} and {}; convert one with .to(dtype)", op,
            a.dtype(), b.dtype());
  RTX_CHECK(a.dtype() != kBool, DTypeError, "[{}] not supported for bool tensors; convert them with .to(dtype)", op);
}

void check_inner(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  RTX_CHECK(ka == kb, ShapeError, "[{}] shapes {} and {}: inner dimensions {} != {}", op, shape_str(a.sizes()),
            shape_str(b.sizes()), ka, kb);
}

Shape batch_dims(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

// The broadcast batch shape of a [..., M, K] and b [..., K, N].
Shape broadcast_batch(const char* op, const Tensor& a, const Tensor& b, const Tensor& a_in, const Tensor& b_in) {
  const Shape ba = batch_dims(a), bb = batch_dims(b);
  const size_t n = std::max(ba.size(), bb.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - ba.size() ? 1 : ba[i - (n - ba.size())];
    const int64_t db = i < n - bb.size() ? 1 : bb[i - (n - bb.size())];
    RTX_CHECK(da == db || da == 1 || db == 1, ShapeError,
              "[{}] shapes {} and {}: batch dimensions {} and {} cannot be broadcast", op, shape_str(a_in.sizes()),
              shape_str(b_in.sizes()), shape_str(ba), shape_str(bb));
  }
  return broadcast_shapes(ba, bb, op);
}

// a [..., M, K] @ b [..., K, N] with equal batch shapes, recorded as op.
Tensor product(const char* op, const Tensor& a, const Tensor& b) {
  Shape shape = a.sizes();
  shape.back() = b.sizes().back();
  Tensor out = detail::make_tensor(shape, a.dtype(), a.device());
  if (out.numel() > 0) kernels::matmul_kernel.get(a.device())(out, a, b, {});
  if (auto node = autograd::make_node(op, a, b)) {
    const bool need_a = autograd::requires_grad(a), need_b = autograd::requires_grad(b);
    node->save(need_b ? a : Tensor());
    node->save(need_a ? b : Tensor());
    node->set_backward([need_a, need_b](const TensorList& g, const TensorList& s) {
      return TensorList{need_a ? matmul(g[0], s[1].mT()) : Tensor(), need_b ? matmul(s[0].mT(), g[0]) : Tensor()};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// The weight and bias gradients of linear, g^T @ x and g's column sums, as one product where the
// backend sums g in the product's epilogue. Not recorded: only for a backward that builds no graph.
std::pair<Tensor, Tensor> linear_parameter_grads(const Tensor& g, const Tensor& x) {
  const Tensor a = g.mT();
  Tensor grad_w = detail::make_tensor({a.size(0), x.size(1)}, g.dtype(), g.device());
  Tensor grad_b = detail::make_tensor({a.size(0)}, g.dtype(), g.device());
  bool summed = false;
  if (grad_w.numel() > 0) summed = kernels::matmul_kernel.get(g.device())(grad_w, a, x, {Tensor(), grad_b});
  return {grad_w, summed ? grad_b : g.sum(Shape{0})};
}

// linear of a float input and a 2-d weight [N, K] with an optional [N] bias, as one product whose
// bias add the backend fuses, recorded as one node: its backward computes the weight gradient as
// g^T @ x, contiguous in the weight's own layout, and the bias gradient as g's column sums, both in
// one product when no graph of the backward is recorded.
Tensor linear_product(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t k = weight.size(1), n = weight.size(0);
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  const int64_t m = detail::numel_of(out_shape);
  out_shape.push_back(n);
  const Tensor x2 = x.dim() == 2 ? x : x.reshape({m, k});
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = detail::make_tensor({m, n}, x.dtype(), x.device());
  if (out.numel() > 0) kernels::matmul_kernel.get(x.device())(out, x2, weight.t(), {b, Tensor()});
  if (auto node = autograd::make_node("linear", x2, weight, bias)) {
    const bool need_x = autograd::requires_grad(x2), need_w = autograd::requires_grad(weight),
               need_b = autograd::requires_grad(bias);
    node->save(need_w ? x2 : Tensor());
    node->save(need_x ? weight : Tensor());
    node->set_backward([need_x, need_w, need_b](const TensorList& g, const TensorList& s) {
      const Tensor grad_x = need_x ? matmul(g[0], s[1]) : Tensor();
      if (need_w && need_b && !is_grad_enabled()) {
        auto [grad_w, grad_b] = linear_parameter_grads(g[0], s[0]);
        return TensorList{grad_x, grad_w, grad_b};
      }
      return TensorList{grad_x, need_w ? matmul(g[0].mT(), s[0]) : Tensor(), need_b ? g[0].sum(Shape{0}) : Tensor()};
    });
    autograd::set_history(out, node);
  }
  return x.dim() == 2 ? out : out.view(out_shape);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  RTX_AUTOCAST(lower, matmul, a, b);
  const char* op = "matmul";
  check_operands(op, a, b);
  RTX_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError, "[matmul] both operands must be at least 1-d, got shapes {} and {}",
            shape_str(a.sizes()), shape_str(b.sizes()));
  const int64_t k = a.size(-1);
  check_inner(op, a, b, k, b.size(b.dim() == 1 ? 0 : -2));
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Tensor out;
  // A matrix on the right: a's batch dims fold into its rows when a view allows it, giving one GEMM.
  Shape out_shape(a2.sizes().begin(), a2.sizes().end() - 1);
  const int64_t m = detail::numel_of(out_shape);
  if (b2.dim() == 2 && (a2.dim() == 2 || detail::view_strides(a2.sizes(), a2.strides(), {m, k}))) {
    out_shape.push_back(b2.size(1));
    out = product(op, a2.dim() == 2 ? a2 : a2.reshape({m, k}), b2);
    if (a2.dim() != 2) out = out.view(out_shape);
  } else {
    Shape batch = broadcast_batch(op, a2, b2, a, b);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), {a2.size(-2), k});
    sb.insert(sb.end(), {k, b2.size(-1)});
    out = product(op, a2.sizes() == sa ? a2 : a2.expand(sa), b2.sizes() == sb ? b2 : b2.expand(sb));
  }
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  RTX_AUTOCAST(lower, mm, a, b);
  check_operands("mm", a, b);
  RTX_CHECK(a.dim() == 2 && b.dim() == 2, ShapeError, "[mm] expected 2-d operands, got shapes {} and {}",
            shape_str(a.sizes()), shape_str(b.sizes()));
  check_inner("mm", a, b, a.size(1), b.size(0));
  return product("mm", a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  RTX_AUTOCAST(lower, bmm, a, b);
  check_operands("bmm", a, b);
  RTX_CHECK(a.dim() == 3 && b.dim() == 3, ShapeError, "[bmm] expected 3-d operands, got shapes {} and {}",
            shape_str(a.sizes()), shape_str(b.sizes()));
  RTX_CHECK(a.size(0) == b.size(0), ShapeError,
            "[bmm] shapes {} and {}: batch sizes {} != {} (bmm does not broadcast; use matmul)", shape_str(a.sizes()),
            shape_str(b.sizes()), a.size(0), b.size(0));
  check_inner("bmm", a, b, a.size(2), b.size(1));
  return product("bmm", a, b);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  RTX_AUTOCAST(lower, linear, x, weight, bias);
  const char* op = "linear";
  check_defined(x, op);
  check_defined(weight, op, "weight");
  RTX_CHECK(weight.dim() == 1 || weight.dim() == 2, ShapeError,
            "[linear] weight must be 2-d [out_features, in_features] (or 1-d [in_features]), got shape {}",
            shape_str(weight.sizes()));
  RTX_CHECK(x.dim() >= 1, ShapeError, "[linear] the input must be at least 1-d, got shape {}", shape_str(x.sizes()));
  RTX_CHECK(x.size(-1) == weight.size(-1), ShapeError,
            "[linear] input of shape {} has {} features, but weight of shape {} expects in_features = {}",
            shape_str(x.sizes()), x.size(-1), shape_str(weight.sizes()), weight.size(-1));
  check_operands(op, x, weight);
  if (bias.defined()) {
    detail::check_same_device(op, x, bias);
    RTX_CHECK(bias.dtype() == x.dtype(), DTypeError, "[linear] bias has dtype {}, but the input has {}", bias.dtype(),
              x.dtype());
    const int64_t out_features = weight.dim() == 2 ? weight.size(0) : 1;
    RTX_CHECK(bias.dim() == 0 || (bias.dim() == 1 && (bias.size(0) == out_features || bias.size(0) == 1)), ShapeError,
              "[linear] bias of shape {} does not match out_features = {} of weight {}", shape_str(bias.sizes()),
              out_features, shape_str(weight.sizes()));
  }
  const int64_t out_features = weight.dim() == 2 ? weight.size(0) : 1;
  const bool one_product = weight.dim() == 2 && is_floating(x.dtype()) &&
                           (!bias.defined() || (bias.dim() == 1 && bias.size(0) == out_features));
  if (!one_product) {
    Tensor out = matmul(x, weight.t());
    return bias.defined() ? add(out, bias) : out;
  }
  return linear_product(x, weight, bias);
}

}  // namespace rtx
