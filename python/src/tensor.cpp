// The Tensor class: metadata, conversions between dtypes and devices, views, copies, autograd
// attributes, repr, Python's number protocol and the arithmetic and comparison operators.
#include <pybind11/functional.h>

#include <cctype>
#include <unordered_map>

#include "bindings.h"

namespace rtx::python {
namespace {

// PyTorch's name of the backward node of an op: each word of the op capitalized, as is a letter after
// a digit, and "Backward0" ("mul" -> "MulBackward0", "log1p" -> "Log1PBackward0"); an in-place op is
// named as its out-of-place form, ops that PyTorch records as another op as PyTorch names them, and a
// custom Function (its node is named by its class) "<Class>Backward".
std::string pytorch_node_name(std::string op) {
  static const std::unordered_map<std::string, std::string> renamed = {
      {"to", "ToCopyBackward0"},
      {"copy_", "CopyBackwards"},
      {"square", "PowBackward0"},
      {"cross_entropy", "NllLossBackward0"},
      {"layer_norm", "NativeLayerNormBackward0"},
      {"batch_norm", "NativeBatchNormBackward0"},
      {"conv2d", "ConvolutionBackward0"},
      {"max_pool2d", "MaxPool2DWithIndicesBackward0"},
  };
  if (const auto it = renamed.find(op); it != renamed.end()) return it->second;
  if (!op.empty() && std::isupper(static_cast<unsigned char>(op[0]))) return op + "Backward";
  if (op.size() > 1 && op.back() == '_') op.pop_back();
  std::string name;
  bool capitalize = true;
  for (const char c : op) {
    if (c == '_') {
      capitalize = true;
      continue;
    }
    name += capitalize ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    capitalize = std::isdigit(static_cast<unsigned char>(c)) != 0;
  }
  return name + "Backward0";
}

// PyTorch's legacy tensor type names ("Float" of "FloatTensor") by dtype.
const char* legacy_type_name(DType t) {
  switch (t) {
    case kBool: return "Bool";
    case kUInt8: return "Byte";
    case kInt8: return "Char";
    case kInt16: return "Short";
    case kInt32: return "Int";
    case kInt64: return "Long";
    case kFloat16: return "Half";
    case kBFloat16: return "BFloat16";
    case kFloat32: return "Float";
    case kFloat64: return "Double";
  }
  return "";
}

// x.type(): "rustytorch.FloatTensor", "rustytorch.cuda.LongTensor", ...
std::string type_string(const Tensor& t) {
  return std::string(t.is_cuda() ? "rustytorch.cuda." : "rustytorch.") + legacy_type_name(t.dtype()) + "Tensor";
}

// x.type(name): the tensor converted to the type a name of type_string's form gives ("torch." for
// "rustytorch." is accepted too, as scripts written for PyTorch spell it); a CUDA name keeps a CUDA
// tensor's device and moves any other to the current device.
Tensor to_type_named(const Tensor& t, const std::string& name, bool non_blocking) {
  for (const std::string module : {"rustytorch.", "torch."}) {
    if (name.rfind(module, 0) != 0) continue;
    std::string rest = name.substr(module.size());
    const bool cuda = rest.rfind("cuda.", 0) == 0;
    if (cuda) rest = rest.substr(5);
    for (int i = 0; i < kNumDTypes; ++i) {
      const auto dtype = static_cast<DType>(i);
      if (rest != std::string(legacy_type_name(dtype)) + "Tensor") continue;
      Device device(kCPU);
      if (cuda && t.is_cuda()) device = t.device();
      if (cuda && !t.is_cuda()) device = Device(kCUDA, rtx::cuda::is_available() ? rtx::cuda::current_device() : 0);
      return t.to(device, dtype, non_blocking);
    }
  }
  throw rtx::ValueError("[type] invalid type '" + name + "'; expected a dtype or a name such as " +
                        "'rustytorch.FloatTensor' or 'rustytorch.cuda.LongTensor'");
}

py::tuple to_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

// Tensor.to(...) in PyTorch's forms: to(dtype), to(device[, dtype]), to(other), each with
// non_blocking and copy, positionally or by keyword.
Tensor to_any(const Tensor& self, const py::args& args, const py::kwargs& kwargs) {
  std::optional<Device> device;
  std::optional<DType> dtype;
  bool non_blocking = false, copy = false;
  std::vector<py::handle> flags;
  for (py::handle a : args) {
    if (py::isinstance<DType>(a)) {
      dtype = a.cast<DType>();
    } else if (py::isinstance<Device>(a) || py::isinstance<py::str>(a)) {
      device = a.cast<Device>();
    } else if (py::isinstance<Tensor>(a)) {
      const Tensor& other = a.cast<const Tensor&>();
      device = other.device();
      dtype = other.dtype();
    } else if (PyBool_Check(a.ptr())) {
      flags.push_back(a);
    } else {
      throw py::type_error("to(): unexpected argument of type " + type_name(a) +
                           "; expected a dtype, a device, a tensor, non_blocking or copy");
    }
  }
  if (!flags.empty()) non_blocking = flags[0].cast<bool>();
  if (flags.size() > 1) copy = flags[1].cast<bool>();
  for (auto [key, value] : kwargs) {
    const std::string k = py::str(key);
    if (k == "dtype") {
      if (!value.is_none() && !py::isinstance<DType>(value))
        throw py::type_error("to(): dtype must be a rustytorch.dtype, got " + type_name(value));
      if (!value.is_none()) dtype = value.cast<DType>();
    } else if (k == "device") {
      if (!value.is_none()) device = value.cast<Device>();
    } else if (k == "non_blocking") {
      non_blocking = value.cast<bool>();
    } else if (k == "copy") {
      copy = value.cast<bool>();
    } else if (k != "memory_format") {
      throw py::type_error("to() got an unexpected keyword argument '" + k + "'");
    }
  }
  return self.to(device.value_or(self.device()), dtype.value_or(self.dtype()), non_blocking, copy);
}

// A Python int or float of a one-element tensor, for int(), float() and bool().
Scalar one_value(const Tensor& t, const char* what) {
  if (t.numel() != 1)
    throw py::value_error(std::string("only one-element tensors can be converted to Python ") + what +
                          ", got a tensor of " + std::to_string(t.numel()) + " elements");
  return t.item();
}

}  // namespace

void bind_tensor(py::module_& m, TensorClass& cls) {
  (void)m;
  cls.def(py::init<>())
      // A new tensor sharing t's memory but not its history (what nn.Parameter(t) wraps).
      .def(py::init([](const Tensor& t) { return t.detach(); }), py::arg("data"))
      // ---- metadata ----
      .def_property_readonly("shape", [](const Tensor& t) { return to_size(t.sizes()); })
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> dim) -> py::object {
            if (dim) return py::int_(t.size(*dim));
            return to_size(t.sizes());
          },
          py::arg("dim") = py::none())
      .def(
          "stride",
          [](const Tensor& t, std::optional<int64_t> dim) -> py::object {
            if (dim) return py::int_(t.stride(*dim));
            return to_tuple(t.strides());
          },
          py::arg("dim") = py::none())
      .def("dim", &Tensor::dim)
      .def("ndimension", &Tensor::dim)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("nelement", &Tensor::numel)
      .def("storage_offset", &Tensor::storage_offset)
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("is_cuda", &Tensor::is_cuda)
      .def_property_readonly("is_cpu", &Tensor::is_cpu)
      .def_property_readonly("itemsize", &Tensor::element_size)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("element_size", &Tensor::element_size)
      .def("is_contiguous", [](const Tensor& t) { return t.is_contiguous(); })
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def_property_readonly("_version", &Tensor::version)
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw py::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__repr__",
           [](const Tensor& t) {
             const auto fn = t.defined() ? t.grad_fn() : nullptr;
             return t.str("rustytorch.", fn ? pytorch_node_name(fn->name()) : std::string());
           })
      .def("__hash__", [](const py::object& self) { return reinterpret_cast<intptr_t>(self.ptr()); })
      // ---- values ----
      .def("item", [](const Tensor& t) { return t.item(); })
      .def("__bool__", [](const Tensor& t) { return one_value(t, "bool").to_bool(); })
      .def("__float__", [](const Tensor& t) { return one_value(t, "float").to_double(); })
      .def("__int__", [](const Tensor& t) { return one_value(t, "int").to_int(); })
      .def("__index__",
           [](const Tensor& t) {
             if (is_floating(t.dtype()) || t.numel() != 1)
               throw py::type_error("only integer tensors of a single element can be converted to an index");
             return t.item().to_int();
           })
      // ---- dtype and device ----
      .def("to", &to_any)
      .def("cpu", &Tensor::cpu)
      .def(
          "cuda",
          [](const Tensor& t, std::optional<py::object> device, bool non_blocking) {
            int index = rtx::cuda::is_available() ? rtx::cuda::current_device() : 0;
            if (device && !device->is_none()) {
              if (PyLong_Check(device->ptr())) index = device->cast<int>();
              else index = device->cast<Device>().index;
            }
            return t.cuda(index, non_blocking);
          },
          py::arg("device") = py::none(), py::arg("non_blocking") = false)
      .def("pin_memory", &Tensor::pin_memory)
      .def("is_pinned", &Tensor::is_pinned)
      .def("float", [](const Tensor& t) { return t.to(kFloat32); })
      .def("double", [](const Tensor& t) { return t.to(kFloat64); })
      .def("half", [](const Tensor& t) { return t.to(kFloat16); })
      .def("bfloat16", [](const Tensor& t) { return t.to(kBFloat16); })
      .def("int", [](const Tensor& t) { return t.to(kInt32); })
      .def("long", [](const Tensor& t) { return t.to(kInt64); })
      .def("bool", [](const Tensor& t) { return t.to(kBool); })
      .def("byte", [](const Tensor& t) { return t.to(kUInt8); })
      .def("char", [](const Tensor& t) { return t.to(kInt8); })
      .def("short", [](const Tensor& t) { return t.to(kInt16); })
      .def("type_as", [](const Tensor& t, const Tensor& other) { return t.to(other.dtype()); })
      .def(
          "type",
          [](const Tensor& t, const py::object& dtype, bool non_blocking) -> py::object {
            if (dtype.is_none()) return py::str(type_string(t));
            if (py::isinstance<DType>(dtype)) return py::cast(t.to(dtype.cast<DType>(), non_blocking));
            if (py::isinstance<py::str>(dtype))
              return py::cast(to_type_named(t, dtype.cast<std::string>(), non_blocking));
            throw py::type_error("type(): dtype must be a dtype or a type name such as 'rustytorch.FloatTensor', "
                                 "got " + type_name(dtype));
          },
          py::arg("dtype") = py::none(), py::arg("non_blocking") = false)
      // ---- copies ----
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("copy_", [](Tensor& t, const Tensor& src, bool) -> Tensor& { return t.copy_(src); }, py::arg("src"),
           py::arg("non_blocking") = false)
      .def("fill_", [](Tensor& t, const Scalar& v) -> Tensor& { return t.fill_(v); }, py::arg("value"))
      .def("zero_", &Tensor::zero_)
      // ---- views ----
      .def("view",
           [](const Tensor& t, const py::args& a, const py::kwargs& kw) {
             // view(*shape), view(shape), view(dtype), and the keyword forms view(size=...), view(dtype=...).
             if (a.size() == 0 && kw.size() == 1 && kw.contains("dtype")) return t.view_dtype(kw["dtype"].cast<DType>());
             if (a.size() == 0 && kw.size() == 1 && kw.contains("size")) return t.view(to_shape(kw["size"], "view(): size"));
             if (kw.size() != 0) throw py::type_error("view() takes a shape or a dtype, positionally or as size= or dtype=");
             if (a.size() == 1 && py::isinstance<DType>(a[0])) return t.view_dtype(a[0].cast<DType>());
             return t.view(shape_args(a, "view(): shape"));
           })
      .def("reshape", [](const Tensor& t, const py::args& a) { return t.reshape(shape_args(a, "reshape(): shape")); })
      .def("view_as", [](const Tensor& t, const Tensor& o) { return t.view(o.sizes()); })
      .def("reshape_as", [](const Tensor& t, const Tensor& o) { return t.reshape(o.sizes()); })
      .def("permute", [](const Tensor& t, const py::args& a) { return t.permute(shape_args(a, "permute(): dims")); })
      .def("expand", [](const Tensor& t, const py::args& a) { return t.expand(shape_args(a, "expand(): sizes")); })
      .def("expand_as", &Tensor::expand_as)
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("swapaxes", &Tensor::transpose, py::arg("axis0"), py::arg("axis1"))
      .def("t", &Tensor::t)
      .def_property_readonly("T",
                             [](const Tensor& t) {
                               Shape dims;
                               for (int64_t d = t.dim() - 1; d >= 0; --d) dims.push_back(d);
                               return t.permute(dims);
                             })
      .def_property_readonly("mT", &Tensor::mT)
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"))
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("_slice", &Tensor::slice, py::arg("dim"), py::arg("start"), py::arg("end"), py::arg("step"))
      .def(
          "squeeze",
          [](const Tensor& t, std::optional<int64_t> dim) { return dim ? t.squeeze(*dim) : t.squeeze(); },
          py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def(
          "unflatten",
          [](const Tensor& t, int64_t dim, const py::object& sizes) { return t.unflatten(dim, to_shape(sizes, "unflatten(): sizes")); },
          py::arg("dim"), py::arg("sizes"))
      .def("diagonal", &Tensor::diagonal, py::arg("offset") = 0, py::arg("dim1") = 0, py::arg("dim2") = 1)
      .def(
          "as_strided",
          [](const Tensor& t, const py::object& size, const py::object& stride, std::optional<int64_t> offset) {
            return t.as_strided(to_shape(size, "as_strided(): size"), to_shape(stride, "as_strided(): stride"), offset);
          },
          py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none())
      // ---- autograd ----
      .def_property(
          "requires_grad", &Tensor::requires_grad,
          [](Tensor& t, bool r) { t.requires_grad_(r); })
      .def("requires_grad_", &Tensor::requires_grad_, py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const Tensor& t) -> py::object { return t.grad().defined() ? py::cast(t.grad()) : py::none(); },
          [](Tensor& t, const std::optional<Tensor>& g) { t.set_grad(g.value_or(Tensor())); })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property(
          "data", [](const Tensor& t) { return t.detach(); },
          [](Tensor& t, const Tensor& src) {
            NoGradGuard no_grad;
            Tensor d = t.detach();
            d.copy_(src);
          })
      .def("detach", &Tensor::detach)
      .def("detach_", &Tensor::detach_)
      .def("retain_grad", &Tensor::retain_grad)
      .def_property_readonly("retains_grad", &Tensor::retains_grad)
      .def(
          "backward",
          [](const Tensor& t, const std::optional<Tensor>& gradient, std::optional<bool> retain_graph,
             bool create_graph) {
            t.backward(gradient.value_or(Tensor()), retain_graph.value_or(create_graph), create_graph);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(), py::arg("create_graph") = false)
      .def(
          "_register_hook",
          [](const Tensor& t, const std::function<std::optional<Tensor>(const Tensor&)>& fn) {
            return t.register_hook([fn](const Tensor& g) {
              py::gil_scoped_acquire gil;
              return fn(g).value_or(Tensor());
            });
          },
          py::arg("hook"))
      .def(
          "_register_post_accumulate_grad_hook",
          [](const Tensor& t, const std::function<void(const Tensor&)>& fn) {
            return t.register_post_accumulate_grad_hook([fn](const Tensor& leaf) {
              py::gil_scoped_acquire gil;
              fn(leaf);
            });
          },
          py::arg("hook"))
      .def("_remove_hook", &Tensor::remove_hook, py::arg("handle"))
      .def_property_readonly("_grad_fn_name",
                             [](const Tensor& t) -> py::object {
                               const auto fn = t.grad_fn();
                               return fn ? py::cast(pytorch_node_name(fn->name())) : py::none();
                             })
      // ---- operators ----
      .def("__neg__", [](const Tensor& a) { return -a; })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return rtx::abs(a); })
      .def("__invert__",
           [](const Tensor& a) {
             if (a.dtype() != kBool) throw py::type_error("~ is defined for bool tensors only (bitwise not is not supported)");
             return rtx::logical_not(a);
           })
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return rtx::matmul(a, b); })
      .def("__rmatmul__", [](const Tensor& a, const Tensor& b) { return rtx::matmul(b, a); });

