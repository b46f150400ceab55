// Convolution and transposed convolution front-ends (NCHW; a 3-d CHW input is a batch of one):
// argument checks, output sizes, kernel calls, and the internal backward ops. Each backward op is
// recorded with a formula of its own written with conv2d and the other backward op (they are linear
// in their gradient input), so second and higher derivatives are exact. conv_transpose2d is conv2d's
// input gradient.
#include <utility>

#include "autograd/function.h"
#include "dispatch/conv.h"
#include "ops/conv_internal.h"
#include "ops/internal.h"
#include "ops/window.h"

namespace rtx {

namespace {

using detail::contiguous_raw;

using detail::check_defined;
using detail::shape_str;
using kernels::Conv2dParams;
using namespace window;  // the helpers every sliding-window op shares

// ---- convolution --------------------------------------------------------------------------------

// The input and weight of a convolution: an image input, a 4-d weight of the given layout, one floating
// dtype and one device.
void check_conv_operands(const char* op, const Tensor& x, const Tensor& weight, const char* layout) {
  check_image_input(op, x);
  check_defined(weight, op, "weight");
  RTX_CHECK(weight.dim() == 4, ShapeError, "[{}] expected a 4-d weight ({}, kH, kW), got shape {}", op, layout,
            shape_str(weight.sizes()));
  check_float_input(op, x);
  RTX_CHECK(weight.dtype() == x.dtype(), DTypeError, "[{}] input ({}) and weight ({}) must have the same dtype", op,
            x.dtype(), weight.dtype());
  detail::check_same_device(op, x, weight);
}

// An optional bias of shape [out_channels], of the input's dtype and device.
void check_conv_bias(const char* op, const Tensor& x, const Tensor& bias, int64_t out_channels) {
  if (!bias.defined()) return;
  RTX_CHECK(bias.dtype() == x.dtype(), DTypeError, "[{}] input ({}) and bias ({}) must have the same dtype", op,
            x.dtype(), bias.dtype());
  detail::check_same_device(op, x, bias);
  RTX_CHECK(bias.dim() == 1 && bias.size(0) == out_channels, ShapeError,
            "[{}] expected a bias of shape [{}] (out_channels), got {}", op, out_channels, shape_str(bias.sizes()));
}

// The checked geometry of a convolution from the user's arguments.
Conv2dParams conv_params(const char* op, const Shape& stride, const Shape& padding, const Shape& dilation,
                         int64_t groups) {
  const Pair s = pair_arg(op, "stride", stride), pad = pair_arg(op, "padding", padding);
  const Pair d = pair_arg(op, "dilation", dilation);
  RTX_CHECK(s[0] > 0 && s[1] > 0, ValueError, "[{}] stride must be positive, got {}", op, shape_str(stride));
  RTX_CHECK(d[0] > 0 && d[1] > 0, ValueError, "[{}] dilation must be positive, got {}", op, shape_str(dilation));
  RTX_CHECK(pad[0] >= 0 && pad[1] >= 0, ValueError, "[{}] padding must be nonnegative, got {}", op,
            shape_str(padding));
  RTX_CHECK(groups > 0, ValueError, "[{}] groups must be positive, got {}", op, groups);
  Conv2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = s[i];
    p.padding[i] = pad[i];
    p.dilation[i] = d[i];
  }
  p.groups = groups;
  return p;
}

Shape conv_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  return {x[0], w[0], window_count(x[2], w[2], p.padding[0], p.stride[0], p.dilation[0]),
          window_count(x[3], w[3], p.padding[1], p.stride[1], p.dilation[1])};
}

// The weight and bias gradients of conv2d, the bias's summed in the weight gradient's pass where the
// backend does that. Not recorded: only for a backward that builds no graph.
std::pair<Tensor, Tensor> conv_parameter_grads(const Tensor& g, const Tensor& x, const Shape& w_size,
                                               const Conv2dParams& p) {
  Tensor grad_w = detail::make_tensor(w_size, g.dtype(), g.device());
  Tensor grad_b = detail::make_tensor({w_size[0]}, g.dtype(), g.device());
  bool summed = false;
  if (grad_w.numel() > 0)
    summed = kernels::conv2d_backward_weight_kernel.get(g.device())(grad_w, grad_b, contiguous_raw(g),
                                                                    contiguous_raw(x), p);
  return {grad_w, summed ? grad_b : sum(g, {0, 2, 3})};
}

