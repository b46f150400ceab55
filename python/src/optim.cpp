// The optimizers' update rules for rustytorch.optim: one call per parameter runs the same C++ update
// (rtx::optim::sgd_update / adam_update) as the C++ optimizers. State tensors go in as None or a
// tensor and come back, created on first use, so the Python optimizers keep PyTorch's state layout.
#include <pybind11/stl.h>

#include <optional>
#include <utility>

#include "bindings.h"
#include "rtx/optim.h"

namespace rtx::python {
namespace {

py::object tensor_or_none(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

}  // namespace

void bind_optim(py::module_& m) {
  m.def(
      "_sgd_update",
      [](Tensor& param, const Tensor& grad, const std::optional<Tensor>& momentum_buffer, double lr, double momentum,
         double dampening, double weight_decay, bool nesterov, bool maximize) {
        Tensor buffer = momentum_buffer.value_or(Tensor());
        optim::sgd_update(param, grad, buffer, {lr, momentum, dampening, weight_decay, nesterov, maximize});
        return tensor_or_none(buffer);
      },
      "One SGD step of param in place; returns the momentum buffer (None without momentum).", py::arg("param"),
      py::arg("grad"), py::arg("momentum_buffer"), py::kw_only(), py::arg("lr"), py::arg("momentum"),
      py::arg("dampening"), py::arg("weight_decay"), py::arg("nesterov"), py::arg("maximize"));
  m.def(
      "_adam_update",
      [](Tensor& param, const Tensor& grad, const std::optional<Tensor>& exp_avg,
         const std::optional<Tensor>& exp_avg_sq, const std::optional<Tensor>& max_exp_avg_sq, int64_t step, double lr,
         std::pair<double, double> betas, double eps, double weight_decay, bool decoupled_weight_decay, bool amsgrad,
         bool maximize) {
        Tensor m1 = exp_avg.value_or(Tensor()), m2 = exp_avg_sq.value_or(Tensor());
        Tensor m2_max = max_exp_avg_sq.value_or(Tensor());
        optim::adam_update(param, grad, m1, m2, m2_max, step,
                           {lr, betas, eps, weight_decay, decoupled_weight_decay, amsgrad, maximize});
        return py::make_tuple(m1, m2, tensor_or_none(m2_max));
      },
      "One Adam/AdamW step of param in place (step counts this update); returns (exp_avg, exp_avg_sq, "
      "max_exp_avg_sq), the last None without amsgrad.",
      py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("max_exp_avg_sq"),
      py::arg("step"), py::kw_only(), py::arg("lr"), py::arg("betas"), py::arg("eps"), py::arg("weight_decay"),
      py::arg("decoupled_weight_decay"), py::arg("amsgrad"), py::arg("maximize"));
}

}  // namespace rtx::python
