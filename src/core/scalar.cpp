// Printing scalars.
#include "rtx/scalar.h"

namespace rtx {

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to_bool() ? "True" : "False");
  if (s.is_integral()) return os << s.to_int();
  return os << s.to_double();
}

}  // namespace rtx
