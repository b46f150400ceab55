// Values written as Python writes them, for the layers' extra_repr (PyTorch's module printing).
#pragma once

#include <fmt/format.h>

#include <string>

#include "rtx/tensor.h"

namespace rtx::nn::detail {

// "True" / "False".
inline std::string py_bool(bool v) { return v ? "True" : "False"; }

// Python's repr of a float: shortest round trip, "1e-05", "0.1", "1.0".
inline std::string py_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': inf and nan stay as they are
  return s;
}

// Python's repr of a tuple of ints: "(3, 3)", "(64,)".
inline std::string py_tuple(const Shape& v) {
  if (v.size() == 1) return fmt::format("({},)", v[0]);
  return fmt::format("({})", fmt::join(v, ", "));
}

}  // namespace rtx::nn::detail
