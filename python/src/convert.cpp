// Shape and dim-list conversions (see convert.h).
#include "convert.h"

namespace rtx::python {

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

Shape to_shape(py::handle obj, const char* what) {
  if (PyLong_Check(obj.ptr()) && !PyBool_Check(obj.ptr())) return {obj.cast<int64_t>()};
  if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    Shape shape;
    for (py::handle item : obj) {
      if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr()))
        throw py::type_error(std::string(what) + " must be a sequence of ints, got an element of type " +
                             type_name(item));
      shape.push_back(py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr())).cast<int64_t>());
    }
    return shape;
  }
  if (PyIndex_Check(obj.ptr()) && !PyBool_Check(obj.ptr()))
    return {py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr())).cast<int64_t>()};
  throw py::type_error(std::string(what) + " must be an int or a sequence of ints, got " + type_name(obj));
}

Shape shape_args(const py::args& args, const char* what) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return to_shape(args[0], what);
  Shape shape;
  for (py::handle item : args) {
    const Shape one = to_shape(item, what);
    if (one.size() != 1 || !PyIndex_Check(item.ptr()))
      throw py::type_error(std::string(what) + " must be ints or one sequence of ints");
    shape.push_back(one[0]);
  }
  return shape;
}

Shape dims_arg(const py::object& dims) {
  if (dims.is_none()) return {};
  return to_shape(dims, "dim");
}

}  // namespace rtx::python
