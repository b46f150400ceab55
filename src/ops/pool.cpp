// Pooling front-ends (max, average and adaptive average over NCHW; a 3-d CHW input is a batch of
// one): argument checks, output sizes, kernel calls, and the internal backward ops, recorded with
// formulas of their own (each is linear in its gradient input: its adjoint gathers at the max
// positions or is the pooling itself), so second and higher derivatives are exact.
#include "autograd/function.h"
#include "dispatch/pool.h"
#include "ops/internal.h"
#include "ops/window.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::contiguous_raw;
using detail::make_tensor;
using detail::shape_str;
using kernels::Pool2dParams;
using namespace window;  // the helpers every sliding-window op shares

// The gradients of the pools with respect to their 4-d input of shape input_size.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_size);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size, const Pool2dParams& p, bool ceil_mode);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_size);

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
  Tensor values = make_tensor(out_shape, x.dtype(), x.device());
  Tensor indices = make_tensor(out_shape, kInt64, x.device());
  if (values.numel() > 0) kernels::max_pool2d_kernel.get(x.device())(values, indices, contiguous_raw(x), p);
  if (auto node = autograd::make_node("max_pool2d", x)) {
    node->save(indices);
    node->set_backward([x_size = x.sizes()](const TensorList& g, const TensorList& s) {
      return TensorList{max_pool2d_backward(g[0], s[0], x_size)};
    });
    autograd::set_history(values, node);
  }
  return {values, indices};
}

Tensor avg_pool2d_forward(const Tensor& x, const Pool2dParams& p, const Shape& out_shape, bool ceil_mode) {
  Tensor out = make_tensor(out_shape, x.dtype(), x.device());
  if (out.numel() > 0) kernels::avg_pool2d_kernel.get(x.device())(out, contiguous_raw(x), p);
  if (auto node = autograd::make_node("avg_pool2d", x)) {
    node->set_backward([p, ceil_mode, x_size = x.sizes()](const TensorList& g, const TensorList&) {
      return TensorList{avg_pool2d_backward(g[0], x_size, p, ceil_mode)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor adaptive_avg_pool2d_forward(const Tensor& x, const Pair& size) {
  Tensor out = make_tensor({x.size(0), x.size(1), size[0], size[1]}, x.dtype(), x.device());
  if (out.numel() > 0) kernels::adaptive_avg_pool2d_kernel.get(x.device())(out, contiguous_raw(x));
  if (auto node = autograd::make_node("adaptive_avg_pool2d", x)) {
    node->set_backward([x_size = x.sizes()](const TensorList& g, const TensorList&) {
      return TensorList{adaptive_avg_pool2d_backward(g[0], x_size)};
    });
    autograd::set_history(out, node);
  }
  return out;
}

// ---- internal backward ops ----------------------------------------------------------------------

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

}  // namespace

// ---- public ops ---------------------------------------------------------------------------------

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

}  // namespace rtx
