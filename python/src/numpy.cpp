// Zero-copy exchange with numpy: rustytorch.from_numpy wraps an array's memory (the tensor keeps the
// array alive), Tensor.numpy() exposes a CPU tensor's memory (the array keeps the tensor alive), and
// rustytorch.frombuffer wraps any buffer; read-only memory is copied instead (see adopt_foreign).
#include <pybind11/numpy.h>

#include <memory>
#include <string>

#include "bindings.h"

namespace rtx::python {
namespace {

// Fields are read through Python attributes: the C layout of numpy's dtype struct changed in numpy 2.
DType dtype_of_numpy(const py::dtype& dt) {
  const char kind = dt.attr("kind").cast<std::string>()[0];
  const py::ssize_t size = dt.attr("itemsize").cast<py::ssize_t>();
  if (kind == 'b' && size == 1) return kBool;
  if (kind == 'u' && size == 1) return kUInt8;
  if (kind == 'i' && size == 1) return kInt8;
  if (kind == 'i' && size == 2) return kInt16;
  if (kind == 'i' && size == 4) return kInt32;
  if (kind == 'i' && size == 8) return kInt64;
  if (kind == 'f' && size == 2) return kFloat16;
  if (kind == 'f' && size == 4) return kFloat32;
  if (kind == 'f' && size == 8) return kFloat64;
  throw py::type_error("from_numpy: numpy arrays of dtype " + dt.attr("name").cast<std::string>() +
                       " are not supported; supported: bool, uint8, int8, int16, int32, int64, float16, float32, float64");
}

py::dtype numpy_dtype_of(DType t) {
  switch (t) {
    case kBool: return py::dtype("bool");
    case kUInt8: return py::dtype("uint8");
    case kInt8: return py::dtype("int8");
    case kInt16: return py::dtype("int16");
    case kInt32: return py::dtype("int32");
    case kInt64: return py::dtype("int64");
    case kFloat16: return py::dtype("float16");
    case kFloat32: return py::dtype("float32");
    case kFloat64: return py::dtype("float64");
    case kBFloat16: break;
  }
  throw py::type_error("numpy() does not support bfloat16 (numpy has no such dtype); convert with .float() first");
}

Tensor from_numpy(const py::array& array) {
  const DType dtype = dtype_of_numpy(array.dtype());
  if (!array.dtype().attr("isnative").cast<bool>())
    throw py::value_error("from_numpy: the array is not in the machine's byte order; call .astype(arr.dtype.newbyteorder('='))");
  const py::ssize_t item = array.dtype().attr("itemsize").cast<py::ssize_t>();
  Shape shape, strides;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    const py::ssize_t stride = array.strides(d);
    if (stride < 0 || stride % item != 0)
      throw py::value_error("from_numpy: the array has negative or unaligned strides (" + std::to_string(stride) +
                            " bytes in dim " + std::to_string(d) + "); pass a copy (arr.copy()) instead");
    shape.push_back(array.shape(d));
    strides.push_back(stride / item);
  }
  PyObject* owner = array.ptr();
  Py_INCREF(owner);
  Tensor t = from_blob(const_cast<void*>(array.data()), shape, strides, dtype, Device(kCPU), [owner](void*) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(owner);
  });
  return adopt_foreign(std::move(t), !array.writeable(), "from_numpy", "the NumPy array");
}

py::array to_numpy(const Tensor& t) {
  if (t.requires_grad())
    throw py::value_error("numpy(): the tensor requires grad; use tensor.detach().numpy()");
  if (!t.is_cpu())
    throw py::type_error("numpy(): the tensor is on " + t.device().str() +
                         "; copy it to host memory first with tensor.cpu()");
  const py::dtype dt = numpy_dtype_of(t.dtype());
  std::vector<py::ssize_t> shape, strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    shape.push_back(t.size(d));
    strides.push_back(t.stride(d) * static_cast<py::ssize_t>(t.element_size()));
  }
  // The capsule owns a handle to the tensor, so the memory lives as long as the array.
  py::capsule owner(new Tensor(t), [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dt, shape, strides, t.data_ptr(), owner);
}

