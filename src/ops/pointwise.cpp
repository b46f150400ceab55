// Pointwise front-ends. The ops of rtx/pointwise.def are generated from their table line (dtype
// rule, saved tensors, gradient formula); the table's functor ops (parameters, ternary ops) are
// written out below, on the same helpers, and hand their kernels a functor holding the parameters.
#include <cmath>
#include <string_view>

#include "autograd/function.h"
#include "core/scalar_range.h"
#include "ops/internal.h"
#include "dispatch/pointwise.h"
#include "ops/nn_internal.h"

namespace rtx {

namespace {

using detail::check_defined;
using detail::KernelTable;

enum class Rule { FLOAT, NUMERIC, ARITH, TRUEDIV };

DType compute_dtype(const char* op, DType t, Rule rule) {
  if (rule == Rule::FLOAT || rule == Rule::TRUEDIV) return is_floating(t) ? t : get_default_dtype();
  RTX_CHECK(t != kBool, DTypeError, "[{}] not supported for bool tensors; convert with .to(rtx::kInt64) first", op);
  return t;
}

Tensor unary_forward(const KernelTable<kernels::UnaryFn>& k, const Tensor& x, DType ct) {
  Tensor out = detail::make_tensor(x.sizes(), ct, x.device());
  if (out.numel() > 0) k.get(x.device())(out, detail::cast(x, ct));
  return out;
}

struct Broadcast {
  Shape shape;
  Tensor a, b;
  Device device;  // where the op runs (see detail::common_device)
};
// Casts a and b to ct and expands both to their common shape. With mixed_floats (the ops of
// kernels::mixed_float_operands) a float32 and a 16-bit float operand keep their dtypes: the kernel
// reads both as they are.
Broadcast broadcast_pair(const char* op, const Tensor& a, const Tensor& b, DType ct, bool mixed_floats = false) {
  check_defined(a, op, "first operand");
  check_defined(b, op, "second operand");
  const Device device = detail::common_device(op, {&a, &b});
  Shape shape = broadcast_shapes(a.sizes(), b.sizes(), op);
  const bool as_they_are = mixed_floats && kernels::reads_mixed_floats(ct, a.dtype(), b.dtype());
  const auto operand = [&](const Tensor& t) { return detail::expand_to(as_they_are ? t : detail::cast(t, ct), shape); };
  return {shape, operand(a), operand(b), device};
}

Tensor binary_forward(const char* op, const KernelTable<kernels::BinaryFn>& k, const Tensor& a, const Tensor& b,
                      DType ct, DType out_dtype, bool mixed_floats = false) {
  Broadcast bc = broadcast_pair(op, a, b, ct, mixed_floats);
  Tensor out = detail::make_tensor(bc.shape, out_dtype, bc.device);
  if (out.numel() > 0) k.get(bc.device)(out, bc.a, bc.b);
  return out;
}

// In-place ops cannot grow their destination: the result must have self's shape.
void check_fits(const char* op, const Tensor& self, const Shape& result_shape) {
  RTX_CHECK(result_shape == self.sizes(), ShapeError, "[{}] the result of shape {} does not fit the destination of shape {}",
            op, detail::shape_str(result_shape), detail::shape_str(self.sizes()));
}

// Writes an out-of-place result into self (no autograd, no version bump).
void write_into(const char* op, const Tensor& self, const Tensor& result) {
  check_fits(op, self, result.sizes());
  detail::copy_raw(self, result);
}

// In-place: self = f(self, ...). Writes directly when nothing records grad; otherwise computes the
// result out of place (recorded) and hands self its history.
template <typename Compute, typename Direct>
Tensor& inplace(const char* op, Tensor& self, const TensorList& others, DType ct, const Compute& compute,
                const Direct& direct) {
  check_defined(self, op);
  for (const Tensor& o : others)
    RTX_CHECK(detail::common_device(op, {&self, &o}) == self.device(), DeviceError,
              "[{}] cannot write a result on {} into a tensor on {}; move the operands with .to(device)", op,
              o.device(), self.device());
  RTX_CHECK(detail::can_cast(ct, self.dtype()), DTypeError,
            "[{}] the result has dtype {}, which cannot be written into a tensor of dtype {}", op, ct, self.dtype());
  return detail::write_inplace(
      op, self, others,
      [&] {
        Tensor result = compute();
        check_fits(op, self, result.sizes());
        return to_dtype(result, self.dtype());
      },
      direct);
}

// Whether the table lists op under RTX_AUTOCAST_FP32.
constexpr bool autocast_fp32(std::string_view op) {
#define RTX_AUTOCAST_FP32(name) \
  if (op == #name) return true;
#include "rtx/pointwise.def"
  return false;
}

// The integer divisions PyTorch refuses to divide by zero on the CPU.
constexpr bool integer_division(std::string_view op) {
  return op == "floor_divide" || op == "remainder" || op == "fmod";
}

// Integer division by zero raises where the op runs on the CPU (as PyTorch's does); on CUDA the
// result is left undefined rather than synchronizing to look.
void check_divisor(const char* op, const Tensor& a, const Tensor& b, DType ct) {
  if (!is_integral(ct) || b.numel() == 0 || !detail::common_device(op, {&a, &b}).is_cpu()) return;
  if (detail::numel_of(broadcast_shapes(a.sizes(), b.sizes(), op)) == 0) return;
  RTX_CHECK(!eq(b, 0).any().item<bool>(), ValueError,
            "[{}] ZeroDivisionError: integer division by zero (the divisor of shape {} and dtype {} holds a zero)", op,
            detail::shape_str(b.sizes()), b.dtype());
}

// An integer tensor to a negative integer power, which PyTorch refuses on every device.
void check_exponent(const char* op, const Tensor& a, const Scalar& b) {
  RTX_CHECK(!(is_integral(result_type(a, b)) && b.is_integral() && b.to_int() < 0), ValueError,
            "[{}] integers to negative integer powers are not allowed (a tensor of dtype {} to the power {})", op,
            a.dtype(), b.to_int());
}

// Gradient formula helpers for the table.
Tensor zero_grad(const Tensor& g) { return zeros_like(g); }

// relu's input gradient in one pass: g where out > threshold, else 0 (PyTorch's threshold_backward).
// Recorded for higher derivatives: it is linear in g, so its gradient is threshold_backward of the
// incoming gradient, and zero (almost everywhere) in out.
Tensor threshold_backward(const Tensor& g, const Tensor& out, double threshold) {
  Broadcast bc = broadcast_pair("threshold_backward", g, out, g.dtype());
  Tensor grad = detail::make_tensor(bc.shape, g.dtype(), bc.device);
  if (grad.numel() > 0) kernels::threshold_backward_kernel.get(bc.device)(grad, bc.a, bc.b, fn::ThresholdBackward{threshold});
  if (auto node = autograd::make_node("threshold_backward", g, out)) {
    node->save(out);
    node->set_backward([threshold](const TensorList& gg, const TensorList& s) {
      return TensorList{threshold_backward(gg[0], s[0], threshold), Tensor()};
    });
    autograd::set_history(grad, node);
  }
  return grad;
}

}  // namespace

// ---- ops generated from the table ---------------------------------------------------------------

#define RTX_SAVE_X(node, x, out) node->save(x)
#define RTX_SAVE_OUT(node, x, out) node->save_output(out)
#define RTX_SAVE_NONE(node, x, out)
#define RTX_LOAD_X(s) x = s[0]
#define RTX_LOAD_OUT(s) out = s[0]
#define RTX_LOAD_NONE(s)
// An in-place op whose formula reads its input differentiates a copy of it.
#define RTX_SNAPSHOT_X(t) (t).clone()
#define RTX_SNAPSHOT_OUT(t) (t)
#define RTX_SNAPSHOT_NONE(t) (t)
#define ZERO zero_grad(g)

#define RTX_UNARY(name, F, rule, save, grad)                                                     \
  Tensor name(const Tensor& x_in) {                                                              \
    if constexpr (autocast_fp32(#name)) RTX_AUTOCAST(fp32, name, x_in);                         \
    check_defined(x_in, #name);                                                                  \
    const DType ct = compute_dtype(#name, x_in.dtype(), Rule::rule);                             \
    Tensor result = unary_forward(kernels::name##_kernel, x_in, ct);                      \
    if (auto node = autograd::make_node(#name, x_in)) {                                          \
      RTX_SAVE_##save(node, x_in, result);                                                       \
      node->set_backward([](const TensorList& grads, const TensorList& s) {                      \
        const Tensor& g = grads[0];                                                              \
        Tensor x, out;                                                                           \
        RTX_LOAD_##save(s);                                                                      \
        (void)s;                                                                                 \
        return TensorList{grad};                                                                 \
      });                                                                                        \
      autograd::set_history(result, node);                                                       \
    }                                                                                            \
    return result;                                                                               \
  }                                                                                              \
  Tensor& name##_(Tensor& x) {                                                                   \
    check_defined(x, #name "_");                                                                 \
    const DType ct = compute_dtype(#name "_", x.dtype(), Rule::rule);                            \
    return inplace(                                                                              \
        #name "_", x, {}, ct, [&] { return name(RTX_SNAPSHOT_##save(x)); },                      \
        [&] { kernels::name##_kernel.get(x.device())(x, x); });                                  \
  }
#include "rtx/pointwise.def"

#define RTX_SAVE2_NONE(node, a, b, out)
#define RTX_SAVE2_A_B(node, a, b, out) (node->save(a), node->save(b))
#define RTX_SAVE2_A_B_OUT(node, a, b, out) (node->save(a), node->save(b), node->save_output(out))
#define RTX_LOAD2_NONE(s)
#define RTX_LOAD2_A_B(s) (a = s[0], b = s[1])
#define RTX_LOAD2_A_B_OUT(s) (a = s[0], b = s[1], out = s[2])
#define RTX_SNAP2_NONE(t) (t)
#define RTX_SNAP2_A_B(t) (t).clone()
#define RTX_SNAP2_A_B_OUT(t) (t).clone()

#define RTX_BINARY(name, F, rule, save, grad_a, grad_b)                                          \
  Tensor name(const Tensor& a_in, const Tensor& b_in) {                                          \
    if constexpr (autocast_fp32(#name)) RTX_AUTOCAST(fp32, name, a_in, b_in);                   \
    check_defined(a_in, #name, "first operand");                                                 \
    check_defined(b_in, #name, "second operand");                                                \
    const DType ct = compute_dtype(#name, result_type(a_in, b_in), Rule::rule);                  \
    if constexpr (integer_division(#name)) check_divisor(#name, a_in, b_in, ct);                 \
    Tensor result = binary_forward(#name, kernels::name##_kernel, a_in, b_in, ct, ct,            \
                                   kernels::mixed_float_operands(#name));                        \
    if (auto node = autograd::make_node(#name, a_in, b_in)) {                                    \
      RTX_SAVE2_##save(node, a_in, b_in, result);                                                \
      node->set_backward([](const TensorList& grads, const TensorList& s) {                      \
        const Tensor& g = grads[0];                                                              \
        Tensor a, b, out;                                                                        \
        RTX_LOAD2_##save(s);                                                                     \
        (void)s;                                                                                 \
        return TensorList{grad_a, grad_b};                                                       \
      });                                                                                        \
      autograd::set_history(result, node);                                                       \
    }                                                                                            \
    return result;                                                                               \
  }                                                                                              \
  Tensor name(const Tensor& a, const Scalar& b) {                                                \
    check_defined(a, #name);                                                                     \
    if constexpr (std::string_view(#name) == "pow") check_exponent(#name, a, b);                 \
    return name(a, detail::wrap_number(b, result_type(a, b)));                                   \
  }                                                                                              \
  Tensor name(const Scalar& a, const Tensor& b) {                                                \
    check_defined(b, #name);                                                                     \
    return name(detail::wrap_number(a, result_type(b, a)), b);                                   \
  }                                                                                              \
  Tensor& name##_(Tensor& a, const Tensor& b) {                                                  \
    check_defined(a, #name "_");                                                                 \
    check_defined(b, #name "_", "second operand");                                               \
    const DType ct = compute_dtype(#name "_", result_type(a, b), Rule::rule);                    \
    if constexpr (integer_division(#name)) check_divisor(#name "_", a, b, ct);                   \
    return inplace(                                                                              \
        #name "_", a, {b}, ct, [&] { return name(RTX_SNAP2_##save(a), b); },                     \
        [&] {                                                                                    \
          Broadcast bc = broadcast_pair(#name "_", a, b, ct);                                    \
          check_fits(#name "_", a, bc.shape);                                                    \
          if (ct == a.dtype() && !detail::overlaps_differently(a, bc.b)) {                                 \
            if (a.numel() > 0) kernels::name##_kernel.get(a.device())(a, a, bc.b);               \
          } else {                                                                               \
            Tensor tmp = detail::make_tensor(bc.shape, ct, a.device());                          \
            if (a.numel() > 0) kernels::name##_kernel.get(a.device())(tmp, bc.a, bc.b);          \
            detail::copy_raw(a, tmp);                                                            \
          }                                                                                      \
        });                                                                                      \
  }                                                                                              \
  Tensor& name##_(Tensor& a, const Scalar& b) {                                                  \
    check_defined(a, #name "_");                                                                 \
    if constexpr (std::string_view(#name) == "pow") check_exponent(#name "_", a, b);             \
    return name##_(a, detail::wrap_number(b, result_type(a, b)));                                \
  }
#include "rtx/pointwise.def"

#define RTX_COMPARE(name, F)                                                                     \
  Tensor name(const Tensor& a, const Tensor& b) {                                                \
    check_defined(a, #name, "first operand");                                                    \
    check_defined(b, #name, "second operand");                                                   \
    return binary_forward(#name, kernels::name##_kernel, a, b, result_type(a, b), kBool);        \
  }                                                                                              \
  Tensor name(const Tensor& a, const Scalar& b) {                                                \
    check_defined(a, #name);                                                                     \
    return name(a, detail::wrap_number(b, result_type(a, b)));                                   \
  }
#define RTX_LOGICAL(name, F)                                                                     \
  Tensor name(const Tensor& a, const Tensor& b) {                                                \
    return binary_forward(#name, kernels::name##_kernel, a, b, kBool, kBool);                    \
  }
#define RTX_PREDICATE(name, F)                                                                   \
  Tensor name(const Tensor& x) {                                                                 \
    check_defined(x, #name);                                                                     \
    Tensor out = detail::make_tensor(x.sizes(), kBool, x.device());                              \
    if (out.numel() > 0) kernels::name##_kernel.get(x.device())(out, x);                         \
    return out;                                                                                  \
  }
#include "rtx/pointwise.def"

// ---- ops with parameters ----------------------------------------------------------------------

namespace {
// A unary functor op computing in ct; backward(g, x, out) gives the input's gradient.
template <typename F, typename Backward>
Tensor unary_functor(const char* op, const KernelTable<kernels::UnaryFunctorFn<F>>& k, const Tensor& x, const F& f,
                     DType ct, Backward backward) {
  Tensor out = detail::make_tensor(x.sizes(), ct, x.device());
  if (out.numel() > 0) k.get(x.device())(out, detail::cast(x, ct), f);
  if (auto node = autograd::make_node(op, x)) {
    node->save(x);
    node->save_output(out);
    node->set_backward([backward](const TensorList& g, const TensorList& s) { return TensorList{backward(g[0], s[0], s[1])}; });
    autograd::set_history(out, node);
  }
  return out;
}

fn::Clamp clamp_functor(const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  return {min ? min->to_double() : 0.0, max ? max->to_double() : 0.0, min.has_value(), max.has_value()};
}

// The dtype clamp computes in: a float bound on an integer tensor promotes, like PyTorch.
DType clamp_dtype(const char* op, const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  RTX_CHECK(min || max, ValueError, "[{}] at least one of min and max must be given", op);
  RTX_CHECK(x.dtype() != kBool, DTypeError, "[{}] not supported for bool tensors", op);
  DType ct = x.dtype();
  if (min) ct = detail::promote_with_scalar(ct, *min);
  if (max) ct = detail::promote_with_scalar(ct, *max);
  return ct;
}
}  // namespace

Tensor gelu(const Tensor& x, const std::string& approximate) {
  check_defined(x, "gelu");
  RTX_CHECK(approximate == "none" || approximate == "tanh", ValueError,
            "[gelu] approximate must be 'none' or 'tanh', got '{}'", approximate);
  const bool tanh_approx = approximate == "tanh";
  const DType ct = compute_dtype("gelu", x.dtype(), Rule::FLOAT);
  const bool rounds_to_16bit = ct == kBFloat16 || ct == kFloat16;
  auto backward = [tanh_approx, rounds_to_16bit](const Tensor& g, const Tensor& x, const Tensor&) {
    // One fused pass, unless the gradient is itself recorded (create_graph).
    if (!detail::needs_differentiable_backward({g, x})) {
      Broadcast bc = broadcast_pair("gelu_backward", g, x, x.dtype());
      Tensor grad = detail::make_tensor(bc.shape, x.dtype(), bc.device);
      if (grad.numel() > 0) {
        if (tanh_approx) {
          kernels::gelu_tanh_backward_kernel.get(bc.device)(grad, bc.a, bc.b, fn::GeluTanhBackward{rounds_to_16bit});
        } else {
          kernels::gelu_backward_kernel.get(bc.device)(grad, bc.a, bc.b, fn::GeluBackward{});
        }
      }
      return grad;
    }
    if (!tanh_approx) return g * ((erf(x * 0.70710678118654752440) + 1) * 0.5 + x * exp(x * x * -0.5) * 0.3989422804014327);
    const double k = 0.79788456080286535588;
    Tensor t = tanh((x + x * x * x * 0.044715) * k);
    return g * ((t + 1) * 0.5 + x * (1 - t * t) * (x * x * (3 * 0.044715) + 1) * (0.5 * k));
  };
  if (tanh_approx) return unary_functor("gelu", kernels::gelu_tanh_kernel, x, fn::GeluTanh{rounds_to_16bit}, ct, backward);
  return unary_functor("gelu", kernels::gelu_kernel, x, fn::Gelu{}, ct, backward);
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_defined(x, "leaky_relu");
  return unary_functor("leaky_relu", kernels::leaky_relu_kernel, x, fn::LeakyRelu{negative_slope},
                       compute_dtype("leaky_relu", x.dtype(), Rule::FLOAT),
                     [negative_slope](const Tensor& g, const Tensor& x, const Tensor&) {
                       return where(x > 0, g, g * negative_slope);
                     });
}

Tensor elu(const Tensor& x, double alpha) {
  check_defined(x, "elu");
  return unary_functor("elu", kernels::elu_kernel, x, fn::Elu{alpha}, compute_dtype("elu", x.dtype(), Rule::FLOAT),
                     [alpha](const Tensor& g, const Tensor& x, const Tensor& out) {
                       return where(x > 0, g, g * (out + alpha));
                     });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  RTX_AUTOCAST(fp32, softplus, x, beta, threshold);
  check_defined(x, "softplus");
  RTX_CHECK(beta != 0.0, ValueError, "[softplus] beta must be nonzero");
  return unary_functor("softplus", kernels::softplus_kernel, x, fn::Softplus{beta, threshold},
                       compute_dtype("softplus", x.dtype(), Rule::FLOAT),
                     [beta, threshold](const Tensor& g, const Tensor& x, const Tensor&) {
                       Tensor bx = x * beta;
                       return where(bx > threshold, g, g * sigmoid(bx));
                     });
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  check_defined(x, "clamp");
  const DType ct = clamp_dtype("clamp", x, min, max);
  const fn::Clamp f = clamp_functor(min, max);
  return unary_functor("clamp", kernels::clamp_kernel, x, f, ct, [f](const Tensor& g, const Tensor& x, const Tensor&) {
    Tensor keep = ones_like(x, TensorOptions(kBool, x.device()));
    if (f.has_lo) keep = logical_and(keep, x >= f.lo);
    if (f.has_hi) keep = logical_and(keep, x <= f.hi);
    return where(keep, g, zeros_like(g));
  });
}

Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  check_defined(x, "clamp_");
  const DType ct = clamp_dtype("clamp_", x, min, max);
  return inplace("clamp_", x, {}, ct, [&] { return clamp(x.clone(), min, max); },
                 [&] { kernels::clamp_kernel.get(x.device())(x, x, clamp_functor(min, max)); });
}

Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  check_defined(x, "clamp");
  RTX_CHECK(min.defined() || max.defined(), ValueError, "[clamp] at least one of min and max must be given");
  Tensor r = x;
  if (min.defined()) r = maximum(r, min);
  if (max.defined()) r = minimum(r, max);
  return r;
}

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (alpha.is_integral() && alpha.to_int() == 1) return add(a, b);
  return add(a, mul(b, alpha));
}

Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha) {
  if (alpha.is_integral() && alpha.to_int() == 1) return add_(a, b);
  return add_(a, mul(b, alpha));
}

// ---- ternary ------------------------------------------------------------------------------------

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where", "condition");
  check_defined(a, "where", "first value");
  check_defined(b, "where", "second value");
  RTX_CHECK(cond.dtype() == kBool, DTypeError, "[where] the condition must be a bool tensor, got {}", cond.dtype());
  const Device device = detail::common_device("where", {&cond, &a, &b});
  const DType ct = result_type(a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = detail::make_tensor(shape, ct, device);
  if (out.numel() > 0)
    kernels::where_kernel.get(device)(out, detail::expand_to(cond, shape), detail::expand_to(detail::cast(a, ct), shape),
                                          detail::expand_to(detail::cast(b, ct), shape), fn::Where{});
  if (auto node = autograd::make_node("where", cond, a, b)) {
    node->save(cond);
    node->set_backward([](const TensorList& g, const TensorList& s) {
      Tensor zero = zeros_like(g[0]);
      return TensorList{Tensor(), where(s[0], g[0], zero), where(s[0], zero, g[0])};
    });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  check_defined(a, "where", "first value");
  return where(cond, a, detail::wrap_number(b, result_type(a, b)));
}

Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  check_defined(b, "where", "second value");
  return where(cond, detail::wrap_number(a, result_type(b, a)), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  check_defined(x, "masked_fill");
  check_defined(mask, "masked_fill", "mask");
  RTX_CHECK(mask.dtype() == kBool, DTypeError, "[masked_fill] the mask must be a bool tensor, got {}", mask.dtype());
  RTX_CHECK(broadcast_shapes(mask.sizes(), x.sizes(), "masked_fill") == x.sizes(), ShapeError,
            "[masked_fill] mask of shape {} does not broadcast to the input's shape {}", detail::shape_str(mask.sizes()),
            detail::shape_str(x.sizes()));
  RTX_CHECK(is_floating(x.dtype()) || !value.is_floating(), DTypeError,
            "[masked_fill] cannot fill a {} tensor with the float value {}", x.dtype(), value.to_double());
  detail::check_fits("masked_fill", value, x.dtype());
  return where(mask, detail::wrap_number(value, x.dtype()), x);
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Scalar& value) {
  check_defined(x, "masked_fill_");
  return inplace("masked_fill_", x, {}, x.dtype(), [&] { return masked_fill(x, mask, value); }, [&] {
    write_into("masked_fill_", x, masked_fill(x, mask, value));
  });
}

namespace {
// The dtype addcmul/addcdiv compute in (addcdiv divides integers in the default float type).
DType addc_dtype(const char* op, const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value, bool divide) {
  check_defined(x, op);
  check_defined(t1, op, "tensor1");
  check_defined(t2, op, "tensor2");
  const Tensor* ts[] = {&x, &t1, &t2};
  DType ct = detail::result_type_of(ts, 3, &value, 1);
  if (divide && !is_floating(ct)) ct = get_default_dtype();
  RTX_CHECK(ct != kBool, DTypeError, "[{}] not supported for bool tensors", op);
  return ct;
}

template <typename F>
Tensor addc(const char* op, const KernelTable<kernels::TernaryFunctorFn<F>>& k, const Tensor& x, const Tensor& t1,
            const Tensor& t2, const Scalar& value, bool divide) {
  const DType ct = addc_dtype(op, x, t1, t2, value, divide);
  const Device device = detail::common_device(op, {&x, &t1, &t2});
  const Shape shape = broadcast_shapes(broadcast_shapes(x.sizes(), t1.sizes(), op), t2.sizes(), op);
  Tensor out = detail::make_tensor(shape, ct, device);
  if (out.numel() > 0)
    k.get(device)(out, detail::expand_to(detail::cast(x, ct), shape), detail::expand_to(detail::cast(t1, ct), shape),
                      detail::expand_to(detail::cast(t2, ct), shape), F{value.to_double()});
  if (auto node = autograd::make_node(op, x, t1, t2)) {
    node->save(t1);
    node->save(t2);
    const double v = value.to_double();
    node->set_backward([v, divide](const TensorList& g, const TensorList& s) {
      if (divide) return TensorList{g[0], g[0] * v / s[1], -g[0] * v * s[0] / (s[1] * s[1])};
      return TensorList{g[0], g[0] * v * s[1], g[0] * v * s[0]};
    });
    autograd::set_history(out, node);
  }
  return out;
}
}  // namespace

Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc("addcmul", kernels::addcmul_kernel, x, t1, t2, value, false);
}

Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  return addc("addcdiv", kernels::addcdiv_kernel, x, t1, t2, value, true);
}

Tensor& addcmul_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  const DType ct = addc_dtype("addcmul_", x, t1, t2, value, false);
  return inplace("addcmul_", x, {t1, t2}, ct, [&] { return addcmul(x, t1, t2, value); },
                 [&] { write_into("addcmul_", x, addcmul(x, t1, t2, value)); });
}

Tensor& addcdiv_(Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value) {
  const DType ct = addc_dtype("addcdiv_", x, t1, t2, value, true);
  return inplace("addcdiv_", x, {t1, t2}, ct, [&] { return addcdiv(x, t1, t2, value); },
                 [&] { write_into("addcdiv_", x, addcdiv(x, t1, t2, value)); });
}

Tensor lerp(const Tensor& x, const Tensor& end, const Scalar& weight) {
  check_defined(x, "lerp");
  check_defined(end, "lerp", "end");
  RTX_CHECK(is_floating(x.dtype()) && is_floating(end.dtype()), DTypeError,
            "[lerp] expects float tensors, got {} and {}", x.dtype(), end.dtype());
  const DType ct = result_type(x, end);
  Broadcast bc = broadcast_pair("lerp", x, end, ct);
  Tensor out = detail::make_tensor(bc.shape, ct, bc.device);
  const double w = weight.to_double();
  if (out.numel() > 0) kernels::lerp_kernel.get(bc.device)(out, bc.a, bc.b, fn::Lerp{w});
  if (auto node = autograd::make_node("lerp", x, end)) {
    node->set_backward([w](const TensorList& g, const TensorList&) { return TensorList{g[0] * (1 - w), g[0] * w}; });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor& lerp_(Tensor& x, const Tensor& end, const Scalar& weight) {
  check_defined(x, "lerp_");
  return inplace("lerp_", x, {end}, x.dtype(), [&] { return lerp(x, end, weight); },
                 [&] { write_into("lerp_", x, lerp(x, end, weight)); });
}

}  // namespace rtx
