// The loss-scaling ops (rtx/amp.h) under PyTorch's names, which rustytorch re-exports:
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_.
#include <pybind11/stl.h>

#include "bindings.h"
#include "rtx/amp.h"

namespace rtx::python {

void bind_amp(py::module_& m) {
  m.def(
      "_amp_foreach_non_finite_check_and_unscale_",
      [](const TensorList& grads, Tensor& found_inf, const Tensor& inv_scale) {
        amp::non_finite_check_and_unscale_(grads, found_inf, inv_scale);
      },
      "Multiplies every gradient by inv_scale in place; sets found_inf to 1.0 if any element is inf or NaN.",
      py::arg("self"), py::arg("found_inf"), py::arg("inv_scale"));
  m.def(
      "_amp_update_scale_",
      [](Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor, double backoff_factor,
         int64_t growth_interval) {
        amp::update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval);
        return scale;
      },
      "Updates the loss scale and its growth tracker in place from found_inf; returns the scale.", py::arg("self"),
      py::arg("growth_tracker"), py::arg("found_inf"), py::arg("scale_growth_factor"),
      py::arg("scale_backoff_factor"), py::arg("growth_interval"));
}

}  // namespace rtx::python
