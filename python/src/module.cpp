// rustytorch._C: the library's types, ops and runtime for Python. The pure-Python package
// (python/rustytorch) builds the PyTorch-shaped API on top of it.
#include "bindings.h"

namespace rtx::python {

namespace {
// rustytorch._C.ValuesIndices, set when the module is made (a function-local static importing the
// module could release the GIL inside its guard, deadlocking threads that meet there first).
PyObject* g_values_indices = nullptr;
}  // namespace

py::object values_indices(const ValuesIndices& r) { return py::handle(g_values_indices)(r.values, r.indices); }

}  // namespace rtx::python

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  using namespace rtx::python;
  m.doc() = "rustytorch's compiled core: tensors, ops, autograd and the CUDA runtime";
  py::object values_indices_type =
      py::module_::import("collections").attr("namedtuple")("ValuesIndices", py::make_tuple("values", "indices"));
  m.attr("ValuesIndices") = values_indices_type;
  g_values_indices = values_indices_type.release().ptr();
  bind_errors(m);
  bind_types(m);
  TensorClass cls(m, "Tensor");
  bind_tensor(m, cls);
  bind_ops(m, cls);
  bind_numpy(m, cls);
  bind_dlpack(m, cls);
  bind_autograd(m, cls);
  bind_autocast(m);
  bind_cuda(m);
  bind_nn(m);
  bind_optim(m);
  bind_amp(m);
  bind_text(m);
  bind_data(m);
  bind_distributed(m);
  bind_data_parallel(m);
  m.attr("__version__") = rtx::version();
  m.def("built_with_cuda", &rtx::built_with_cuda);
  m.attr("_built_with_cudnn") = py::bool_(RTX_WITH_CUDNN != 0);
  m.def("_cuda_version", &rtx::cuda_version);
  m.def("_cudnn_version", &rtx::cudnn_version);
  m.def("set_num_threads", &rtx::set_num_threads, py::arg("n"));
  m.def("get_num_threads", &rtx::get_num_threads);
  m.def("set_flush_denormal", &rtx::set_flush_denormal, py::arg("mode"));
  m.def("use_deterministic_algorithms", &rtx::use_deterministic_algorithms, py::arg("mode"));
  m.def("are_deterministic_algorithms_enabled", &rtx::are_deterministic_algorithms_enabled);
  m.def("set_float32_matmul_precision", &rtx::set_float32_matmul_precision, py::arg("precision"));
  m.def("get_float32_matmul_precision", &rtx::get_float32_matmul_precision);
  refuse_uninitialised_instances();
}
