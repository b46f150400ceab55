// Autocast for Python: the per-thread state (is_autocast_enabled, get_autocast_dtype, ...), regions
// holding an rtx::AutocastGuard (rustytorch.autocast enters and exits them), and the casts of the
// C++ rules applied to the arguments of Python composites (rustytorch._autocast_rule).
#include <memory>
#include <optional>

#include "bindings.h"

namespace rtx::python {
namespace {

DeviceType autocast_device(const std::string& device_type) {
  if (device_type == "cuda") return kCUDA;
  if (device_type == "cpu") return kCPU;
  throw ValueError("[autocast] device_type must be 'cuda' or 'cpu', got '" + device_type +
                   "' (a device type, without an index)");
}

// An open region: the guard lives until exit() (or the object's end).
class AutocastRegion {
 public:
  AutocastRegion(const std::string& device_type, DType dtype, bool enabled, bool cache_enabled)
      : guard_(std::make_unique<AutocastGuard>(autocast_device(device_type), dtype, enabled, cache_enabled)) {}
  void exit() { guard_.reset(); }

 private:
  std::unique_ptr<AutocastGuard> guard_;
};

autocast::Rule parse_rule(const std::string& rule) {
  if (rule == "lower") return autocast::Rule::lower;
  if (rule == "fp32") return autocast::Rule::fp32;
  throw ValueError("[autocast] unknown cast rule '" + rule + "' (lower or fp32)");
}

// The device type of the first tensor in args (top level or inside lists and tuples).
std::optional<DeviceType> first_device(const py::handle& value) {
  if (py::isinstance<Tensor>(value)) {
    const Tensor& t = value.cast<const Tensor&>();
    if (t.defined()) return t.device().type;
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (const py::handle item : value)
      if (auto d = first_device(item)) return d;
  }
  return std::nullopt;
}

py::object cast_value(const py::handle& value, DType dtype, DeviceType d) {
  if (py::isinstance<Tensor>(value)) return py::cast(autocast::cast(value.cast<const Tensor&>(), dtype, d));
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    py::list out;
    for (const py::handle item : value) out.append(cast_value(item, dtype, d));
    return py::isinstance<py::tuple>(value) ? py::object(py::tuple(out)) : py::object(out);
  }
  return py::reinterpret_borrow<py::object>(value);
}

// fn(*args, **kwargs) under rule: the tensors among the arguments cast, autocast excluded inside.
py::object call_with_rule(const std::string& rule, const py::function& fn, const py::tuple& args,
                          const py::dict& kwargs) {
  std::optional<DeviceType> device = first_device(args);
  for (const auto item : kwargs)
    if (!device) device = first_device(item.second);
  const std::optional<DType> dtype = device ? autocast::target(parse_rule(rule), *device) : std::nullopt;
  if (!dtype) return fn(*args, **kwargs);
  py::tuple cast_args = cast_value(args, *dtype, *device);
  py::dict cast_kwargs;
  for (const auto item : kwargs) cast_kwargs[item.first] = cast_value(item.second, *dtype, *device);
  autocast::ExcludeGuard excluded;
  return fn(*cast_args, **cast_kwargs);
}

}  // namespace

void bind_autocast(py::module_& m) {
  m.def(
      "is_autocast_enabled", [](const std::string& device_type) { return is_autocast_enabled(autocast_device(device_type)); },
      py::arg("device_type") = "cuda");
  m.def(
      "get_autocast_dtype", [](const std::string& device_type) { return get_autocast_dtype(autocast_device(device_type)); },
      py::arg("device_type"));
  m.def("is_autocast_cache_enabled", &is_autocast_cache_enabled);
  m.def("clear_autocast_cache", &clear_autocast_cache);
  py::class_<AutocastRegion>(m, "_AutocastRegion")
      .def(py::init<const std::string&, DType, bool, bool>(), py::arg("device_type"), py::arg("dtype"),
           py::arg("enabled"), py::arg("cache_enabled"))
      .def("exit", &AutocastRegion::exit);
  m.def("_autocast_active", &autocast::active);
  m.def("_autocast_call", &call_with_rule, py::arg("rule"), py::arg("fn"), py::arg("args"), py::arg("kwargs"));
  m.def("_autocast_stats", [] {
    const autocast::Stats s = autocast::stats();
    return py::dict(py::arg("casts") = s.casts, py::arg("cached") = s.cached);
  });
}

}  // namespace rtx::python
