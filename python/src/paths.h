// The path argument of the bindings that open files: a str, bytes or os.PathLike, as os.fsencode
// takes them (anything else, e.g. an int file descriptor, raises TypeError), as the bytes the C
// library gets. A NUL byte in it is refused by the library (ValueError), not cut off.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace rtx::python {

inline std::string filesystem_path(const pybind11::handle& path) {
  return pybind11::module_::import("os").attr("fsencode")(path).cast<std::string>();
}

}  // namespace rtx::python
