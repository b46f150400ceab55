// rustytorch._C.read_idx: the library's IDX dataset reader.
#include "bindings.h"
#include "rtx/data.h"

namespace rtx::python {

void bind_data(py::module_& m) {
  m.def("read_idx", &rtx::data::read_idx, py::arg("path"), py::call_guard<py::gil_scoped_release>(),
        "Reads an IDX file (plain or gzip-compressed) into a CPU tensor.");
}

}  // namespace rtx::python
