// Neural-network functions: softmax and log_softmax, embedding, dropout and one_hot. Forward passes
// and first-order backward passes run fused kernels; for second order, softmax, log_softmax and
// embedding record their backward as internal ops whose own backward is written with public ops.
#include <algorithm>
#include <limits>

#include "autograd/function.h"
#include "ops/internal.h"
#include "ops/nn_internal.h"
#include "dispatch/nn.h"

namespace rtx {

// ---- shared helpers ---------------------------------------------------------------------------

namespace detail {

DType acc_dtype(DType t) { return t == kFloat16 || t == kBFloat16 ? kFloat32 : t; }

void check_float(const Tensor& t, const char* op, const char* arg) {
  RTX_CHECK(is_floating(t.dtype()), DTypeError,
            "[{}] {} must be a float tensor, got dtype {}; convert it with .to(rtx::kFloat32)", op, arg, t.dtype());
}

bool needs_differentiable_backward(const TensorList& ts) {
  if (!is_grad_enabled()) return false;
  return std::any_of(ts.begin(), ts.end(), [](const Tensor& t) { return autograd::requires_grad(t); });
}

void check_indices(const Tensor& indices, const kernels::IndexCheck& check) {
  if (indices.numel() == 0) return;
  raise_index_fault(kernels::index_check_kernel.get(indices.device())(contiguous_raw(indices), check));
}

std::string embedding_fault_message(const kernels::IndexFault& fault) {
  const int64_t num = fault.check.bound;
  return fmt::format("[embedding] index {} is out of range for {} embeddings (valid indices: 0..{})", fault.value, num,
                     num - 1);
}

std::string one_hot_fault_message(const kernels::IndexFault& fault) {
  if (fault.value < 0)
    return fmt::format("[one_hot] class value {} is negative; class values must be >= 0", fault.value);
  return fmt::format("[one_hot] class value {} is out of range for num_classes = {}", fault.value, fault.check.bound);
}

}  // namespace detail

namespace {

using detail::check_defined;
using detail::check_float;
using detail::contiguous_raw;
using detail::shape_str;

void check_index_dtype(const char* op, const Tensor& indices) {
  RTX_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, DTypeError,
            "[{}] indices must be int64 or int32, got dtype {}; convert them with .to(rtx::kInt64)", op,
            indices.dtype());
}

// The sizes before, along and after dim.
struct AroundDim {
  int64_t outer = 1, n = 1, inner = 1;
};
AroundDim around_dim(const Shape& sizes, int64_t dim) {
  AroundDim a;
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (i < dim)
      a.outer *= sizes[i];
    else if (i == dim)
      a.n = sizes[i];
    else
      a.inner *= sizes[i];
  }
  return a;
}

// ---- softmax ------------------------------------------------------------------------------------

