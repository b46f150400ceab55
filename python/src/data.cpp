// rustytorch._C.read_idx, the library's IDX dataset reader, and _write_atomically, the atomic file
// writes (rtx::data::AtomicFile) that rustytorch.io.write_atomically and the savers use.
#include "bindings.h"
#include "paths.h"
#include "rtx/data.h"

namespace rtx::python {

void bind_data(py::module_& m) {
  m.def(
      "read_idx",
      [](const py::handle& path) {
        const std::string file = filesystem_path(path);
        py::gil_scoped_release release;
        return data::read_idx(file);
      },
      py::arg("path"), "Reads an IDX file (plain or gzip-compressed; a str, bytes or os.PathLike path) into a CPU tensor.");
  m.def(
      "_write_atomically",
      [](const py::handle& path, const std::string& op, const py::function& write) {
        data::AtomicFile file(filesystem_path(path), op);
        write(file.fd());  // an exception propagates, and the temporary file is removed
        py::gil_scoped_release release;
        file.commit();
      },
      py::arg("path"), py::arg("op"), py::arg("write"),
      "Calls write(fd) on a locked temporary file beside path, then syncs it and renames it over path; "
      "errors are raised as '[op] path: ...'.");
}

}  // namespace rtx::python
