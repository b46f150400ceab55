// The pieces of the rustytorch._C module, one per file, and the helper that binds an op both as a
// module function (first argument `input`) and as a Tensor method.
#pragma once

#include <pybind11/pybind11.h>

#include "convert.h"
#include "rtx/rtx.h"

namespace rtx::python {

namespace py = pybind11;
using TensorClass = py::class_<Tensor>;

void bind_errors(py::module_& m);
void bind_types(py::module_& m);
void bind_tensor(py::module_& m, TensorClass& cls);
void bind_ops(py::module_& m, TensorClass& cls);
void bind_composite_ops(py::module_& m, TensorClass& cls);  // called by bind_ops
void bind_numpy(py::module_& m, TensorClass& cls);
void bind_dlpack(py::module_& m, TensorClass& cls);
void bind_autograd(py::module_& m, TensorClass& cls);
void bind_autocast(py::module_& m);
void bind_cuda(py::module_& m);
void bind_nn(py::module_& m);
void bind_optim(py::module_& m);
void bind_amp(py::module_& m);
void bind_text(py::module_& m);
void bind_data(py::module_& m);
void bind_distributed(py::module_& m);
void bind_data_parallel(py::module_& m);  // after bind_distributed: it extends _distributed

// (values, indices) as the namedtuple type rustytorch._C.ValuesIndices.
py::object values_indices(const ValuesIndices& r);

template <typename F, typename... Extra>
void def_op(py::module_& m, TensorClass& cls, const char* name, F&& f, const Extra&... extra) {
  m.def(name, f, py::arg("input"), extra...);
  cls.def(name, std::forward<F>(f), extra...);
}

}  // namespace rtx::python