Tensor softmax_forward(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_defined(x, op);
  check_float(x, op);
  const int64_t d = detail::wrap_dim(dim, x.dim(), op);
  Tensor out = detail::make_tensor(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) {
    const AroundDim a = around_dim(x.sizes(), d);
    kernels::softmax_kernel.get(x.device())(out, contiguous_raw(x), a.outer, a.n, a.inner, log);
  }
  if (auto node = autograd::make_node(op, x)) {
    node->save_output(out);
    node->set_backward([d, log](const TensorList& g, const TensorList& s) {
      return TensorList{log ? detail::log_softmax_backward(g[0], s[0], d) : detail::softmax_backward(g[0], s[0], d)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// The fused backward of (log_)softmax, recorded so that it can be differentiated again.
Tensor softmax_backward_op(const char* op, const Tensor& g, const Tensor& out, int64_t dim, bool log) {
  Tensor grad = detail::make_tensor(out.sizes(), out.dtype(), out.device());
  if (grad.numel() > 0) {
    const AroundDim a = around_dim(out.sizes(), dim);
    kernels::softmax_backward_kernel.get(out.device())(grad, contiguous_raw(detail::cast(g, out.dtype())),
                                                       contiguous_raw(out), a.outer, a.n, a.inner, log);
  }
  if (auto node = autograd::make_node(op, g, out)) {
    node->save(g);
    node->save(out);
    node->set_backward([dim, log](const TensorList& gg, const TensorList& s) {
      const Tensor& G = gg[0];
      const Tensor& g = s[0];
      const Tensor& out = s[1];
      const Shape d{dim};
      if (log) {
        // grad = g - p * sum(g), p = exp(out)
        const Tensor p = exp(out);
        return TensorList{G - sum(G * p, d, true), -G * p * sum(g, d, true)};
      }
      // grad = out * (g - sum(g * out)), linear in g with the same operator.
      return TensorList{detail::softmax_backward(G, out, dim),
                        G * (g - sum(g * out, d, true)) - g * sum(G * out, d, true)};
    });
    autograd::set_history(grad, node);
  }
  return grad;
}

}  // namespace

// ---- internal backward ops ----------------------------------------------------------------------

namespace detail {

Tensor softmax_backward(const Tensor& g, const Tensor& out, int64_t dim) {
  return softmax_backward_op("softmax_backward", g, out, dim, false);
}

Tensor log_softmax_backward(const Tensor& g, const Tensor& out, int64_t dim) {
  return softmax_backward_op("log_softmax_backward", g, out, dim, true);
}

Tensor embedding_backward(const Tensor& g, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx) {
  const int64_t dim = g.size(-1);
  Tensor grad = make_tensor({num_weights, dim}, g.dtype(), g.device());
  if (grad.numel() > 0)
    kernels::embedding_backward_kernel.get(g.device())(grad, contiguous_raw(g), contiguous_raw(indices), padding_idx);
  if (auto node = autograd::make_node("embedding_backward", g)) {
    node->save(indices);
    node->set_backward([padding_idx](const TensorList& gg, const TensorList& s) {
      Tensor r = embedding(gg[0], s[0]);
      if (padding_idx) r = r * ne(s[0], *padding_idx).unsqueeze(-1);
      return TensorList{r};
    });
    autograd::set_history(grad, node);
  }
  return grad;
}

}  // namespace detail

// ---- public ops ---------------------------------------------------------------------------------

Tensor softmax(const Tensor& x, int64_t dim) {
  RTX_AUTOCAST(fp32, softmax, x, dim);
  return softmax_forward("softmax", x, dim, false);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  RTX_AUTOCAST(fp32, log_softmax, x, dim);
  return softmax_forward("log_softmax", x, dim, true);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  const char* op = "embedding";
  check_defined(weight, op, "weight");
  check_defined(indices, op, "indices");
  RTX_CHECK(weight.dim() == 2, ShapeError,
            "[embedding] weight must be 2-d [num_embeddings, embedding_dim], got shape {}", shape_str(weight.sizes()));
  check_index_dtype(op, indices);
  detail::check_same_device(op, weight, indices);
  const int64_t num = weight.size(0);
  if (padding_idx) {
    RTX_CHECK(*padding_idx >= -num && *padding_idx < num, IndexError,
              "[embedding] padding_idx {} is out of range for {} embeddings (expected {}..{})", *padding_idx, num, -num,
              num - 1);
    if (*padding_idx < 0) *padding_idx += num;
  }
  const Tensor idx = contiguous_raw(indices);
  detail::check_indices(idx, {kernels::IndexOp::Embedding, num, 0, std::nullopt});
  Shape out_shape = indices.sizes();
  out_shape.push_back(weight.size(1));
  Tensor out = detail::make_tensor(out_shape, weight.dtype(), weight.device());
  if (out.numel() > 0) kernels::embedding_kernel.get(weight.device())(out, contiguous_raw(weight), idx);
  if (auto node = autograd::make_node(op, weight)) {
    node->save(idx);
    node->set_backward([num, padding_idx](const TensorList& g, const TensorList& s) {
      return TensorList{detail::embedding_backward(g[0], s[0], num, padding_idx)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  check_defined(x, "dropout");
  RTX_CHECK(p >= 0.0 && p <= 1.0, ValueError, "[dropout] p must be a probability in [0, 1], got {}", p);
  check_float(x, "dropout");
  if (!training || p == 0.0 || x.numel() == 0) return x;
  if (p == 1.0) return x * 0;
  Tensor mask, out;
  {
    NoGradGuard no_grad;
    mask = to_dtype(bernoulli(x, 1.0 - p), x.dtype()) * (1.0 / (1.0 - p));
    out = x * mask;
  }
  if (auto node = autograd::make_node("dropout", x)) {
    node->save(mask);
    node->set_backward([](const TensorList& g, const TensorList& s) { return TensorList{g[0] * s[0]}; });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  check_defined(indices, "one_hot", "indices");
  RTX_CHECK(indices.dtype() == kInt64, DTypeError,
            "[one_hot] indices must be int64, got dtype {}; convert them with .to(rtx::kInt64)", indices.dtype());
  RTX_CHECK(num_classes >= -1, ValueError, "[one_hot] num_classes must be -1 (inferred) or nonnegative, got {}",
            num_classes);
  const Tensor idx = contiguous_raw(indices);
  if (num_classes == -1) {
    RTX_CHECK(idx.numel() > 0, ValueError,
              "[one_hot] cannot infer num_classes from an empty tensor of shape {}; pass num_classes",
              shape_str(indices.sizes()));
    // The output's size depends on the largest value: it is read back (a synchronization on a GPU,
    // as in PyTorch). A largest value below zero leaves no class, and the check reports it.
    const int64_t top = amax(idx).item<int64_t>();
    num_classes = top < 0 ? 0 : top + (top < std::numeric_limits<int64_t>::max() ? 1 : 0);
  }
  detail::check_indices(idx, {kernels::IndexOp::OneHot, num_classes, 0, std::nullopt});
  Shape out_shape = indices.sizes();
  out_shape.push_back(num_classes);
  Tensor out = detail::make_tensor(out_shape, kInt64, indices.device());
  if (out.numel() > 0) kernels::one_hot_kernel.get(indices.device())(out, idx);
  return out;
}

}  // namespace rtx
