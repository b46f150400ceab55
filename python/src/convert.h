// Conversions between Python values and the library's argument types, shared by every binding file:
// Python numbers as rtx::Scalar (bool, int and float kept apart, as PyTorch's promotion needs),
// devices from rustytorch.device objects or strings, shapes and dim lists given the ways PyTorch
// accepts them (f(2, 3), f((2, 3)), f([2, 3]), f(None)), shapes returned as rustytorch.Size, and
// what every class of the module and every tensor over Python's memory must guard against
// (instances made by __new__ alone, read-only memory, bool bytes other than 0 and 1). A value out
// of range raises a rustytorch.ValueError naming the argument, never pybind11's cast error.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "rtx/rtx.h"

namespace pybind11::detail {

// Python bool, int and float (and numpy scalars, through __index__ / __float__) as rtx::Scalar.
template <>
struct type_caster<rtx::Scalar> {
  PYBIND11_TYPE_CASTER(rtx::Scalar, const_name("Number"));

  bool load(handle src, bool convert) {
    if (PyBool_Check(src.ptr())) {
      value = rtx::Scalar(src.ptr() == Py_True);
      return true;
    }
    if (PyLong_Check(src.ptr())) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(src.ptr(), &overflow);
      if (overflow != 0)
        throw rtx::ValueError("[Number] the integer " + str(src).cast<std::string>() +
                              " is outside the int64 range [-2**63, 2**63) of a number argument");
      value = rtx::Scalar(static_cast<int64_t>(v));
      return true;
    }
    if (PyFloat_Check(src.ptr())) {
      value = rtx::Scalar(PyFloat_AsDouble(src.ptr()));
      return true;
    }
    if (!convert) return false;
    // numpy scalars and other number-likes: integers through __index__, the rest through __float__.
    if (hasattr(src, "dtype") && hasattr(src, "item")) return load(src.attr("item")(), false);
    if (PyIndex_Check(src.ptr())) {
      const object i = reinterpret_steal<object>(PyNumber_Index(src.ptr()));
      if (i) return load(i, false);
      PyErr_Clear();
    }
    if (PyNumber_Check(src.ptr()) && !hasattr(src, "__dlpack__")) {
      const double d = PyFloat_AsDouble(src.ptr());
      if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = rtx::Scalar(d);
      return true;
    }
    return false;
  }

  static handle cast(const rtx::Scalar& s, return_value_policy, handle) {
    if (s.is_bool()) return pybind11::bool_(s.to_bool()).release();
    if (s.is_integral()) return PyLong_FromLongLong(s.to_int());
    return PyFloat_FromDouble(s.to_double());
  }
};

// Python ints (and objects with __index__, such as numpy integers) as int64 arguments, as pybind11's
// own caster takes them, except that an int outside the int64 range raises rustytorch.ValueError
// instead of failing the overload match (whose TypeError lists signatures and names no value).
// Every binding file sees this specialization through this header.
template <>
struct type_caster<std::int64_t> {
  PYBIND11_TYPE_CASTER(std::int64_t, const_name("int"));

  bool load(handle src, bool convert) {
    if (!src || PyFloat_Check(src.ptr())) return false;
    object index;
    PyObject* number = src.ptr();
    if (!PyLong_Check(number)) {
      if (!PyIndex_Check(number)) return false;
      index = reinterpret_steal<object>(PyNumber_Index(number));
      if (!index) {
        PyErr_Clear();
        return false;
      }
      number = index.ptr();
    }
    (void)convert;
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (overflow != 0)
      throw rtx::ValueError("[int] the integer " + str(number).cast<std::string>() +
                            " is outside the int64 range [-2**63, 2**63) of an integer argument");
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    value = static_cast<std::int64_t>(v);
    return true;
  }

  static handle cast(std::int64_t v, return_value_policy, handle) { return PyLong_FromLongLong(v); }
};