// conv2d on a 4-d input, recorded.
Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p) {
  Tensor out = detail::make_tensor(conv_output_shape(x.sizes(), w.sizes(), p), x.dtype(), x.device());
  if (out.numel() > 0)
    kernels::conv2d_kernel.get(x.device())(out, contiguous_raw(x), contiguous_raw(w), contiguous_raw(bias), p);
  if (auto node = autograd::make_node("conv2d", x, w, bias)) {
    const bool need_x = autograd::requires_grad(x), need_w = autograd::requires_grad(w);
    const bool need_b = autograd::requires_grad(bias);
    node->save(need_w ? x : Tensor());
    node->save(need_x ? w : Tensor());
    node->set_backward([need_x, need_w, need_b, p, x_size = x.sizes(), w_size = w.sizes()](const TensorList& g,
                                                                                            const TensorList& s) {
      const Tensor grad_x = need_x ? detail::conv2d_backward_input(g[0], s[1], x_size, p) : Tensor();
      if (need_w && need_b && !is_grad_enabled()) {
        auto [grad_w, grad_b] = conv_parameter_grads(g[0], s[0], w_size, p);
        return TensorList{grad_x, grad_w, grad_b};
      }
      return TensorList{grad_x, need_w ? detail::conv2d_backward_weight(g[0], s[0], w_size, p) : Tensor(),
                        need_b ? sum(g[0], {0, 2, 3}) : Tensor()};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// conv2d through the public op with p's geometry (used by the backward formulas).
Tensor conv2d_with(const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  return conv2d(x, w, {}, shape_of(p.stride), shape_of(p.padding), shape_of(p.dilation), p.groups);
}

}  // namespace

// ---- public ops ---------------------------------------------------------------------------------

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) {
  RTX_AUTOCAST(lower, conv2d, x, weight, bias, stride, padding, dilation, groups);
  const char* op = "conv2d";
  check_conv_operands(op, x, weight, "out_channels, in_channels / groups");
  const int64_t out_channels = weight.size(0);
  check_conv_bias(op, x, bias, out_channels);
  const Conv2dParams p = conv_params(op, stride, padding, dilation, groups);
  const int64_t channels = x.size(-3);
  RTX_CHECK(channels % groups == 0, ShapeError, "[conv2d] input channels {} (input shape {}) are not divisible by groups {}",
            channels, shape_str(x.sizes()), groups);
  RTX_CHECK(out_channels % groups == 0, ShapeError,
            "[conv2d] out_channels {} (weight shape {}) are not divisible by groups {}", out_channels,
            shape_str(weight.sizes()), groups);
  RTX_CHECK(weight.size(1) * groups == channels, ShapeError,
            "[conv2d] weight of shape {} expects {} input channels ({} per group x {} groups), but the input of "
            "shape {} has {}",
            shape_str(weight.sizes()), weight.size(1) * groups, weight.size(1), groups, shape_str(x.sizes()), channels);
  const int64_t kh = (weight.size(2) - 1) * p.dilation[0] + 1, kw = (weight.size(3) - 1) * p.dilation[1] + 1;
  const int64_t ph = x.size(-2) + 2 * p.padding[0], pw = x.size(-1) + 2 * p.padding[1];
  RTX_CHECK(kh <= ph && kw <= pw, ShapeError,
            "[conv2d] the kernel of (dilated) size {} is larger than the padded input of size {} (input shape {}, "
            "weight shape {})",
            shape_str({kh, kw}), shape_str({ph, pw}), shape_str(x.sizes()), shape_str(weight.sizes()));
  return batched(x, [&](const Tensor& x4) { return conv2d_forward(x4, weight, bias, p); });
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride,
                        const Shape& padding, const Shape& output_padding, int64_t groups, const Shape& dilation) {
  RTX_AUTOCAST(lower, conv_transpose2d, x, weight, bias, stride, padding, output_padding, groups, dilation);
  const char* op = "conv_transpose2d";
  check_conv_operands(op, x, weight, "in_channels, out_channels / groups");
  const Conv2dParams p = conv_params(op, stride, padding, dilation, groups);
  const int64_t channels = x.size(-3);
  RTX_CHECK(weight.size(0) == channels, ShapeError,
            "[conv_transpose2d] weight of shape {} expects {} input channels, but the input of shape {} has {}",
            shape_str(weight.sizes()), weight.size(0), shape_str(x.sizes()), channels);
  RTX_CHECK(channels % groups == 0, ShapeError,
            "[conv_transpose2d] input channels {} (input shape {}) are not divisible by groups {}", channels,
            shape_str(x.sizes()), groups);
  const int64_t out_channels = weight.size(1) * groups;
  check_conv_bias(op, x, bias, out_channels);
  const Pair extra = pair_arg(op, "output_padding", output_padding);
  // Below the stride, the output keeps conv2d's size relation with the input (conv2d of the output
  // has the input's size), which the input-gradient kernels of every backend rely on.
  RTX_CHECK(extra[0] >= 0 && extra[1] >= 0 && extra[0] < p.stride[0] && extra[1] < p.stride[1], ValueError,
            "[conv_transpose2d] output_padding {} must be nonnegative and smaller than stride {}",
            shape_str(output_padding), shape_str(shape_of(p.stride)));
  int64_t size[2];
  for (int i = 0; i < 2; ++i)
    size[i] = (x.size(i - 2) - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (weight.size(i + 2) - 1) +
              extra[i] + 1;
  RTX_CHECK(size[0] > 0 && size[1] > 0, ShapeError,
            "[conv_transpose2d] the output size {} is too small: input shape {}, weight shape {}, stride {}, "
            "padding {}, dilation {}",
            shape_str({size[0], size[1]}), shape_str(x.sizes()), shape_str(weight.sizes()),
            shape_str(shape_of(p.stride)), shape_str(shape_of(p.padding)), shape_str(shape_of(p.dilation)));
  // The input gradient of conv2d with this weight; recorded as such, its backward is conv2d (input)
  // and the conv2d weight gradient with the input in grad_out's place (weight).
  return batched(x, [&](const Tensor& x4) {
    const Tensor out = detail::conv2d_backward_input(x4, weight, {x4.size(0), out_channels, size[0], size[1]}, p);
    return bias.defined() ? add(out, bias.view({1, out_channels, 1, 1})) : out;
  });
}

// ---- internal backward ops ----------------------------------------------------------------------

namespace detail {

Tensor conv2d_backward_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                             const Conv2dParams& p) {
  Tensor grad_x = make_tensor(input_size, grad_out.dtype(), grad_out.device());
  if (grad_x.numel() > 0)
    kernels::conv2d_backward_input_kernel.get(grad_out.device())(grad_x, contiguous_raw(grad_out),
                                                                 contiguous_raw(weight), p);
  if (auto node = autograd::make_node("conv2d_backward_input", grad_out, weight)) {
    const bool need_g = autograd::requires_grad(grad_out), need_w = autograd::requires_grad(weight);
    node->save(need_w ? grad_out : Tensor());
    node->save(need_g ? weight : Tensor());
    // grad_x = A_w^T g (A_w: conv with w): d/dg is conv with w, d/dw the weight gradient with the
    // incoming gradient as input.
    node->set_backward([need_g, need_w, p, w_size = weight.sizes()](const TensorList& gg, const TensorList& s) {
      return TensorList{need_g ? conv2d_with(gg[0], s[1], p) : Tensor(),
                        need_w ? conv2d_backward_weight(s[0], gg[0], w_size, p) : Tensor()};
    });
    autograd::set_history(grad_x, node);
  }
  return grad_x;
}

Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& x, const Shape& weight_size,
                              const Conv2dParams& p) {
  Tensor grad_w = make_tensor(weight_size, grad_out.dtype(), grad_out.device());
  if (grad_w.numel() > 0)
    kernels::conv2d_backward_weight_kernel.get(grad_out.device())(grad_w, Tensor(), contiguous_raw(grad_out),
                                                                  contiguous_raw(x), p);
  if (auto node = autograd::make_node("conv2d_backward_weight", grad_out, x)) {
    const bool need_g = autograd::requires_grad(grad_out), need_x = autograd::requires_grad(x);
    node->save(need_x ? grad_out : Tensor());
    node->save(need_g ? x : Tensor());
    // grad_w is bilinear in (g, x): d/dg is conv of x with the incoming gradient as weight, d/dx the
    // input gradient through that weight.
    node->set_backward([need_g, need_x, p, x_size = x.sizes()](const TensorList& gg, const TensorList& s) {
      return TensorList{need_g ? conv2d_with(s[1], gg[0], p) : Tensor(),
                        need_x ? conv2d_backward_input(s[0], gg[0], x_size, p) : Tensor()};
    });
    autograd::set_history(grad_w, node);
  }
  return grad_w;
}

}  // namespace detail
}  // namespace rtx
