// Convolution, transposed convolution and pooling front-ends (NCHW; a 3-d CHW input is a batch of one):
// argument checks, output sizes, kernel calls, and the internal backward ops. Each backward op is
// recorded with a formula of its own written with conv2d, the pools and each other (they are linear in
// their gradient input), so second and higher derivatives are exact. conv_transpose2d is conv2d's input
// gradient.
#include <array>

#include "autograd/function.h"
#include "dispatch/conv.h"
#include "dispatch/pool.h"
#include "ops/conv_internal.h"
#include "ops/internal.h"

namespace rtx {

namespace {

using detail::contiguous_raw;

using detail::check_defined;
using detail::shape_str;
using kernels::Conv2dParams;
using kernels::Pool2dParams;
using Pair = std::array<int64_t, 2>;

// A per-dim (height, width) argument given as one value for both or as two.
Pair pair_arg(const char* op, const char* name, const Shape& v) {
  RTX_CHECK(v.size() == 1 || v.size() == 2, ValueError, "[{}] {} must have 1 or 2 values, got {}", op, name,
            shape_str(v));
  return {v.front(), v.back()};
}

Shape shape_of(const int64_t (&v)[2]) { return {v[0], v[1]}; }


void check_image_input(const char* op, const Tensor& x) {
  check_defined(x, op);
  RTX_CHECK(x.dim() == 3 || x.dim() == 4, ShapeError,
            "[{}] expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got shape {}", op, shape_str(x.sizes()));
}

void check_float_input(const char* op, const Tensor& x) {
  RTX_CHECK(is_floating(x.dtype()), DTypeError, "[{}] expected a floating point input, got {}", op, x.dtype());
}

// Runs f on x as a 4-d batch (a 3-d input is a batch of one) and drops that batch dim again.
template <typename F>
Tensor batched(const Tensor& x, const F& f) {
  if (x.dim() == 4) return f(x);
  return f(x.unsqueeze(0)).squeeze(0);
}

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

// Output extent of a convolution or pooling window along one dim (floor or ceil of the window count).
int64_t window_count(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode = false) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Shape conv_output_shape(const Shape& x, const Shape& w, const Conv2dParams& p) {
  return {x[0], w[0], window_count(x[2], w[2], p.padding[0], p.stride[0], p.dilation[0]),
          window_count(x[3], w[3], p.padding[1], p.stride[1], p.dilation[1])};
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
      return TensorList{need_x ? detail::conv2d_backward_input(g[0], s[1], x_size, p) : Tensor(),
                        need_w ? detail::conv2d_backward_weight(g[0], s[0], w_size, p) : Tensor(),
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

// ---- pooling ------------------------------------------------------------------------------------

// Pooling geometry from the user's arguments (stride empty: the kernel size), checked like PyTorch.
Pool2dParams pool_params(const char* op, const Shape& kernel_size, const Shape& stride, const Shape& padding,
                         const Shape& dilation) {
  const Pair k = pair_arg(op, "kernel_size", kernel_size);
  const Pair s = stride.empty() ? k : pair_arg(op, "stride", stride);
  const Pair pad = pair_arg(op, "padding", padding);
  const Pair d = pair_arg(op, "dilation", dilation);
  RTX_CHECK(k[0] > 0 && k[1] > 0, ValueError, "[{}] kernel_size must be positive, got {}", op, shape_str({k[0], k[1]}));
  RTX_CHECK(s[0] > 0 && s[1] > 0, ValueError, "[{}] stride must be positive, got {}", op, shape_str({s[0], s[1]}));
  RTX_CHECK(d[0] > 0 && d[1] > 0, ValueError, "[{}] dilation must be positive, got {}", op, shape_str({d[0], d[1]}));
  RTX_CHECK(pad[0] >= 0 && pad[1] >= 0, ValueError, "[{}] padding must be nonnegative, got {}", op,
            shape_str({pad[0], pad[1]}));
  RTX_CHECK(pad[0] <= k[0] / 2 && pad[1] <= k[1] / 2, ValueError,
            "[{}] padding {} must be at most half of kernel_size {}", op, shape_str({pad[0], pad[1]}),
            shape_str({k[0], k[1]}));
  Pool2dParams p;
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = k[i];
    p.stride[i] = s[i];
    p.padding[i] = pad[i];
    p.dilation[i] = d[i];
  }
  return p;
}

// The checked output shape [N, C, OH, OW] of pooling the 4-d input shape x.
Shape pool_output_shape(const char* op, const Shape& x, const Pool2dParams& p, bool ceil_mode) {
  RTX_CHECK(x[1] > 0 && x[2] > 0 && x[3] > 0, ShapeError,
            "[{}] expected nonzero channel and spatial sizes, got input shape {}", op, shape_str(x));
  const int64_t oh = window_count(x[2], p.kernel[0], p.padding[0], p.stride[0], p.dilation[0], ceil_mode);
  const int64_t ow = window_count(x[3], p.kernel[1], p.padding[1], p.stride[1], p.dilation[1], ceil_mode);
  RTX_CHECK(oh > 0 && ow > 0, ShapeError,
            "[{}] the output size {} is too small: input shape {}, kernel_size {}, stride {}, padding {}, dilation {}",
            op, shape_str({oh, ow}), shape_str(x), shape_str(shape_of(p.kernel)), shape_str(shape_of(p.stride)),
            shape_str(shape_of(p.padding)), shape_str(shape_of(p.dilation)));
  return {x[0], x[1], oh, ow};
}

void check_pool_input(const char* op, const Tensor& x, bool floats_only) {
  check_image_input(op, x);
  if (floats_only) check_float_input(op, x);
  RTX_CHECK(x.dtype() != kBool, DTypeError, "[{}] not supported for bool tensors", op);
}

// max_pool2d on a 4-d input, recorded (values only; indices are not differentiable).
ValuesIndices max_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Shape& out_shape) {
  Tensor values = detail::make_tensor(out_shape, x.dtype(), x.device());
  Tensor indices = detail::make_tensor(out_shape, kInt64, x.device());
  if (values.numel() > 0) kernels::max_pool2d_kernel.get(x.device())(values, indices, contiguous_raw(x), p);
  if (auto node = autograd::make_node("max_pool2d", x)) {
    node->save(indices);
    node->set_backward([x_size = x.sizes()](const TensorList& g, const TensorList& s) {
      return TensorList{detail::max_pool2d_backward(g[0], s[0], x_size)};
    });
    autograd::set_history(values, node);
  }
  return {values, indices};
}

Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Shape& out_shape, bool ceil_mode) {
  Tensor out = detail::make_tensor(out_shape, x.dtype(), x.device());
  if (out.numel() > 0) kernels::avg_pool2d_kernel.get(x.device())(out, contiguous_raw(x), p);
  if (auto node = autograd::make_node("avg_pool2d", x)) {
    node->set_backward([p, ceil_mode, x_size = x.sizes()](const TensorList& g, const TensorList&) {
      return TensorList{detail::avg_pool2d_backward(g[0], x_size, p, ceil_mode)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor adaptive_avg_pool2d_forward(const Tensor& x, const Pair& size) {
  Tensor out = detail::make_tensor({x.size(0), x.size(1), size[0], size[1]}, x.dtype(), x.device());
  if (out.numel() > 0) kernels::adaptive_avg_pool2d_kernel.get(x.device())(out, contiguous_raw(x));
  if (auto node = autograd::make_node("adaptive_avg_pool2d", x)) {
    node->set_backward([x_size = x.sizes()](const TensorList& g, const TensorList&) {
      return TensorList{detail::adaptive_avg_pool2d_backward(g[0], x_size)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace

// ---- public ops ---------------------------------------------------------------------------------

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Shape& stride, const Shape& padding,
              const Shape& dilation, int64_t groups) {
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

ValuesIndices max_pool2d_with_indices(const Tensor& x, const Shape& kernel_size, const Shape& stride,
                                      const Shape& padding, const Shape& dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  check_pool_input(op, x, false);
  const Pool2dParams p = pool_params(op, kernel_size, stride, padding, dilation);
  const Tensor x4 = x.dim() == 4 ? x : x.unsqueeze(0);
  ValuesIndices r = max_pool2d_forward(x4, p, pool_output_shape(op, x4.sizes(), p, ceil_mode));
  if (x.dim() == 3) r = {r.values.squeeze(0), r.indices.squeeze(0)};
  return r;
}

Tensor max_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding,
                  const Shape& dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).values;
}

Tensor avg_pool2d(const Tensor& x, const Shape& kernel_size, const Shape& stride, const Shape& padding, bool ceil_mode,
                  bool count_include_pad) {
  const char* op = "avg_pool2d";
  check_pool_input(op, x, true);
  Pool2dParams p = pool_params(op, kernel_size, stride, padding, {1});
  p.count_include_pad = count_include_pad;
  return batched(x, [&](const Tensor& x4) {
    return avg_pool2d_forward(x4, p, pool_output_shape(op, x4.sizes(), p, ceil_mode), ceil_mode);
  });
}

Tensor adaptive_avg_pool2d(const Tensor& x, const Shape& output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_pool_input(op, x, true);
  const Pair size = pair_arg(op, "output_size", output_size);
  RTX_CHECK(size[0] >= 0 && size[1] >= 0, ValueError, "[adaptive_avg_pool2d] output_size must be nonnegative, got {}",
            shape_str(output_size));
  RTX_CHECK(x.size(-3) > 0 && x.size(-2) > 0 && x.size(-1) > 0, ShapeError,
            "[adaptive_avg_pool2d] expected nonzero channel and spatial sizes, got input shape {}", shape_str(x.sizes()));
  return batched(x, [&](const Tensor& x4) { return adaptive_avg_pool2d_forward(x4, size); });
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
    kernels::conv2d_backward_weight_kernel.get(grad_out.device())(grad_w, contiguous_raw(grad_out), contiguous_raw(x),
                                                                  p);
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

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_size) {
  Tensor grad_x = make_tensor(input_size, grad_out.dtype(), grad_out.device());
  if (grad_x.numel() > 0)
    kernels::max_pool2d_backward_kernel.get(grad_out.device())(grad_x, contiguous_raw(grad_out), indices);
  if (auto node = autograd::make_node("max_pool2d_backward", grad_out)) {
    node->save(indices);
    // Linear in grad_out: its adjoint gathers the incoming gradient at the max positions (zero for
    // the -1 index of a window that covers no input).
    node->set_backward([](const TensorList& gg, const TensorList& s) {
      const Tensor& idx = s[0];
      const Tensor picked = gather(gg[0].flatten(2), 2, idx.flatten(2).clamp(0)).view(idx.sizes());
      return TensorList{where(idx >= 0, picked, zeros_like(picked))};
    });
    autograd::set_history(grad_x, node);
  }
  return grad_x;
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size, const Pool2dParams& p, bool ceil_mode) {
  Tensor grad_x = make_tensor(input_size, grad_out.dtype(), grad_out.device());
  if (grad_x.numel() > 0) kernels::avg_pool2d_backward_kernel.get(grad_out.device())(grad_x, contiguous_raw(grad_out), p);
  if (auto node = autograd::make_node("avg_pool2d_backward", grad_out)) {
    // Linear in grad_out: its adjoint is the pooling itself.
    node->set_backward([p, ceil_mode](const TensorList& gg, const TensorList&) {
      return TensorList{avg_pool2d(gg[0], shape_of(p.kernel), shape_of(p.stride), shape_of(p.padding), ceil_mode,
                                   p.count_include_pad)};
    });
    autograd::set_history(grad_x, node);
  }
  return grad_x;
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size) {
  Tensor grad_x = make_tensor(input_size, grad_out.dtype(), grad_out.device());
  if (grad_x.numel() > 0)
    kernels::adaptive_avg_pool2d_backward_kernel.get(grad_out.device())(grad_x, contiguous_raw(grad_out));
  if (auto node = autograd::make_node("adaptive_avg_pool2d_backward", grad_out)) {
    node->set_backward([out_size = Shape{grad_out.size(2), grad_out.size(3)}](const TensorList& gg, const TensorList&) {
      return TensorList{adaptive_avg_pool2d(gg[0], out_size)};
    });
    autograd::set_history(grad_x, node);
  }
  return grad_x;
}

}  // namespace detail
}  // namespace rtx