#define RTX_OPERATOR(py_name, py_rname, py_iname, fn, fn_)                                        \
  cls.def(py_name,                                                                                \
          [](const Tensor& a, py::handle b) {                                                     \
            return with_operand(                                                                  \
                b, [&](const Tensor& t) { return py::cast(rtx::fn(a, t)); },                      \
                [&](const Scalar& s) { return py::cast(rtx::fn(a, s)); });                        \
          })                                                                                      \
      .def(py_rname,                                                                              \
           [](const Tensor& a, py::handle b) {                                                    \
             return with_operand(                                                                 \
                 b, [&](const Tensor& t) { return py::cast(rtx::fn(t, a)); },                     \
                 [&](const Scalar& s) { return py::cast(rtx::fn(s, a)); });                       \
           })                                                                                     \
      .def(py_iname, [](const py::object& self, py::handle b) {                                   \
        Tensor& a = self.cast<Tensor&>();                                                         \
        return with_operand(                                                                      \
            b, [&](const Tensor& t) { return rtx::fn_(a, t), self; },                             \
            [&](const Scalar& s) { return rtx::fn_(a, s), self; });                               \
      });
  RTX_OPERATOR("__add__", "__radd__", "__iadd__", add, add_)
  RTX_OPERATOR("__sub__", "__rsub__", "__isub__", sub, sub_)
  RTX_OPERATOR("__mul__", "__rmul__", "__imul__", mul, mul_)
  RTX_OPERATOR("__truediv__", "__rtruediv__", "__itruediv__", div, div_)
  RTX_OPERATOR("__mod__", "__rmod__", "__imod__", remainder, remainder_)
  RTX_OPERATOR("__floordiv__", "__rfloordiv__", "__ifloordiv__", floor_divide, floor_divide_)
  RTX_OPERATOR("__pow__", "__rpow__", "__ipow__", pow, pow_)
