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

namespace {

// An int-like (anything with __index__, not bool) as int64; ValueError naming what outside int64.
int64_t index_value(py::handle item, const char* what) {
  const py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0)
    throw rtx::ValueError(std::string(what) + " holds " + py::str(i).cast<std::string>() +
                          ", outside the int64 range [-2**63, 2**63)");
  return v;
}

// A dtype has __index__ too (it is an enum), but is never a size or an index.
bool is_index(py::handle obj) {
  return PyIndex_Check(obj.ptr()) && !PyBool_Check(obj.ptr()) && !py::isinstance<DType>(obj);
}

[[noreturn]] void* refuse_uninitialised(size_t) {
  throw py::type_error(
      "this rustytorch object was made by __new__() without __init__(), so it holds no value; create it by "
      "calling its class (rustytorch.Tensor(data), rustytorch.device('cpu'), ...) or a factory function");
}

}  // namespace

int64_t to_int64(py::handle obj, const char* what) {
  if (!is_index(obj)) throw py::type_error(std::string(what) + " must be an int, got " + type_name(obj));
  return index_value(obj, what);
}

Shape to_shape(py::handle obj, const char* what) {
  if (is_index(obj)) return {index_value(obj, what)};
  if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    Shape shape;
    for (py::handle item : obj) {
      if (!is_index(item))
        throw py::type_error(std::string(what) + " must be a sequence of ints, got an element of type " +
                             type_name(item));
      shape.push_back(index_value(item, what));
    }
    return shape;
  }
  throw py::type_error(std::string(what) + " must be an int or a sequence of ints, got " + type_name(obj));
}

Shape shape_args(const py::args& args, const char* what) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return to_shape(args[0], what);
  Shape shape;
  for (py::handle item : args) {
    if (!is_index(item)) throw py::type_error(std::string(what) + " must be ints or one sequence of ints");
    shape.push_back(index_value(item, what));
  }
  return shape;
}

Shape dims_arg(const py::object& dims, const char* what) {
  if (dims.is_none()) return {};
  return to_shape(dims, what);
}

namespace {

// Rewrites, element by element, the bytes of a CPU bool tensor that are neither 0 nor 1 as 1.
void canonical_bools(const Tensor& t) {
  auto* base = static_cast<uint8_t*>(t.data_ptr());
  if (t.is_contiguous()) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (base[i] > 1) base[i] = 1;
    return;
  }
  const Shape& sizes = t.sizes();
  const Shape& strides = t.strides();
  Shape index(sizes.size(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < sizes.size(); ++d) offset += index[d] * strides[d];
    if (base[offset] > 1) base[offset] = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

Tensor adopt_foreign(Tensor t, bool read_only, const char* op, const std::string& source) {
  if (read_only) {
    const std::string message = std::string(op) + ": " + source +
                                " is read-only, so the tensor holds a copy of it (writes to either are not seen by "
                                "the other); pass writable memory to share it (a NumPy array with "
                                "flags.writeable, a bytearray, an mmap opened with ACCESS_WRITE or ACCESS_COPY, or "
                                "np.load(..., mmap_mode='c'))";
    if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw py::error_already_set();
    t = t.clone();
  }
  if (t.dtype() == kBool && t.is_cpu()) canonical_bools(t);
  return t;
}

void refuse_uninitialised_instances() {
  for (const auto& entry : py::detail::get_internals().registered_types_cpp) {
    py::detail::type_info* info = entry.second;
    const py::handle type(reinterpret_cast<PyObject*>(info->type));
    if (py::str(type.attr("__module__")).cast<std::string>().rfind("rustytorch", 0) == 0)
      info->operator_new = &refuse_uninitialised;
  }
}

}  // namespace rtx::python
