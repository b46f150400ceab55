// Neural-network functions: softmax and log_softmax, layer and batch normalization, embedding, dropout
// and one_hot. Forward passes and first-order backward passes run fused kernels. Second order:
// softmax, log_softmax and embedding record their backward as internal ops whose own backward is
// written with public ops; layer_norm and batch_norm switch their backward to a formula of public ops
// (which autograd differentiates again) when it is itself being recorded (create_graph).
#include <algorithm>

#include "autograd/function.h"
#include "ops/internal.h"
#include "ops/nn_internal.h"
#include "dispatch/nn.h"
#include "dispatch/norm.h"

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

std::optional<std::pair<int64_t, int64_t>> index_bounds(const Tensor& indices, std::optional<int64_t> skip) {
  const kernels::IndexBounds b = kernels::index_bounds_kernel.get(indices.device())(contiguous_raw(indices), skip);
  if (!b.found) return std::nullopt;
  return std::make_pair(b.min, b.max);
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

// A per-feature parameter (weight, bias, running statistic): absent, or a float tensor of shape
// `shape` on x's device.
void check_param(const char* op, const char* arg, const Tensor& p, const Shape& shape, const Tensor& x) {
  if (!p.defined()) return;
  check_float(p, op, arg);
  detail::check_same_device(op, x, p);
  RTX_CHECK(p.sizes() == shape, ShapeError, "[{}] {} must have shape {}, got {}", op, arg, shape_str(shape),
            shape_str(p.sizes()));
}

// A parameter as the kernels take it: contiguous, in x's dtype (undefined stays undefined).
Tensor kernel_param(const Tensor& p, DType dtype) {
  return p.defined() ? contiguous_raw(detail::cast(p, dtype)) : Tensor();
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

// ---- normalization ------------------------------------------------------------------------------

// x normalized over dims with biased statistics, and the reciprocal standard deviation (public ops).
struct Normalized {
  Tensor xhat, rstd;
};
Normalized normalize(const Tensor& x, const Shape& dims, double eps) {
  const Tensor centered = x - mean(x, dims, true);
  const Tensor rstd = rsqrt(mean(centered * centered, dims, true) + eps);
  return {centered * rstd, rstd};
}

// Input gradient of a normalization whose statistics come from x itself, given the gradient of xhat.
Tensor normalized_input_grad(const Tensor& gxhat, const Normalized& n, const Shape& dims) {
  return n.rstd * (gxhat - mean(gxhat, dims, true) - n.xhat * mean(gxhat * n.xhat, dims, true));
}

// Which of (x, weight, bias) need a gradient; fixed when the node is recorded.
struct NeedsGrad {
  bool x, weight, bias;
};

TensorList layer_norm_backward_composite(const Tensor& g, const Tensor& x, const Tensor& weight, int64_t k, double eps,
                                         NeedsGrad needs) {
  Shape dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  const Normalized n = normalize(x, dims, eps);
  const Tensor gxhat = weight.defined() ? g * weight : g;
  // Weight and bias gradients in x's shape: the engine sums them down to the parameter's shape.
  return {needs.x ? normalized_input_grad(gxhat, n, dims) : Tensor(), needs.weight ? g * n.xhat : Tensor(),
          needs.bias ? g : Tensor()};
}

TensorList batch_norm_backward_composite(const Tensor& g, const Tensor& x, const Tensor& weight,
                                         const Tensor& saved_mean, const Tensor& saved_invstd, bool training,
                                         double eps, NeedsGrad needs) {
  Shape dims{0};
  for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
  Shape channel_shape(x.dim(), 1);
  channel_shape[1] = x.size(1);
  const Normalized n = training ? normalize(x, dims, eps)
                                : Normalized{(x - saved_mean.view(channel_shape)) * saved_invstd.view(channel_shape),
                                             saved_invstd.view(channel_shape)};
  const Tensor gxhat = weight.defined() ? g * weight.view(channel_shape) : g;
  Tensor gx;
  if (needs.x) gx = training ? normalized_input_grad(gxhat, n, dims) : gxhat * n.rstd;
  return {gx, needs.weight ? sum(g * n.xhat, dims) : Tensor(), needs.bias ? sum(g, dims) : Tensor()};
}

// Gradient outputs of the fused normalization backward kernels (undefined where none is needed).
struct FusedGrads {
  Tensor x, weight, bias;
};
FusedGrads alloc_grads(const Tensor& x, const Shape& param_shape, NeedsGrad needs) {
  auto alloc = [&](bool need, const Shape& shape) {
    return need ? detail::make_tensor(shape, x.dtype(), x.device()) : Tensor();
  };
  return {alloc(needs.x, x.sizes()), alloc(needs.weight, param_shape), alloc(needs.bias, param_shape)};
}

NeedsGrad needs_grad(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return {autograd::requires_grad(x), autograd::requires_grad(weight), autograd::requires_grad(bias)};
}

// The running statistics move toward the batch statistics: running = (1 - momentum) * running +
// momentum * stat (in place, not recorded; bumps their version).
void update_running_stats(const Tensor& running_mean, const Tensor& running_var, const Tensor& batch_mean,
                          const Tensor& batch_var, int64_t count, double momentum) {
  NoGradGuard no_grad;
  Tensor rm = running_mean, rv = running_var;
  lerp_(rm, batch_mean, momentum);
  lerp_(rv, batch_var * (static_cast<double>(count) / static_cast<double>(count - 1)), momentum);
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

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_forward("softmax", x, dim, false); }

Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_forward("log_softmax", x, dim, true); }

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const char* op = "layer_norm";
  check_defined(x, op);
  check_float(x, op);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  RTX_CHECK(k >= 1, ShapeError, "[layer_norm] normalized_shape must name at least one dim, got []");
  RTX_CHECK(k <= x.dim() && std::equal(normalized_shape.begin(), normalized_shape.end(), x.sizes().end() - k),
            ShapeError, "[layer_norm] normalized_shape {} does not match the trailing dims of the input of shape {}",
            shape_str(normalized_shape), shape_str(x.sizes()));
  check_param(op, "weight", weight, normalized_shape, x);
  check_param(op, "bias", bias, normalized_shape, x);
  const int64_t n = detail::numel_of(normalized_shape);
  const int64_t m = detail::numel_of(Shape(x.sizes().begin(), x.sizes().end() - k));
  const DType acc = detail::acc_dtype(x.dtype());
  Tensor out = detail::make_tensor(x.sizes(), x.dtype(), x.device());
  Tensor row_mean = detail::make_tensor({m}, acc, x.device());
  Tensor row_rstd = detail::make_tensor({m}, acc, x.device());
  if (x.numel() > 0)
    kernels::layer_norm_kernel.get(x.device())(out, row_mean, row_rstd, contiguous_raw(x),
                                               kernel_param(weight, x.dtype()), kernel_param(bias, x.dtype()), m, n,
                                               eps);
  if (auto node = autograd::make_node(op, x, weight, bias)) {
    node->save(x);
    node->save(weight);
    node->save(row_mean);
    node->save(row_rstd);
    const NeedsGrad needs = needs_grad(x, weight, bias);
    node->set_backward([needs, normalized_shape, k, m, n, eps](const TensorList& grads, const TensorList& s) {
      const Tensor &g = grads[0], &x = s[0], &weight = s[1];
      if (detail::needs_differentiable_backward({g, x, weight}))
        return layer_norm_backward_composite(g, x, weight, k, eps, needs);
      FusedGrads r = alloc_grads(x, normalized_shape, needs);
      kernels::layer_norm_backward_kernel.get(x.device())(r.x, r.weight, r.bias,
                                                          contiguous_raw(detail::cast(g, x.dtype())), contiguous_raw(x),
                                                          s[2], s[3], kernel_param(weight, x.dtype()), m, n);
      return TensorList{r.x, r.weight, r.bias};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  check_defined(x, op);
  check_float(x, op);
  RTX_CHECK(x.dim() >= 2, ShapeError, "[batch_norm] expects an input of shape [N, C, ...] (at least 2-d), got {}",
            shape_str(x.sizes()));
  RTX_CHECK(running_mean.defined() == running_var.defined(), ValueError,
            "[batch_norm] running_mean and running_var must be given together (or both left undefined)");
  RTX_CHECK(training || running_mean.defined(), ValueError,
            "[batch_norm] evaluation mode (training=false) normalizes with running_mean and running_var, but none "
            "were given");
  const Shape channels{x.size(1)};
  check_param(op, "running_mean", running_mean, channels, x);
  check_param(op, "running_var", running_var, channels, x);
  check_param(op, "weight", weight, channels, x);
  check_param(op, "bias", bias, channels, x);
  const int64_t count = x.size(1) == 0 ? 0 : x.numel() / x.size(1);  // values per channel
  RTX_CHECK(!training || count > 1 || x.numel() == 0, ValueError,
            "[batch_norm] expected more than 1 value per channel when training, got input of shape {}",
            shape_str(x.sizes()));
  const DType acc = detail::acc_dtype(x.dtype());
  const Tensor xc = contiguous_raw(x);
  Tensor mu, invstd;
  if (training) {
    mu = detail::make_tensor(channels, acc, x.device());
    Tensor var = detail::make_tensor(channels, acc, x.device());
    if (x.numel() > 0) kernels::batch_norm_stats_kernel.get(x.device())(mu, var, xc);
    NoGradGuard no_grad;
    invstd = rsqrt(var + eps);
    if (running_mean.defined() && x.numel() > 0)
      update_running_stats(running_mean, running_var, mu, var, count, momentum);
  } else {
    NoGradGuard no_grad;
    mu = kernel_param(running_mean, acc);
    invstd = rsqrt(detail::cast(running_var, acc) + eps);
  }
  Tensor out = detail::make_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() > 0)
    kernels::batch_norm_apply_kernel.get(x.device())(out, xc, mu, invstd, kernel_param(weight, x.dtype()),
                                                     kernel_param(bias, x.dtype()));
  if (auto node = autograd::make_node(op, x, weight, bias)) {
    node->save(x);
    node->save(weight);
    node->save(mu);
    node->save(invstd);
    const NeedsGrad needs = needs_grad(x, weight, bias);
    node->set_backward([needs, channels, training, eps](const TensorList& grads, const TensorList& s) {
      const Tensor &g = grads[0], &x = s[0], &weight = s[1];
      if (detail::needs_differentiable_backward({g, x, weight}))
        return batch_norm_backward_composite(g, x, weight, s[2], s[3], training, eps, needs);
      FusedGrads r = alloc_grads(x, channels, needs);
      kernels::batch_norm_backward_kernel.get(x.device())(r.x, r.weight, r.bias,
                                                          contiguous_raw(detail::cast(g, x.dtype())), contiguous_raw(x),
                                                          s[2], s[3], kernel_param(weight, x.dtype()), training);
      return TensorList{r.x, r.weight, r.bias};
    });
    autograd::set_history(out, node);
  }
  return out;
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
  if (auto b = detail::index_bounds(idx)) {
    const int64_t bad = b->first < 0 ? b->first : b->second;
    RTX_CHECK(b->first >= 0 && b->second < num, IndexError,
              "[embedding] index {} is out of range for {} embeddings (valid indices: 0..{})", bad, num, num - 1);
  }
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
  const auto bounds = detail::index_bounds(idx);
  if (num_classes == -1) {
    RTX_CHECK(bounds.has_value(), ValueError,
              "[one_hot] cannot infer num_classes from an empty tensor of shape {}; pass num_classes",
              shape_str(indices.sizes()));
    num_classes = bounds->second + 1;
  }
  if (bounds) {
    RTX_CHECK(bounds->first >= 0, IndexError, "[one_hot] class value {} is negative; class values must be >= 0",
              bounds->first);
    RTX_CHECK(bounds->second < num_classes, IndexError, "[one_hot] class value {} is out of range for num_classes = {}",
              bounds->second, num_classes);
  }
  Shape out_shape = indices.sizes();
  out_shape.push_back(num_classes);
  Tensor out = detail::make_tensor(out_shape, kInt64, indices.device());
  if (out.numel() > 0) kernels::one_hot_kernel.get(indices.device())(out, idx);
  return out;
}

}  // namespace rtx