// rustytorch.device objects and device strings ("cpu", "cuda", "cuda:1") as rtx::Device; a string
// that names no device raises the parser's ValueError, which quotes it.
template <>
struct type_caster<rtx::Device> : type_caster_base<rtx::Device> {
  bool load(handle src, bool convert) {
    if (!PyUnicode_Check(src.ptr())) return type_caster_base<rtx::Device>::load(src, convert);
    parsed_ = rtx::Device(src.cast<std::string>());
    value = &parsed_;
    return true;
  }

 private:
  rtx::Device parsed_{rtx::kCPU};
};

}  // namespace pybind11::detail

namespace rtx::python {

namespace py = pybind11;

// A shape or dim list from an int or a sequence of ints (anything with __index__); `what` ("view():
// shape") names the argument in the TypeError for other types and the ValueError for ints outside
// int64.
Shape to_shape(py::handle obj, const char* what);
// An int argument (anything with __index__, not bool) as int64: TypeError naming what for other
// types, ValueError for ints outside int64.
int64_t to_int64(py::handle obj, const char* what);
// The sizes of f(*size): f(2, 3), f((2, 3)) and f([2, 3]) all give [2, 3].
Shape shape_args(const py::args& args, const char* what);
// Reduced dims: None (every dim), an int, or a sequence of ints.
Shape dims_arg(const py::object& dims, const char* what);
// The correction of var/std from PyTorch's unbiased/correction arguments.
inline int64_t correction_of(std::optional<bool> unbiased, std::optional<int64_t> correction) {
  if (correction) return *correction;
  return unbiased.value_or(true) ? 1 : 0;
}
// What from_numpy, frombuffer and from_dlpack return for t, a tensor over memory that Python owns
// (`source` names it in messages: "the NumPy array"). Memory that is read-only is copied, with a
// UserWarning naming op (PyTorch warns too, but shares it): no in-place op can then write into a
// bytes object or a read-only mapping. The bytes of a CPU bool tensor that are neither 0 nor 1 are
// rewritten as 1, the value they mean, so that sums and logical ops see booleans.
Tensor adopt_foreign(Tensor t, bool read_only, const char* op, const std::string& source);
// Makes every class of the module refuse, with a TypeError, an instance that Class.__new__ made
// without __init__ (it holds no C++ object; pybind11 would hand functions an unconstructed one).
// Called once all classes are bound.
void refuse_uninitialised_instances();
// "float32"-style names of dtypes for messages.
std::string type_name(py::handle obj);
// A shape as rustytorch.Size (the tuple subclass of python/rustytorch/_size.py), what x.shape returns.
py::object to_size(const Shape& shape);

// Calls on_tensor or on_number with `other`, the second operand of a binary op: a Python number
// (bool, int, float, or a number-like such as a numpy scalar) or a Tensor. Anything else gives
// NotImplemented, so that a Python operator tries the other operand. One bound function decoding
// its operand costs a tiny op 0.2 us less than pybind11 overloads tried one by one; numbers are
// tried first, since a failed Tensor conversion of a number is slow in pybind11.
template <typename OnTensor, typename OnNumber>
py::object with_operand(py::handle other, const OnTensor& on_tensor, const OnNumber& on_number) {
  py::detail::make_caster<Scalar> number;
  if (number.load(other, false)) return on_number(py::detail::cast_op<const Scalar&>(number));
  py::detail::make_caster<Tensor> tensor;
  if (tensor.load(other, false)) return on_tensor(py::detail::cast_op<const Tensor&>(tensor));
  if (number.load(other, true)) return on_number(py::detail::cast_op<const Scalar&>(number));
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

// with_operand for a named op: an operand that is neither raises TypeError naming the op.
template <typename OnTensor, typename OnNumber>
py::object with_operand(const char* op, py::handle other, const OnTensor& on_tensor, const OnNumber& on_number) {
  py::object r = with_operand(other, on_tensor, on_number);
  if (r.is(py::handle(Py_NotImplemented)))
    throw py::type_error(std::string(op) + "(): other must be a Tensor or a number, got " + type_name(other));
  return r;
}

}  // namespace rtx::python
