// rustytorch._C._distributed: rtx::dist for Python — the stores, ReduceOp, Work, ProcessGroup and the
// default group. Every call that can block (store requests, collectives, waits, rendezvous) releases
// the GIL. rustytorch.distributed builds PyTorch's torch.distributed API on top of it.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "rtx/distributed.h"

namespace rtx::python {

namespace {

using dist::Timeout;
using Release = py::call_guard<py::gil_scoped_release>;

// A store value from str or bytes.
std::vector<uint8_t> store_value(const py::handle& v) {
  std::string s;
  if (py::isinstance<py::str>(v)) {
    s = v.cast<std::string>();
  } else if (py::isinstance<py::bytes>(v) || py::isinstance<py::bytearray>(v)) {
    s = py::bytes(py::reinterpret_borrow<py::object>(v)).cast<std::string>();
  } else {
    throw py::type_error("Store.set: value must be str or bytes, got " +
                         std::string(py::str(py::type::of(v).attr("__name__"))));
  }
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

void bind_distributed(py::module_& m) {
  py::module_ d = m.def_submodule("_distributed", "rtx::dist: stores, process groups and collectives");

  py::class_<dist::Store, std::shared_ptr<dist::Store>>(d, "Store",
                                                      "A key-value store: the rendezvous of process groups.")
      .def(
          "set",
          [](dist::Store& s, const std::string& key, const py::handle& value) {
            auto v = store_value(value);
            py::gil_scoped_release release;
            s.set(key, v);
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](dist::Store& s, const std::string& key) {
            std::vector<uint8_t> v;
            {
              py::gil_scoped_release release;
              v = s.get(key);
            }
            return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
          },
          py::arg("key"))
      .def("add", &dist::Store::add, py::arg("key"), py::arg("amount"), Release())
      .def("check", &dist::Store::check, py::arg("keys"), Release())
      .def(
          "wait",
          [](dist::Store& s, const std::vector<std::string>& keys, std::optional<Timeout> timeout) {
            s.wait(keys, timeout.value_or(s.timeout()));
          },
          py::arg("keys"), py::arg("timeout") = py::none(), Release())
      .def("delete_key", &dist::Store::delete_key, py::arg("key"), Release())
      .def("num_keys", &dist::Store::num_keys, Release())
      .def("set_timeout", &dist::Store::set_timeout, py::arg("timeout"))
      .def_property_readonly("timeout", &dist::Store::timeout);

  py::class_<dist::TCPStore, dist::Store, std::shared_ptr<dist::TCPStore>>(d, "TCPStore",
                                                                           "A store served over TCP by the master.")
      .def(py::init<const std::string&, int, std::optional<int>, bool, Timeout>(), py::arg("host_name"),
           py::arg("port"), py::arg("world_size") = py::none(), py::arg("is_master") = false,
           py::arg("timeout") = Timeout(std::chrono::minutes(5)), Release())
      .def_property_readonly("host", &dist::TCPStore::host)
      .def_property_readonly("port", &dist::TCPStore::port)
      .def_property_readonly("world_size", &dist::TCPStore::world_size);

  py::class_<dist::PrefixStore, dist::Store, std::shared_ptr<dist::PrefixStore>>(
      d, "PrefixStore", "Every key of another store under 'prefix/'.")
      .def(py::init<std::string, std::shared_ptr<dist::Store>>(), py::arg("prefix"), py::arg("store"))
      .def_property_readonly("underlying_store", &dist::PrefixStore::underlying_store);

  py::enum_<dist::ReduceOp>(d, "ReduceOp", "The reductions of all_reduce, reduce and reduce_scatter.")
      .value("SUM", dist::ReduceOp::Sum)
      .value("AVG", dist::ReduceOp::Avg)
      .value("PRODUCT", dist::ReduceOp::Product)
      .value("MIN", dist::ReduceOp::Min)
      .value("MAX", dist::ReduceOp::Max);

  py::class_<dist::Work, std::shared_ptr<dist::Work>>(d, "Work", "The handle of an asynchronous distributed operation.")
      .def("wait", &dist::Work::wait, py::arg("timeout") = py::none(), Release(),
           "Blocks until the operation is done and raises its error; True.")
      .def("is_completed", &dist::Work::is_completed)
      .def("is_success", &dist::Work::is_success)
      .def("result", &dist::Work::result);

  py::class_<dist::ProcessGroup, std::shared_ptr<dist::ProcessGroup>>(d, "ProcessGroup",
                                                                      "A group of ranks and its collectives.")
      .def("rank", &dist::ProcessGroup::rank)
      .def("size", &dist::ProcessGroup::size)
      .def("name", &dist::ProcessGroup::backend_name)
      .def_property_readonly("timeout", &dist::ProcessGroup::timeout)
      .def_property_readonly("ranks", &dist::ProcessGroup::ranks)
      .def("group_rank", [](const dist::ProcessGroup& g, int world_rank, const std::string& what) {
        return g.group_rank(world_rank, what.c_str());
      })
      .def("all_reduce", &dist::ProcessGroup::all_reduce, Release())
      .def("broadcast", &dist::ProcessGroup::broadcast, Release())
      .def("reduce", &dist::ProcessGroup::reduce, Release())
      .def("all_gather", &dist::ProcessGroup::all_gather, Release())
      .def("all_gather_into_tensor", &dist::ProcessGroup::all_gather_into_tensor, Release())
      .def("reduce_scatter_tensor", &dist::ProcessGroup::reduce_scatter_tensor, Release())
      .def("all_to_all_single", &dist::ProcessGroup::all_to_all_single, Release())
      .def("send", &dist::ProcessGroup::send, Release())
      .def("recv", &dist::ProcessGroup::recv, Release())
      .def("barrier", &dist::ProcessGroup::barrier, Release());

  d.def(
      "init_process_group",
      [](const std::string& backend, const std::string& init_method, int rank, int world_size, Timeout timeout,
         std::shared_ptr<dist::Store> store) {
        dist::InitOptions o;
        o.backend = backend;
        o.init_method = init_method;
        o.rank = rank;
        o.world_size = world_size;
        o.timeout = timeout;
        o.store = std::move(store);
        dist::init_process_group(o);
      },
      py::arg("backend"), py::arg("init_method"), py::arg("rank"), py::arg("world_size"), py::arg("timeout"),
      py::arg("store"), Release());
  d.def("destroy_process_group", &dist::destroy_process_group, Release());
  d.def("is_initialized", &dist::is_initialized);
  d.def("default_group", &dist::default_group);
  d.def("default_store", &dist::default_store);
  d.def("new_group", &dist::new_group, py::arg("ranks"), py::arg("timeout"), py::arg("backend"), Release());
  d.def("is_gloo_available", &dist::is_gloo_available);
  d.def("is_nccl_available", &dist::is_nccl_available);
}

}  // namespace rtx::python
