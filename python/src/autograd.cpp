// Autograd for Python: grad mode, the engine entry points, custom functions whose forward and
// backward are Python callables, gradient checkpointing and anomaly mode. The context managers and
// the Function class live in python/rustytorch/autograd.py on top of these.
#include <pybind11/functional.h>

#include "bindings.h"

namespace rtx::python {
namespace {

// A TensorList from a Python tensor or sequence of tensors (None entries become undefined tensors).
TensorList tensor_list(const py::object& obj) {
  TensorList list;
  if (py::isinstance<Tensor>(obj)) return {obj.cast<Tensor>()};
  for (py::handle item : obj) list.push_back(item.is_none() ? Tensor() : item.cast<Tensor>());
  return list;
}

py::tuple optional_tensors(const TensorList& list) {
  py::tuple out(list.size());
  for (size_t i = 0; i < list.size(); ++i) out[i] = list[i].defined() ? py::cast(list[i]) : py::none();
  return out;
}

}  // namespace

void bind_autograd(py::module_& m, TensorClass& cls) {
  (void)cls;
  m.def("is_grad_enabled", &rtx::is_grad_enabled);
  m.def("_set_grad_enabled", &rtx::set_grad_enabled, py::arg("mode"));
  m.def("is_anomaly_enabled", &rtx::autograd::is_anomaly_enabled);

  py::class_<autograd::DetectAnomalyGuard>(m, "_DetectAnomalyGuard").def(py::init<>());

  m.def(
      "_backward",
      [](const py::object& tensors, const py::object& grads, bool retain_graph, bool create_graph) {
        autograd::backward(tensor_list(tensors), grads.is_none() ? TensorList{} : tensor_list(grads), retain_graph,
                           create_graph);
      },
      py::arg("tensors"), py::arg("grad_tensors"), py::arg("retain_graph"), py::arg("create_graph"));
  m.def(
      "_grad",
      [](const py::object& outputs, const py::object& inputs, const py::object& grad_outputs,
         std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
        return optional_tensors(autograd::grad(tensor_list(outputs), tensor_list(inputs),
                                               grad_outputs.is_none() ? TensorList{} : tensor_list(grad_outputs),
                                               retain_graph, create_graph, allow_unused));
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs"), py::arg("retain_graph"),
      py::arg("create_graph"), py::arg("allow_unused"));

  // The context a custom function's forward and backward share.
  py::class_<autograd::FunctionCtx>(m, "_FunctionCtx")
      .def("save_for_backward", [](autograd::FunctionCtx& ctx, const py::args& tensors) {
        ctx.save_for_backward(tensor_list(tensors));
      })
      .def_property_readonly("saved_tensors",
                             [](const autograd::FunctionCtx& ctx) { return optional_tensors(ctx.saved_tensors()); })
      .def("needs_input_grad", &autograd::FunctionCtx::needs_input_grad, py::arg("index"));

  // forward(ctx, inputs) -> tensors and backward(ctx, grads) -> one gradient (or None) per input,
  // both Python callables; the Python Function class keeps its own state on the Python ctx object.
  m.def(
      "_apply_function",
      [](const std::string& name, const py::object& inputs, const py::function& forward, const py::function& backward) {
        const auto fwd = [forward](autograd::FunctionCtx& ctx, const TensorList& in) {
          py::gil_scoped_acquire gil;
          return tensor_list(forward(py::cast(&ctx, py::return_value_policy::reference), in));
        };
        const auto bwd = [backward](autograd::FunctionCtx& ctx, const TensorList& grads) {
          py::gil_scoped_acquire gil;
          return tensor_list(backward(py::cast(&ctx, py::return_value_policy::reference), optional_tensors(grads)));
        };
        return autograd::apply_function(name, tensor_list(inputs), fwd, bwd);
      },
      py::arg("name"), py::arg("inputs"), py::arg("forward"), py::arg("backward"));

  m.def(
      "_checkpoint",
      [](const py::function& fn, const py::object& inputs) {
        return autograd::checkpoint(
            [fn](const TensorList& in) {
              py::gil_scoped_acquire gil;
              return tensor_list(fn(*py::cast(in)));
            },
            tensor_list(inputs));
      },
      py::arg("function"), py::arg("inputs"));
}

}  // namespace rtx::python
