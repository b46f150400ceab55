// The C++ operations the Python nn package is built on, so that both languages share one
// implementation: converting a module's tensors in place (Module.to/cuda/float/half/...), the
// check-then-copy of load_state_dict, and gradient clipping.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.h"

namespace rtx::python {
namespace {

// Every tensor of an iterable (a list, a generator such as module.parameters(), or one tensor).
TensorList tensor_list(const py::handle& tensors, const char* op) {
  if (py::isinstance<Tensor>(tensors)) return {tensors.cast<Tensor>()};
  TensorList out;
  for (const py::handle item : py::iter(tensors)) {
    if (!py::isinstance<Tensor>(item))
      throw py::type_error(std::string(op) + "(): expected tensors, got an element of type " +
                           std::string(py::str(item.get_type().attr("__name__"))));
    out.push_back(item.cast<Tensor>());
  }
  return out;
}

// A mapping of str -> tensor as a TensorDict, in the mapping's order; entries whose value is not a
// tensor are skipped (PyTorch state dicts may carry extra state objects).
nn::TensorDict tensor_dict(const py::handle& mapping) {
  nn::TensorDict out;
  for (const py::handle key : py::iter(mapping)) {
    const py::object value = mapping[key];
    if (!py::isinstance<py::str>(key))
      throw py::type_error("load_state_dict(): keys must be strings, got " +
                           std::string(py::str(key.get_type().attr("__name__"))));
    if (py::isinstance<Tensor>(value)) out.insert(key.cast<std::string>(), value.cast<Tensor>());
  }
  return out;
}

}  // namespace

void bind_nn(py::module_& m) {
  m.def(
      "_convert_in_place",
      [](const py::handle& tensors, std::optional<Device> device, std::optional<DType> dtype, bool non_blocking) {
        const TensorList list = tensor_list(tensors, "to");
        nn::convert_in_place(list, device, dtype, non_blocking);
      },
      "rtx::nn::convert_in_place: converts each distinct tensor once, keeping every handle to it valid.",
      py::arg("tensors"), py::arg("device"), py::arg("dtype"), py::arg("non_blocking") = false);
  m.def(
      "_load_into",
      [](const py::handle& own, const py::handle& state, bool strict, const std::string& owner) {
        const nn::LoadStateDictResult r = nn::load_into(tensor_dict(own), tensor_dict(state), strict, owner);
        return py::make_tuple(r.missing_keys, r.unexpected_keys);
      },
      "rtx::nn::load_into: checks every key and shape, then copies; returns (missing_keys, unexpected_keys).",
      py::arg("own"), py::arg("state"), py::arg("strict"), py::arg("owner"));
  m.def(
      "_clip_grad_norm_",
      [](const py::handle& parameters, double max_norm, double norm_type, bool error_if_nonfinite) {
        return nn::utils::clip_grad_norm_(tensor_list(parameters, "clip_grad_norm_"), max_norm, norm_type,
                                          error_if_nonfinite);
      },
      py::arg("parameters"), py::arg("max_norm"), py::arg("norm_type") = 2.0, py::arg("error_if_nonfinite") = false);
  m.def(
      "_clip_grad_value_",
      [](const py::handle& parameters, double clip_value) {
        nn::utils::clip_grad_value_(tensor_list(parameters, "clip_grad_value_"), clip_value);
      },
      py::arg("parameters"), py::arg("clip_value"));
}

}  // namespace rtx::python
