// rustytorch.dtype (float32, int64, ...) and rustytorch.device ("cpu", "cuda:1", device("cuda", 0)).
// Functions taking a device also take its string (the Device caster of convert.h).
#include <pybind11/operators.h>

#include "bindings.h"

namespace rtx::python {

void bind_types(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype");
  const std::pair<const char*, DType> all[] = {
      {"bool", kBool},         {"uint8", kUInt8},     {"int8", kInt8},       {"int16", kInt16},
      {"int32", kInt32},       {"int64", kInt64},     {"float16", kFloat16}, {"bfloat16", kBFloat16},
      {"float32", kFloat32},   {"float64", kFloat64},
  };
  for (const auto& [name, value] : all) {
    dtype.value(name, value);
    m.attr(name) = value;
  }
  // PyTorch's aliases.
  for (const auto& [alias, value] : {std::pair<const char*, DType>{"float", kFloat32}, {"double", kFloat64},
                                     {"half", kFloat16}, {"long", kInt64}, {"int", kInt32}, {"short", kInt16}}) {
    m.attr(alias) = value;
  }
  // Replaces (rather than overloads) the enum's own repr and str.
  const py::cpp_function repr([](DType t) { return std::string("rustytorch.") + dtype_name(t); }, py::is_method(dtype));
  dtype.attr("__repr__") = repr;
  dtype.attr("__str__") = repr;
  dtype.def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); })
      .def_property_readonly("is_signed", [](DType t) { return t != kBool && t != kUInt8; })
      .def_property_readonly("itemsize", [](DType t) { return element_size(t); });
  m.def("promote_types", &promote_types, py::arg("type1"), py::arg("type2"));

  py::class_<Device>(m, "device")
      .def(py::init<const std::string&>(), py::arg("type"))
      .def(py::init([](const std::string& type, std::optional<int> index) {
             Device d(type);
             if (!d.is_cuda() && index && *index != 0) throw py::value_error("device: the CPU has only index 0");
             return index ? Device(d.type, *index) : d;
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](const Device& d) { return std::string(device_type_name(d.type)); })
      .def_property_readonly("index",
                             [](const Device& d) -> py::object { return d.is_cuda() ? py::object(py::int_(d.index)) : py::object(py::none()); })
      .def("__str__", &Device::str)
      .def("__repr__",
           [](const Device& d) {
             return d.is_cuda() ? "device(type='cuda', index=" + std::to_string(d.index) + ")"
                                : std::string("device(type='cpu')");
           })
      .def(py::self == py::self)
      .def(py::self != py::self)
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1024 + d.index; });
}

}  // namespace rtx::python
