// rustytorch._C._distributed's data-parallel part: the Reducer that DistributedDataParallel drives,
// and the coalesced broadcast and shape check of its replicas. Blocking calls release the GIL.
#include <pybind11/stl.h>

#include "bindings.h"
#include "rtx/data_parallel.h"

namespace rtx::python {

void bind_data_parallel(py::module_& m) {
  py::module_ d = m.attr("_distributed").cast<py::module_>();
  using Release = py::call_guard<py::gil_scoped_release>;

  py::class_<dist::Reducer>(d, "Reducer",
                            "Averages the gradients of parameters across a group while backward runs (see "
                            "include/rtx/data_parallel.h).")
      .def(py::init([](std::vector<Tensor> params, std::shared_ptr<dist::ProcessGroup> group, size_t bucket_cap_bytes,
                       size_t first_bucket_bytes, bool find_unused_parameters, bool gradient_as_bucket_view,
                       std::vector<std::string> names) {
             dist::ReducerOptions o;
             o.bucket_cap_bytes = bucket_cap_bytes;
             o.first_bucket_bytes = first_bucket_bytes;
             o.find_unused_parameters = find_unused_parameters;
             o.gradient_as_bucket_view = gradient_as_bucket_view;
             return std::make_unique<dist::Reducer>(std::move(params), std::move(group), o, std::move(names));
           }),
           py::arg("parameters"), py::arg("group"), py::arg("bucket_cap_bytes"), py::arg("first_bucket_bytes"),
           py::arg("find_unused_parameters"), py::arg("gradient_as_bucket_view"), py::arg("names"))
      .def("prepare_for_backward", &dist::Reducer::prepare_for_backward, py::arg("outputs"))
      .def("bucket_indices", &dist::Reducer::bucket_indices);

  d.def(
      "broadcast_coalesced",
      [](dist::ProcessGroup& group, const std::vector<Tensor>& tensors, size_t buffer_bytes, int src) {
        dist::broadcast_coalesced(group, tensors, buffer_bytes, src);
      },
      py::arg("group"), py::arg("tensors"), py::arg("buffer_bytes"), py::arg("src") = 0, Release());
  d.def("verify_same_shapes", &dist::verify_same_shapes, py::arg("group"), py::arg("tensors"), py::arg("what"),
        Release());
}

}  // namespace rtx::python
