// Loss functions. cross_entropy and nll_loss run fused kernels forward and backward (log-sum-exp and
// the negative log-likelihood per sample, softmax minus the smoothed one-hot target backward); when
// their backward is itself recorded (create_graph) it is built from public ops instead, so that it can
// be differentiated again. mse_loss and binary_cross_entropy_with_logits are compositions of public ops.
#include "autograd/function.h"
#include "ops/internal.h"
#include "ops/nn_internal.h"
#include "dispatch/loss.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::check_float;
using detail::contiguous_raw;
using detail::shape_str;

// Whether a tensor of shape from broadcasts to shape to without enlarging it.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 1; i <= from.size(); ++i)
    if (from[from.size() - i] != 1 && from[from.size() - i] != to[to.size() - i]) return false;
  return true;
}

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean:
      return mean(loss);
    case Reduction::Sum:
      return sum(loss);
    case Reduction::None:
      break;
  }
  return loss;
}

// ---- class-index losses -------------------------------------------------------------------------

// input [n, classes, inner...] (or [classes] alone) and target [n, inner...] (or 0-d), as the kernels
// see them: [n, classes, inner] and [n, inner].
struct ClassLoss {
  int64_t n = 1, classes = 0, inner = 1;
  Shape input3() const { return {n, classes, inner}; }
  Shape target2() const { return {n, inner}; }
};

// A contiguous copy (or t itself) viewed with shape, which must have t's numel.
Tensor contiguous_as(const Tensor& t, const Shape& shape) {
  const Tensor c = contiguous_raw(t);
  return detail::make_view(c, shape, detail::contiguous_strides(shape), c.storage_offset());
}

ClassLoss check_class_loss(kernels::IndexOp tag, const char* input_name, const Tensor& input, const Tensor& target,
                           const Tensor& weight, int64_t ignore_index) {
  const char* op = kernels::index_op_name(tag);
  check_defined(input, op, input_name);
  check_defined(target, op, "target");
  check_float(input, op, input_name);
  RTX_CHECK(target.dtype() == kInt64, DTypeError,
            "[{}] target must hold int64 class indices, got dtype {}; convert it with .to(rtx::kInt64)", op,
            target.dtype());
  detail::check_same_device(op, input, target);
  RTX_CHECK(input.dim() >= 1, ShapeError, "[{}] {} must be [C], [N, C] or [N, C, d...], got a 0-d tensor", op,
            input_name);
  ClassLoss c;
  Shape expected;
  if (input.dim() == 1) {
    c.classes = input.size(0);
  } else {
    c.n = input.size(0);
    c.classes = input.size(1);
    expected.push_back(c.n);
    for (int64_t d = 2; d < input.dim(); ++d) {
      expected.push_back(input.size(d));
      c.inner *= input.size(d);
    }
  }
  RTX_CHECK(target.sizes() == expected, ShapeError, "[{}] target of shape {} does not fit {} of shape {} (expected {})",
            op, shape_str(target.sizes()), input_name, shape_str(input.sizes()), shape_str(expected));
  if (weight.defined()) {
    check_float(weight, op, "weight");
    detail::check_same_device(op, input, weight);
    RTX_CHECK(weight.sizes() == Shape{c.classes}, ShapeError,
              "[{}] weight must have one entry per class (shape [{}]), got shape {}", op, c.classes,
              shape_str(weight.sizes()));
  }
  detail::check_indices(target, {tag, c.classes, 0, ignore_index});
  return c;
}

// Per-class coefficients [n, classes, inner] of the smoothed, weighted one-hot target:
// (1 - smoothing) * w[t] * onehot(t) + smoothing / classes * w, zero where t is ignored (public ops).
Tensor target_coefficients(const ClassLoss& c, const Tensor& target2, const Tensor& weight, int64_t ignore_index,
                           double smoothing, DType dtype) {
  const Tensor valid = ne(target2, ignore_index);
  const Tensor onehot = to_dtype(one_hot(where(valid, target2, 0), c.classes), dtype).permute({0, 2, 1});
  const Tensor w = weight.defined() ? weight.view({1, c.classes, 1})
                                    : ones({1, c.classes, 1}, TensorOptions(dtype, target2.device()));
  Tensor coeff = onehot * w * (1.0 - smoothing);
  if (smoothing > 0.0) coeff = coeff + w * (smoothing / static_cast<double>(c.classes));
  return coeff * valid.unsqueeze(1);
}

