// Printing scalars, and whether a scalar fits a dtype (see scalar_range.h).
#include "rtx/scalar.h"

#include <cmath>

#include "core/check.h"
#include "core/scalar_range.h"

namespace rtx {

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to_bool() ? "True" : "False");
  if (s.is_integral()) return os << s.to_int();
  return os << s.to_double();
}

}  // namespace rtx

namespace rtx::detail {
namespace {

bool fits(const Scalar& value, DType dtype) {
  if (dtype == kBool || value.is_bool()) return true;
  const double top = largest_value(dtype);
  if (is_integral(dtype)) {
    const double lowest = dtype == kUInt8 ? 0.0 : -top - 1.0;
    if (value.is_integral()) {
      const int64_t v = value.to_int();
      if (dtype == kInt64) return true;
      const auto max = static_cast<int64_t>(top);
      return dtype == kUInt8 ? v <= max && v >= -max : v <= max && v >= -max - 1;
    }
    const double d = value.to_double();
    return std::isfinite(d) && d >= lowest && (dtype == kInt64 ? d < top : d <= top);
  }
  const double d = value.to_double();
  return !std::isfinite(d) || std::fabs(d) <= top;
}

}  // namespace

void check_fits(const char* op, const Scalar& value, DType dtype) {
  RTX_CHECK(fits(value, dtype), ValueError, "[{}] value {} cannot be converted to {} without overflow", op,
            fmt::streamed(value), dtype);
}

}  // namespace rtx::detail
