// DLPack exchange, both ways and without copies: Tensor.__dlpack__ (the versioned protocol when the
// consumer asks for it, the legacy one otherwise), Tensor.__dlpack_device__, and
// rustytorch.from_dlpack for any producer (numpy, PyTorch, ...; a read-only export is copied, see
// adopt_foreign). The structs below are the DLPack
// 1.0 ABI (dlpack.h of the DLPack project), declared here because they are all a consumer needs.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bindings.h"

namespace rtx::python {
namespace {

// ---- the DLPack 1.0 ABI ---------------------------------------------------------------------------
enum DLDeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum DLDataTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr uint64_t kDLReadOnly = uint64_t{1} << 0;  // DLPACK_FLAG_BITMASK_READ_ONLY
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";

// ---- dtypes and devices ---------------------------------------------------------------------------

DLDataType dl_dtype(DType t) {
  switch (t) {
    case kBool: return {kDLBool, 8, 1};
    case kUInt8: return {kDLUInt, 8, 1};
    case kInt8: return {kDLInt, 8, 1};
    case kInt16: return {kDLInt, 16, 1};
    case kInt32: return {kDLInt, 32, 1};
    case kInt64: return {kDLInt, 64, 1};
    case kFloat16: return {kDLFloat, 16, 1};
    case kBFloat16: return {kDLBfloat, 16, 1};
    case kFloat32: return {kDLFloat, 32, 1};
    case kFloat64: return {kDLFloat, 64, 1};
  }
  throw py::type_error("__dlpack__: unknown dtype");
}

DType rtx_dtype(const DLDataType& d) {
  if (d.lanes == 1) {
    if (d.code == kDLBool && d.bits == 8) return kBool;
    if (d.code == kDLUInt && d.bits == 8) return kUInt8;
    if (d.code == kDLInt && d.bits == 8) return kInt8;
    if (d.code == kDLInt && d.bits == 16) return kInt16;
    if (d.code == kDLInt && d.bits == 32) return kInt32;
    if (d.code == kDLInt && d.bits == 64) return kInt64;
    if (d.code == kDLFloat && d.bits == 16) return kFloat16;
    if (d.code == kDLBfloat && d.bits == 16) return kBFloat16;
    if (d.code == kDLFloat && d.bits == 32) return kFloat32;
    if (d.code == kDLFloat && d.bits == 64) return kFloat64;
  }
  throw py::type_error("from_dlpack: unsupported DLPack dtype (code " + std::to_string(d.code) + ", " +
                       std::to_string(d.bits) + " bits, " + std::to_string(d.lanes) + " lanes)");
}

DLDevice dl_device(const Device& d) {
  return d.is_cuda() ? DLDevice{kDLCUDA, d.index} : DLDevice{kDLCPU, 0};
}

Device rtx_device(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost: return Device(kCPU);
    case kDLCUDA:
    case kDLCUDAManaged: return Device(kCUDA, d.device_id);
    default: break;
  }
  throw py::type_error("from_dlpack: tensors on DLPack device type " + std::to_string(d.device_type) +
                       " are not supported (only CPU and CUDA)");
}

// ---- producing ------------------------------------------------------------------------------------

// What a capsule owns: a handle to the tensor (keeping its memory alive) and the shape and strides
// the DLTensor points to.
template <typename Managed>
struct Export {
  Managed managed{};
  Tensor tensor;
  std::vector<int64_t> shape, strides;
};

template <typename Managed>
Managed* make_managed(const Tensor& t) {
  auto* e = new Export<Managed>();
  e->tensor = t;
  e->shape.assign(t.sizes().begin(), t.sizes().end());
  e->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = e->managed.dl_tensor;
  dl.data = t.data_ptr();
  dl.device = dl_device(t.device());
  dl.ndim = static_cast<int32_t>(t.dim());
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](Managed* self) { delete static_cast<Export<Managed>*>(self->manager_ctx); };
  return &e->managed;
}