// What each sample's loss is multiplied by in the backward: g itself (per sample for Reduction::None),
// divided by the total weight for Reduction::Mean; shaped to broadcast against [n, classes, inner].
Tensor sample_scale(const ClassLoss& c, const Tensor& g, const Tensor& total_weight, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return g.reshape({c.n, 1, c.inner});
    case Reduction::Mean:
      return g / total_weight;
    case Reduction::Sum:
      break;
  }
  return g;
}

// The kernels' view of g: [n, inner] for Reduction::None, 0-d otherwise.
Tensor kernel_grad(const ClassLoss& c, const Tensor& g, DType dtype, Reduction reduction) {
  const Tensor gc = detail::cast(g, dtype);
  return reduction == Reduction::None ? contiguous_as(gc, c.target2()) : gc;
}

struct ClassLossOutputs {
  Tensor out, kernel_out, total_weight;
};
ClassLossOutputs alloc_class_loss(const ClassLoss& c, const Tensor& input, const Tensor& target, Reduction reduction,
                                  DType out_dtype) {
  const bool none = reduction == Reduction::None;
  Tensor out = detail::make_tensor(none ? target.sizes() : Shape{}, out_dtype, input.device());
  Tensor kernel_out = none ? detail::make_view(out, c.target2(), detail::contiguous_strides(c.target2()), 0) : out;
  return {out, kernel_out, detail::make_tensor({}, detail::acc_dtype(input.dtype()), input.device())};
}

}  // namespace

