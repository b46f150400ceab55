// The library's exceptions as Python exception classes that keep the C++ message: every one derives
// from rustytorch.Error (a RuntimeError) and, where Python has a matching built-in, from it too
// (shape and value errors are ValueErrors, dtype errors TypeErrors, index errors IndexErrors). A
// Python value a binding could not convert (pybind11's cast_error) is a TypeError.
#include <exception>

#include "bindings.h"

namespace rtx::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_shape = nullptr;
PyObject* g_dtype = nullptr;
PyObject* g_device = nullptr;
PyObject* g_index = nullptr;
PyObject* g_value = nullptr;
PyObject* g_oom = nullptr;
PyObject* g_checkpoint = nullptr;
PyObject* g_graph_capture = nullptr;
PyObject* g_dist = nullptr;
PyObject* g_dist_backend = nullptr;
PyObject* g_dist_store = nullptr;

PyObject* new_error(py::module_& m, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string("rustytorch.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

}  // namespace

void bind_errors(py::module_& m) {
  const py::handle runtime(PyExc_RuntimeError);
  g_error = new_error(m, "Error", py::make_tuple(runtime), "Base of rustytorch's errors.");
  const py::handle base(g_error);
  g_shape = new_error(m, "ShapeError", py::make_tuple(base, py::handle(PyExc_ValueError)),
                      "Shapes that do not fit together.");
  g_dtype = new_error(m, "DTypeError", py::make_tuple(base, py::handle(PyExc_TypeError)),
                      "A dtype the op does not accept.");
  g_device = new_error(m, "DeviceError", py::make_tuple(base), "Tensors on different devices, or a missing device.");
  g_index = new_error(m, "IndexError", py::make_tuple(base, py::handle(PyExc_IndexError)),
                      "An index or dimension out of range.");
  g_value = new_error(m, "ValueError", py::make_tuple(base, py::handle(PyExc_ValueError)),
                      "An argument value that is not allowed.");
  g_oom = new_error(m, "OutOfMemoryError", py::make_tuple(base), "A device allocation that failed.");
  g_checkpoint = new_error(m, "CheckpointError", py::make_tuple(base), "A file that cannot be read or written.");
  g_graph_capture = new_error(m, "GraphCaptureError", py::make_tuple(base),
                              "An operation a CUDA graph capture cannot record, or a graph used out of order.");
  g_dist = new_error(m, "DistError", py::make_tuple(base), "A distributed operation that failed.");
  g_dist_backend = new_error(m, "DistBackendError", py::make_tuple(py::handle(g_dist)),
                             "A collective or point-to-point operation that failed.");
  g_dist_store = new_error(m, "DistStoreError", py::make_tuple(py::handle(g_dist)),
                           "A store operation that failed or timed out.");
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const rtx::ShapeError& e) {
      PyErr_SetString(g_shape, e.what());
    } catch (const rtx::DTypeError& e) {
      PyErr_SetString(g_dtype, e.what());
    } catch (const rtx::DeviceError& e) {
      PyErr_SetString(g_device, e.what());
    } catch (const rtx::IndexError& e) {
      PyErr_SetString(g_index, e.what());
    } catch (const rtx::ValueError& e) {
      PyErr_SetString(g_value, e.what());
    } catch (const rtx::OutOfMemoryError& e) {
      PyErr_SetString(g_oom, e.what());
    } catch (const rtx::CheckpointError& e) {
      PyErr_SetString(g_checkpoint, e.what());
    } catch (const rtx::GraphCaptureError& e) {
      PyErr_SetString(g_graph_capture, e.what());
    } catch (const rtx::DistBackendError& e) {
      PyErr_SetString(g_dist_backend, e.what());
    } catch (const rtx::DistStoreError& e) {
      PyErr_SetString(g_dist_store, e.what());
    } catch (const rtx::DistributedError& e) {
      PyErr_SetString(g_dist, e.what());
    } catch (const rtx::Error& e) {
      PyErr_SetString(g_error, e.what());
    } catch (const py::cast_error&) {
      // A Python value a binding could not convert to the C++ type it asked for: a wrong argument type.
      PyErr_SetString(PyExc_TypeError,
                      "an argument has a type this function does not take (a Python value could not be converted to "
                      "the C++ type it expects); check the types of the arguments passed");
    }
  });
}

}  // namespace rtx::python
