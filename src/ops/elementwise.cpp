// Elementwise ops built from the pointwise table (so every device, dtype rule and autograd come with
// them): nan_to_num, logit, xlogy, frac, signbit, copysign, heaviside, fmax/fmin, isposinf/isneginf,
// deg2rad/rad2deg and float_power.
#include <cmath>

#include "ops/internal.h"

namespace rtx {
namespace {

using detail::check_defined;

// The floating dtype both operands compute in: their promoted type, or the default float for
// integers and bool (as true division does).
DType floating_result(const Tensor& a, const Tensor& b) {
  const DType t = result_type(a, b);
  return is_floating(t) ? t : get_default_dtype();
}

Tensor in_floating(const Tensor& x) { return is_floating(x.dtype()) ? x : to_dtype(x, get_default_dtype()); }

// x times a constant, in float32 for 16-bit x (as PyTorch's kernels compute), so that the constant
// keeps its float32 precision.
Tensor scaled(const Tensor& x, double factor) {
  const Tensor xf = in_floating(x);
  if (element_size(xf.dtype()) != 2) return xf * factor;
  return (to_dtype(xf, kFloat32) * factor).to(xf.dtype());
}

using Extreme = Tensor (*)(const Tensor&, const Tensor&);

// extreme(a, b), except that where one operand is NaN the other is the result.
Tensor nan_ignoring(const char* op, const Tensor& a, const Tensor& b, Extreme extreme) {
  check_defined(a, op, "input");
  check_defined(b, op, "other");
  const Tensor m = extreme(a, b);
  if (!is_floating(m.dtype())) return m;
  return where(isnan(a), b.to(m.dtype()), where(isnan(b), a.to(m.dtype()), m));
}

}  // namespace

Tensor nan_to_num(const Tensor& x, double nan, std::optional<double> posinf, std::optional<double> neginf) {
  check_defined(x, "nan_to_num");
  if (!is_floating(x.dtype())) return x.clone();
  const double top = largest_value(x.dtype());
  const Tensor no_inf = where(isposinf(x), Scalar(posinf.value_or(top)),
                              where(isneginf(x), Scalar(neginf.value_or(-top)), x));
  return where(isnan(x), Scalar(nan), no_inf);
}

Tensor logit(const Tensor& x, std::optional<double> eps) {
  check_defined(x, "logit");
  const Tensor p = eps ? clamp(in_floating(x), Scalar(*eps), Scalar(1.0 - *eps)) : in_floating(x);
  return log(p / (1.0 - p));
}

Tensor xlogy(const Tensor& x, const Tensor& y) {
  check_defined(x, "xlogy", "self");
  check_defined(y, "xlogy", "other");
  const DType t = floating_result(x, y);
  const Tensor xf = to_dtype(x, t), yf = to_dtype(y, t);
  // 0 where x is 0 (+0, whatever x's sign), with log(1) in the unused product so that its gradient
  // never meets 0 * log(0).
  const Tensor zero = logical_and(eq(xf, Scalar(0)), logical_not(isnan(yf)));
  return where(zero, Scalar(0.0), xf * log(where(zero, Scalar(1.0), yf)));
}

Tensor frac(const Tensor& x) {
  check_defined(x, "frac");
  RTX_CHECK(is_floating(x.dtype()), DTypeError, "[frac] expects a floating tensor, got {}", x.dtype());
  return x - trunc(x);
}

Tensor signbit(const Tensor& x) {
  check_defined(x, "signbit");
  switch (x.dtype()) {
    case kBool:
    case kUInt8: return zeros(x.sizes(), TensorOptions(kBool, x.device()));
    case kFloat16:
    case kBFloat16: return lt(view_dtype(x, kInt16), Scalar(0));
    case kFloat32: return lt(view_dtype(x, kInt32), Scalar(0));
    case kFloat64: return lt(view_dtype(x, kInt64), Scalar(0));
    default: return lt(x, Scalar(0));
  }
}

Tensor copysign(const Tensor& a, const Tensor& b) {
  check_defined(a, "copysign", "input");
  check_defined(b, "copysign", "other");
  const DType t = floating_result(a, b);
  const Tensor magnitude = abs(to_dtype(a, t));
  return where(signbit(b), neg(magnitude), magnitude);  // neg sets a NaN's sign bit too
}

Tensor heaviside(const Tensor& x, const Tensor& values) {
  check_defined(x, "heaviside", "input");
  check_defined(values, "heaviside", "values");
  RTX_CHECK(x.dtype() == values.dtype(), DTypeError,
            "[heaviside] input and values must have one dtype, got {} and {}", x.dtype(), values.dtype());
  return where(eq(x, Scalar(0)), values, gt(x, Scalar(0)).to(x.dtype()));
}

Tensor fmax(const Tensor& a, const Tensor& b) { return nan_ignoring("fmax", a, b, maximum); }

Tensor fmin(const Tensor& a, const Tensor& b) { return nan_ignoring("fmin", a, b, minimum); }

Tensor isposinf(const Tensor& x) {
  check_defined(x, "isposinf");
  return logical_and(isinf(x), gt(x, Scalar(0)));
}

Tensor isneginf(const Tensor& x) {
  check_defined(x, "isneginf");
  return logical_and(isinf(x), lt(x, Scalar(0)));
}

Tensor deg2rad(const Tensor& x) {
  check_defined(x, "deg2rad");
  return scaled(x, M_PI / 180.0);
}

Tensor rad2deg(const Tensor& x) {
  check_defined(x, "rad2deg");
  return scaled(x, 180.0 / M_PI);
}

Tensor float_power(const Tensor& a, const Tensor& b) {
  check_defined(a, "float_power", "input");
  check_defined(b, "float_power", "exponent");
  return pow(to_dtype(a, kFloat64), to_dtype(b, kFloat64));
}

}  // namespace rtx
