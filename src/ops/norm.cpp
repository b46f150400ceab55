// Layer and batch normalization front-ends. Forward passes and first-order backward passes run fused
// kernels; when the backward is itself being recorded (create_graph) it switches to a formula of
// public ops, which autograd differentiates again.
#include "autograd/function.h"
#include "dispatch/norm.h"
#include "ops/internal.h"
#include "ops/nn_internal.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::check_float;
using detail::contiguous_raw;
using detail::shape_str;

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

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  RTX_AUTOCAST(fp32, layer_norm, x, normalized_shape, weight, bias, eps);
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
  RTX_AUTOCAST(fp32, batch_norm, x, running_mean, running_var, weight, bias, training, momentum, eps);
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

}  // namespace rtx
