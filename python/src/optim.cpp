// The optimizers' update rules for rustytorch.optim: the C++ multi-tensor updates
// (rtx::optim::sgd_update_multi / adam_update_multi) that the C++ optimizers run too, called with a
// parameter group at once (foreach / fused) or with one parameter at a time. State tensors go in as
// None or a tensor and come back, created on first use, so the Python optimizers keep PyTorch's
// state layout.
#include <pybind11/stl.h>

#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "rtx/optim.h"

namespace rtx::python {
namespace {

using OptionalTensors = std::vector<std::optional<Tensor>>;
using Lr = std::variant<double, Tensor>;

TensorList tensors(const OptionalTensors& list) {
  TensorList out;
  out.reserve(list.size());
  for (const auto& t : list) out.push_back(t.value_or(Tensor()));
  return out;
}

py::list to_python(const TensorList& list) {
  py::list out;
  for (const Tensor& t : list) out.append(t.defined() ? py::cast(t) : py::none());
  return out;
}

// The learning rate as the options' value, or as a tensor the kernels read.
double host_lr(const Lr& lr) { return std::holds_alternative<double>(lr) ? std::get<double>(lr) : 0.0; }

optim::DeviceScalars device_scalars(const Lr& lr, const std::optional<Tensor>& grad_scale,
                                    const std::optional<Tensor>& found_inf) {
  return {std::holds_alternative<Tensor>(lr) ? std::get<Tensor>(lr) : Tensor(), grad_scale.value_or(Tensor()),
          found_inf.value_or(Tensor())};
}

}  // namespace

void bind_optim(py::module_& m) {
  m.def(
      "_sgd_update_multi",
      [](const TensorList& params, const TensorList& grads, const OptionalTensors& momentum_buffers,
         const OptionalTensors& master_params, const Lr& lr, double momentum, double dampening, double weight_decay,
         bool nesterov, bool maximize, bool master_weights, const std::optional<Tensor>& grad_scale,
         const std::optional<Tensor>& found_inf) {
        TensorList buffers = tensors(momentum_buffers), masters = tensors(master_params);
        optim::sgd_update_multi(params, grads, buffers, masters,
                                {host_lr(lr), momentum, dampening, weight_decay, nesterov, maximize, master_weights},
                                device_scalars(lr, grad_scale, found_inf));
        return py::make_tuple(to_python(buffers), to_python(masters));
      },
      "One SGD step of every parameter in place; returns (momentum_buffers, master_params), None where "
      "there is none.",
      py::arg("params"), py::arg("grads"), py::arg("momentum_buffers"), py::arg("master_params"), py::kw_only(),
      py::arg("lr"), py::arg("momentum"), py::arg("dampening"), py::arg("weight_decay"), py::arg("nesterov"),
      py::arg("maximize"), py::arg("master_weights"), py::arg("grad_scale") = py::none(),
      py::arg("found_inf") = py::none());
  m.def(
      "_adam_update_multi",
      [](const TensorList& params, const TensorList& grads, const OptionalTensors& exp_avgs,
         const OptionalTensors& exp_avg_sqs, const OptionalTensors& max_exp_avg_sqs,
         const OptionalTensors& master_params, const py::list& steps, bool capturable, const Lr& lr,
         std::pair<double, double> betas, double eps, double weight_decay, bool decoupled_weight_decay, bool amsgrad,
         bool maximize, bool master_weights, const std::optional<Tensor>& grad_scale,
         const std::optional<Tensor>& found_inf) {
        TensorList m1 = tensors(exp_avgs), m2 = tensors(exp_avg_sqs), m2_max = tensors(max_exp_avg_sqs);
        TensorList masters = tensors(master_params);
        const optim::AdamOptions options{host_lr(lr),           betas,   eps,      weight_decay,
                                         decoupled_weight_decay, amsgrad, maximize, master_weights};
        const optim::DeviceScalars scalars = device_scalars(lr, grad_scale, found_inf);
        py::object new_steps;
        if (capturable) {
          TensorList counts = tensors(steps.cast<OptionalTensors>());
          optim::adam_update_multi(params, grads, m1, m2, m2_max, masters, counts, options, scalars);
          new_steps = to_python(counts);
        } else {
          auto counts = steps.cast<std::vector<int64_t>>();
          optim::adam_update_multi(params, grads, m1, m2, m2_max, masters, counts, options, scalars);
          new_steps = py::cast(counts);
        }
        return py::make_tuple(to_python(m1), to_python(m2), to_python(m2_max), to_python(masters), new_steps);
      },
      "One Adam/AdamW step of every parameter in place. steps are the updates so far: ints, or with "
      "capturable 1-element float32 tensors (None: new) that the kernels increment. Returns (exp_avgs, "
      "exp_avg_sqs, max_exp_avg_sqs, master_params, steps), None where there is none.",
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("max_exp_avg_sqs"),
      py::arg("master_params"), py::arg("steps"), py::kw_only(), py::arg("capturable"), py::arg("lr"),
      py::arg("betas"), py::arg("eps"), py::arg("weight_decay"), py::arg("decoupled_weight_decay"),
      py::arg("amsgrad"), py::arg("maximize"), py::arg("master_weights"), py::arg("grad_scale") = py::none(),
      py::arg("found_inf") = py::none());
}

}  // namespace rtx::python
