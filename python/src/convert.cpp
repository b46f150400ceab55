// Shape and dim-list conversions (see convert.h).
#include "convert.h"

namespace rtx::python {

py::object to_size(const Shape& shape) {
  // The class, looked up once (under the GIL, so a plain pointer suffices) and kept for the process.
  static PyTypeObject* size_type = nullptr;
  if (size_type == nullptr)
    size_type = reinterpret_cast<PyTypeObject*>(
        py::object(py::module_::import("rustytorch._size").attr("Size")).release().ptr());
  // Filled in place, as tuple's own constructor fills an instance of a subclass: x.shape stays a
  // C-level call.
  PyObject* size = size_type->tp_alloc(size_type, static_cast<Py_ssize_t>(shape.size()));
  if (size == nullptr) throw py::error_already_set();
  py::object result = py::reinterpret_steal<py::object>(size);
  for (size_t i = 0; i < shape.size(); ++i) {
    PyObject* item = PyLong_FromLongLong(shape[i]);
    if (item == nullptr) throw py::error_already_set();
    PyTuple_SET_ITEM(size, static_cast<Py_ssize_t>(i), item);
  }
  return result;
}

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