// Capsule destructor: frees the tensor unless a consumer took it (and renamed the capsule).
template <typename Managed>
void capsule_destructor(PyObject* capsule) {
  const char* name = std::is_same_v<Managed, DLManagedTensor> ? kLegacyName : kVersionedName;
  if (!PyCapsule_IsValid(capsule, name)) return;
  auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

// Makes work the consumer queues on `stream` wait for the work queued on this tensor so far.
void sync_for_consumer(const Tensor& t, const py::object& stream) {
  if (!t.is_cuda() || stream.is_none()) return;
  const int64_t handle = stream.cast<int64_t>();
  if (handle == -1) return;  // the consumer synchronizes itself
  const rtx::cuda::Stream producer = rtx::cuda::current_stream(t.device().index);
  const uintptr_t consumer = handle == 1 ? 0 : static_cast<uintptr_t>(handle);  // 1: the legacy default stream
  if (reinterpret_cast<uintptr_t>(producer.handle()) == consumer) return;
  producer.synchronize();
}

py::object to_dlpack(const Tensor& t, const py::object& stream, const py::object& max_version,
                     const py::object& dl_device_req, const py::object& copy) {
  if (t.requires_grad())
    throw py::value_error("__dlpack__: the tensor requires grad; export tensor.detach() instead");
  if (!dl_device_req.is_none()) {
    const py::tuple req = dl_device_req.cast<py::tuple>();
    const DLDevice mine = dl_device(t.device());
    if (req[0].cast<int>() != mine.device_type || req[1].cast<int>() != mine.device_id)
      throw py::buffer_error("__dlpack__: exporting to another device than the tensor's is not supported");
  }
  if (!copy.is_none() && copy.cast<bool>())
    throw py::buffer_error("__dlpack__: copy=True is not supported; export tensor.clone() instead");
  sync_for_consumer(t, stream);
  const bool versioned = !max_version.is_none() && max_version.cast<py::tuple>()[0].cast<int>() >= 1;
  if (versioned) {
    DLManagedTensorVersioned* m = make_managed<DLManagedTensorVersioned>(t);
    m->version = {1, 0};
    m->flags = 0;
    return py::reinterpret_steal<py::object>(PyCapsule_New(m, kVersionedName, capsule_destructor<DLManagedTensorVersioned>));
  }
  DLManagedTensor* m = make_managed<DLManagedTensor>(t);
  return py::reinterpret_steal<py::object>(PyCapsule_New(m, kLegacyName, capsule_destructor<DLManagedTensor>));
}

// ---- consuming ------------------------------------------------------------------------------------

// Wraps a DLTensor's memory; release() runs when the last view of the tensor is gone.
Tensor wrap(const DLTensor& dl, std::function<void()> release) {
  const DType dtype = rtx_dtype(dl.dtype);
  const Device device = rtx_device(dl.device);
  Shape shape(dl.shape, dl.shape + dl.ndim), strides;
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
  } else {  // compact row-major
    strides.resize(shape.size());
    int64_t s = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = s;
      s *= shape[d];
    }
  }
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  return from_blob(data, shape, strides, dtype, device, [release](void*) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;  // producers' deleters may release Python objects
    release();
  });
}

Tensor from_capsule(const py::capsule& capsule) {
  if (PyCapsule_IsValid(capsule.ptr(), kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), kVersionedName));
    if (m->version.major > 1)
      throw py::buffer_error("from_dlpack: DLPack version " + std::to_string(m->version.major) +
                             " is newer than the 1.x this library reads");
    Tensor t = wrap(m->dl_tensor, [m] {
      if (m->deleter != nullptr) m->deleter(m);
    });
    PyCapsule_SetName(capsule.ptr(), "used_dltensor_versioned");
    return adopt_foreign(std::move(t), (m->flags & kDLReadOnly) != 0, "from_dlpack", "the DLPack tensor");
  }
  if (PyCapsule_IsValid(capsule.ptr(), kLegacyName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kLegacyName));
    Tensor t = wrap(m->dl_tensor, [m] {
      if (m->deleter != nullptr) m->deleter(m);
    });
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    return adopt_foreign(std::move(t), false, "from_dlpack", "the DLPack tensor");
  }
  throw py::value_error("from_dlpack: the capsule is not an unused DLPack tensor (was it consumed already?)");
}

Tensor from_dlpack(const py::object& obj) {
  if (py::isinstance<py::capsule>(obj)) return from_capsule(obj.cast<py::capsule>());
  if (!py::hasattr(obj, "__dlpack__"))
    throw py::type_error("from_dlpack: " + type_name(obj) + " supports neither __dlpack__ nor is a DLPack capsule");
  py::object stream = py::none();
  if (py::hasattr(obj, "__dlpack_device__")) {
    const py::tuple dev = obj.attr("__dlpack_device__")();
    if (dev[0].cast<int>() == kDLCUDA) {
      const void* h = rtx::cuda::current_stream(dev[1].cast<int>()).handle();
      stream = py::int_(h == nullptr ? 1 : reinterpret_cast<intptr_t>(h));
    }
  }
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(py::arg("stream") = stream, py::arg("max_version") = py::make_tuple(1, 0));
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    capsule = obj.attr("__dlpack__")(py::arg("stream") = stream);  // a producer of the legacy protocol only
  }
  return from_capsule(capsule.cast<py::capsule>());
}

}  // namespace

void bind_dlpack(py::module_& m, TensorClass& cls) {
  cls.def("__dlpack__", &to_dlpack, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none());
  cls.def("__dlpack_device__", [](const Tensor& t) {
    const DLDevice d = dl_device(t.device());
    return py::make_tuple(d.device_type, d.device_id);
  });
  m.def("from_dlpack", &from_dlpack, py::arg("ext_tensor"),
        "A tensor sharing the memory of any DLPack producer (numpy, PyTorch, ...) or capsule; read-only memory is "
        "copied, with a warning.");
}

}  // namespace rtx::python