std::string detail::class_target_fault_message(const kernels::IndexFault& fault) {
  const kernels::IndexCheck& c = fault.check;
  return fmt::format("[{}] target {} is out of bounds for {} classes (valid: 0..{}, or ignore_index {})",
                     kernels::index_op_name(c.op), fault.value, c.bound, c.bound - 1, c.skip.value_or(0));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     Reduction reduction, double label_smoothing) {
  // Under autocast the loss of 16-bit logits is float32, as if they had been cast to float32 first.
  // The kernels compute in float32 from 16-bit logits as they are, so without class weights (which
  // they would read in the logits' dtype) nothing is cast: the logits and their gradient never get a
  // float32 copy.
  if (weight.defined())
    RTX_AUTOCAST(fp32, cross_entropy, logits, target, weight, ignore_index, reduction, label_smoothing);
  const bool float32_loss = logits.defined() && autocast::active() &&
                            autocast::target(autocast::Rule::fp32, logits.device().type) &&
                            (logits.dtype() == kBFloat16 || logits.dtype() == kFloat16);
  const char* op = "cross_entropy";
  RTX_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
            "[cross_entropy] label_smoothing must be in [0, 1], got {}", label_smoothing);
  const ClassLoss c = check_class_loss(kernels::IndexOp::CrossEntropy, "logits", logits, target, weight, ignore_index);
  const DType dtype = logits.dtype();
  const Tensor x = contiguous_as(logits, c.input3());
  const Tensor t = contiguous_as(target, c.target2());
  const Tensor w = weight.defined() ? contiguous_raw(detail::cast(weight, dtype)) : Tensor();
  const DType acc = detail::acc_dtype(dtype);
  ClassLossOutputs o = alloc_class_loss(c, logits, target, reduction, acc);
  Tensor lse = detail::make_tensor(c.target2(), acc, logits.device());
  kernels::cross_entropy_kernel.get(logits.device())(o.kernel_out, lse, o.total_weight, x, t, w, ignore_index,
                                                     reduction, label_smoothing);
  o.out = detail::cast(o.out, float32_loss ? kFloat32 : dtype);
  if (auto node = autograd::make_node(op, logits)) {
    node->save(logits);
    node->save(t);
    node->save(w);
    node->save(lse);
    node->save(o.total_weight);
    node->set_backward([c, ignore_index, reduction, label_smoothing](const TensorList& grads, const TensorList& s) {
      const Tensor &g = grads[0], &logits = s[0], &t = s[1], &w = s[2];
      const DType acc = detail::acc_dtype(logits.dtype());
      if (detail::needs_differentiable_backward({g, logits})) {  // in acc, as the kernels compute
        const Tensor coeff = target_coefficients(c, t, w, ignore_index, label_smoothing, acc);
        const Tensor p = softmax(logits.reshape(c.input3()).to(acc), 1);
        const Tensor grad = sample_scale(c, g.to(acc), s[4], reduction) * (sum(coeff, {1}, true) * p - coeff);
        return TensorList{grad.reshape(logits.sizes()).to(logits.dtype())};
      }
      Tensor grad = detail::make_tensor(logits.sizes(), logits.dtype(), logits.device());
      const Tensor grad3 = detail::make_view(grad, c.input3(), detail::contiguous_strides(c.input3()), 0);
      const Tensor gk = kernel_grad(c, g, acc, reduction);
      kernels::cross_entropy_backward_kernel.get(logits.device())(grad3, gk, contiguous_as(logits, c.input3()), s[3], t,
                                                                  w, s[4], ignore_index, reduction, label_smoothing);
      return TensorList{grad};
    });
    autograd::set_history(o.out, node);
  }
  return o.out;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                Reduction reduction) {
  RTX_AUTOCAST(fp32, nll_loss, log_probs, target, weight, ignore_index, reduction);
  const char* op = "nll_loss";
  const ClassLoss c = check_class_loss(kernels::IndexOp::NllLoss, "log_probs", log_probs, target, weight, ignore_index);
  const DType dtype = log_probs.dtype();
  const Tensor t = contiguous_as(target, c.target2());
  const Tensor w = weight.defined() ? contiguous_raw(detail::cast(weight, dtype)) : Tensor();
  ClassLossOutputs o = alloc_class_loss(c, log_probs, target, reduction, dtype);
  kernels::nll_loss_kernel.get(log_probs.device())(o.kernel_out, o.total_weight, contiguous_as(log_probs, c.input3()),
                                                   t, w, ignore_index, reduction);
  if (auto node = autograd::make_node(op, log_probs)) {
    node->save(t);
    node->save(w);
    node->save(o.total_weight);
    const Shape input_shape = log_probs.sizes();
    const Device device = log_probs.device();
    node->set_backward(
        [c, ignore_index, reduction, input_shape, dtype, device](const TensorList& grads, const TensorList& s) {
          const Tensor &g = grads[0], &t = s[0], &w = s[1];
          if (detail::needs_differentiable_backward({g})) {
            const Tensor coeff = target_coefficients(c, t, w, ignore_index, 0.0, dtype);
            return TensorList{(-sample_scale(c, g, s[2], reduction) * coeff).reshape(input_shape)};
          }
          Tensor grad = detail::make_tensor(input_shape, dtype, device);
          const Tensor grad3 = detail::make_view(grad, c.input3(), detail::contiguous_strides(c.input3()), 0);
          if (grad.numel() > 0)
            kernels::nll_loss_backward_kernel.get(device)(grad3, kernel_grad(c, g, dtype, reduction), t, w, s[2],
                                                          ignore_index, reduction);
          return TensorList{grad};
        });
    autograd::set_history(o.out, node);
  }
  return o.out;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  RTX_AUTOCAST(fp32, mse_loss, input, target, reduction);
  check_defined(input, "mse_loss");
  check_defined(target, "mse_loss", "target");
  detail::check_same_device("mse_loss", input, target);
  broadcast_shapes(input.sizes(), target.sizes(), "mse_loss");
  const DType dtype = result_type(input, target);
  RTX_CHECK(is_floating(dtype), DTypeError,
            "[mse_loss] input and target must be float tensors, got dtypes {} and {}; convert them with "
            ".to(rtx::kFloat32)",
            input.dtype(), target.dtype());
  return reduce(square(input - target), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  RTX_AUTOCAST(fp32, binary_cross_entropy_with_logits, logits, target, weight, pos_weight, reduction);
  const char* op = "binary_cross_entropy_with_logits";
  check_defined(logits, op, "logits");
  check_defined(target, op, "target");
  check_float(logits, op, "logits");
  check_float(target, op, "target");
  detail::check_same_device(op, logits, target);
  RTX_CHECK(target.sizes() == logits.sizes(), ShapeError, "[{}] target of shape {} must have the logits' shape {}", op,
            shape_str(target.sizes()), shape_str(logits.sizes()));
  for (const auto& [arg, t] : {std::pair<const char*, const Tensor*>{"weight", &weight}, {"pos_weight", &pos_weight}}) {
    if (!t->defined()) continue;
    check_float(*t, op, arg);
    detail::check_same_device(op, logits, *t);
    RTX_CHECK(broadcasts_to(t->sizes(), logits.sizes()), ShapeError,
              "[{}] {} of shape {} does not broadcast to the logits' shape {}", op, arg, shape_str(t->sizes()),
              shape_str(logits.sizes()));
  }
  // -[t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))] = (1 - t) x + softplus(-x), with softplus(-x)
  // weighted by 1 + (pos_weight - 1) t; softplus is evaluated without overflow for any x.
  const Tensor sp = softplus(-logits);
  Tensor loss = (1 - target) * logits + (pos_weight.defined() ? (1 + (pos_weight - 1) * target) * sp : sp);
  if (weight.defined()) loss = loss * weight;
  return reduce(loss, reduction);
}

}  // namespace rtx