// count elements of dtype (-1: as many as the rest holds) at byte `offset` of any object exporting a
// contiguous buffer (bytearray, bytes, mmap, ...), without a copy: the tensor keeps the export (and so
// the object) alive. A read-only buffer is copied (see adopt_foreign).
Tensor from_buffer_object(const py::object& obj, DType dtype, int64_t count, int64_t offset) {
  auto view = std::make_shared<Py_buffer>();
  bool read_only = false;
  if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_WRITABLE) != 0) {
    PyErr_Clear();
    read_only = true;
    if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      throw py::type_error("frombuffer: a " + type_name(obj) + " does not export a buffer; pass a bytes, bytearray, "
                           "memoryview, mmap or array object");
    }
  }
  const auto release = [view](void*) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    PyBuffer_Release(view.get());
  };
  const int64_t size = static_cast<int64_t>(view->len), item = static_cast<int64_t>(element_size(dtype));
  const auto refuse = [&](const std::string& why) {
    release(nullptr);
    throw rtx::ValueError("[frombuffer] " + why);
  };
  if (offset < 0 || offset > size)
    refuse("offset " + std::to_string(offset) + " is outside the buffer of " + std::to_string(size) + " bytes");
  if (count < -1)
    refuse("count must be -1 (the whole buffer after offset) or nonnegative, got " + std::to_string(count));
  if (count == -1) {
    if ((size - offset) % item != 0)
      refuse("the buffer's " + std::to_string(size - offset) + " bytes after offset " + std::to_string(offset) +
             " are not a whole number of " + dtype_name(dtype) + " elements of " + std::to_string(item) + " bytes");
    count = (size - offset) / item;
  } else if (count > (size - offset) / item) {
    refuse(std::to_string(count) + " elements of " + dtype_name(dtype) + " (" + std::to_string(item) +
           " bytes each) at offset " + std::to_string(offset) + " overrun the buffer of " + std::to_string(size) +
           " bytes");
  }
  Tensor t = from_blob(static_cast<char*>(view->buf) + offset, {count}, {1}, dtype, Device(kCPU), release);
  return adopt_foreign(std::move(t), read_only, "frombuffer", "the " + type_name(obj));
}

}  // namespace

void bind_numpy(py::module_& m, TensorClass& cls) {
  // pybind11 looks numpy's C API up on first use, in a function-local static whose initializer
  // imports numpy and so may release the GIL: threads making their first numpy call at once would
  // then deadlock on that static's guard. Looking it up here, at import, avoids the race.
  py::detail::npy_api::get();
  m.def("frombuffer", &from_buffer_object, py::arg("buffer"), py::kw_only(), py::arg("dtype"), py::arg("count") = -1,
        py::arg("offset") = 0, "A 1-d tensor over an object's buffer (no copy; a read-only buffer is copied, with a "
        "warning).");
  cls.def("_raw_bytes", [](const Tensor& t) {
    const Tensor c = t.detach().cpu().contiguous();
    return py::bytes(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }, "The tensor's elements as bytes, row-major, in the machine's byte order.");
  m.def("from_numpy", &from_numpy, py::arg("ndarray"),
        "A tensor sharing the array's memory (no copy); writes through either are seen by both. A read-only "
        "array is copied, with a warning.");
  cls.def("numpy", &to_numpy, "This CPU tensor's memory as a numpy array (no copy).");
  cls.def(
      "__array__",
      [](const Tensor& t, const py::object& dtype, const py::object&) -> py::object {
        const py::array a = to_numpy(t.detach().cpu());
        return dtype.is_none() ? py::object(a) : py::object(a.attr("astype")(dtype));
      },
      py::arg("dtype") = py::none(), py::arg("copy") = py::none());
}

}  // namespace rtx::python