#undef RTX_OPERATOR

#define RTX_COMPARISON(py_name, fn)                                                        \
  cls.def(py_name, [](const Tensor& a, py::handle b) {                                     \
    return with_operand(                                                                   \
        b, [&](const Tensor& t) { return py::cast(rtx::fn(a, t)); },                       \
        [&](const Scalar& s) { return py::cast(rtx::fn(a, s)); });                         \
  });
  RTX_COMPARISON("__eq__", eq)
  RTX_COMPARISON("__ne__", ne)
  RTX_COMPARISON("__lt__", lt)
  RTX_COMPARISON("__le__", le)
  RTX_COMPARISON("__gt__", gt)
  RTX_COMPARISON("__ge__", ge)
#undef RTX_COMPARISON

#define RTX_BOOL_OPERATOR(py_name, py_rname, fn)                                               \
  cls.def(py_name, [](const Tensor& a, const Tensor& b) { return rtx::fn(a, b); })             \
      .def(py_rname, [](const Tensor& a, const Tensor& b) { return rtx::fn(b, a); });
  RTX_BOOL_OPERATOR("__and__", "__rand__", logical_and)
  RTX_BOOL_OPERATOR("__or__", "__ror__", logical_or)
  RTX_BOOL_OPERATOR("__xor__", "__rxor__", logical_xor)
#undef RTX_BOOL_OPERATOR
}

}  // namespace rtx::python
