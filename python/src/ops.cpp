// Every op of the library for Python, as rustytorch functions and, where PyTorch has them, Tensor
// methods, with PyTorch's argument names: creation and random functions, the pointwise table,
// reductions, linear algebra, convolution and pooling, nn functions, joining and indexing, and the
// multi-tensor ops under PyTorch's names (_foreach_norm, _foreach_mul_).
#include <pybind11/functional.h>

#include "bindings.h"

namespace rtx::python {
namespace {

TensorOptions options(std::optional<DType> dtype, std::optional<Device> device, bool requires_grad) {
  TensorOptions o;
  o.dtype = dtype;
  o.device = device;
  o.requires_grad = requires_grad;
  return o;
}

std::optional<TensorOptions> like_options(std::optional<DType> dtype, std::optional<Device> device,
                                          bool requires_grad) {
  if (!dtype && !device && !requires_grad) return std::nullopt;
  return options(dtype, device, requires_grad);
}

// Runs f with generator (when given) as the calling thread's current generator (see GeneratorGuard).
template <typename F>
decltype(auto) drawing_from(const std::optional<Generator>& generator, const F& f) {
  if (!generator) return f();
  GeneratorGuard guard(*generator);
  return f();
}

// A seed as PyTorch takes it: an int of [-2^63, 2^64), a negative one counting from 2^64.
uint64_t seed_of(const py::int_& seed) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(seed.ptr(), &overflow);
  if (overflow == 0) return static_cast<uint64_t>(v);
  const unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(seed.ptr()) : 0;
  if (overflow < 0 || PyErr_Occurred()) {
    PyErr_Clear();
    throw rtx::ValueError("[manual_seed] the seed must be an int of [-2**63, 2**64), got " +
                          py::repr(seed).cast<std::string>());
  }
  return u;
}

Reduction reduction_of(const std::string& r) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  throw py::value_error("reduction must be 'mean', 'sum' or 'none', got '" + r + "'");
}

// A pair of ints from an int or a sequence (kernel sizes, strides, paddings).
Shape pair_of(const py::object& v, const char* what) {
  Shape s = to_shape(v, what);
  if (s.size() == 1) s.push_back(s[0]);
  return s;
}

// nonzero(x, as_tuple=True): one 1-d tensor of coordinates per dim (a 0-d x counts as 1-d).
py::tuple nonzero_tuple(const Tensor& x) {
  const Tensor coordinates = rtx::nonzero(x.dim() == 0 ? x.reshape({1}) : x);
  py::tuple out(coordinates.size(1));
  for (int64_t d = 0; d < coordinates.size(1); ++d) out[d] = coordinates.select(1, d);
  return out;
}

void bind_creation(py::module_& m) {
#define RTX_SHAPE_CREATION(name)                                                                                   \
  m.def(                                                                                                           \
      #name,                                                                                                       \
      [](const py::args& size, std::optional<DType> dtype, std::optional<Device> device, bool requires_grad) { \
        return rtx::name(shape_args(size, #name "(): size"), options(dtype, device, requires_grad));            \
      },                                                                                                           \
      py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(), py::arg("requires_grad") = false);
  RTX_SHAPE_CREATION(empty)
  RTX_SHAPE_CREATION(zeros)
  RTX_SHAPE_CREATION(ones)
#undef RTX_SHAPE_CREATION
  m.def(
      "full",
      [](const py::object& size, const Scalar& value, std::optional<DType> dtype, std::optional<Device> device,
         bool requires_grad) { return rtx::full(to_shape(size, "full(): size"), value, options(dtype, device, requires_grad)); },
      py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
#define RTX_LIKE_CREATION(name)                                                                              \
  m.def(                                                                                                     \
      #name,                                                                                                 \
      [](const Tensor& t, std::optional<DType> dtype, std::optional<Device> device, bool requires_grad) { \
        return rtx::name(t, like_options(dtype, device, requires_grad));                                     \
      },                                                                                                     \
      py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),         \
      py::arg("requires_grad") = false);
  RTX_LIKE_CREATION(empty_like)
  RTX_LIKE_CREATION(zeros_like)
  RTX_LIKE_CREATION(ones_like)
#undef RTX_LIKE_CREATION
  m.def(
      "full_like",
      [](const Tensor& t, const Scalar& v, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
        return rtx::full_like(t, v, like_options(dtype, device, rg));
      },
      py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "arange",
      [](const Scalar& a, std::optional<Scalar> b, const Scalar& step, std::optional<DType> dtype,
         std::optional<Device> device, bool rg) {
        const std::optional<TensorOptions> o = like_options(dtype, device, rg);
        return b ? rtx::arange(a, *b, step, o) : rtx::arange(Scalar(int64_t{0}), a, step, o);
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "linspace",
      [](double start, double end, int64_t steps, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
        return rtx::linspace(start, end, steps, options(dtype, device, rg));
      },
      py::arg("start"), py::arg("end"), py::arg("steps"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "eye",
      [](int64_t n, std::optional<int64_t> mcols, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
        return rtx::eye(n, mcols.value_or(-1), options(dtype, device, rg));
      },
      py::arg("n"), py::arg("m") = py::none(), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def(
      "scalar_tensor",
      [](const Scalar& v, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
        return rtx::scalar_tensor(v, options(dtype, device, rg));
      },
      py::arg("s"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("requires_grad") = false);
  m.def("get_default_dtype", &rtx::get_default_dtype);
  m.def("set_default_dtype", &rtx::set_default_dtype, py::arg("d"));
}

py::tuple state_tuple(const GeneratorState& s) { return py::make_tuple(s.seed, s.offset); }
// A generator state as get_state() gives it: a sequence of two ints of [0, 2**64), the seed and the
// offset; TypeError or ValueError naming op otherwise.
GeneratorState state_of(const py::object& state, const char* op) {
  const std::string expected = std::string("[") + op + "] the state must be (seed, offset), two ints of [0, 2**64), as "
                               "get_state() returns it; got ";
  if (!py::isinstance<py::sequence>(state) || py::isinstance<py::str>(state) || py::len(state) != 2)
    throw py::type_error(expected + py::repr(state).cast<std::string>());
  uint64_t v[2];
  for (size_t i = 0; i < 2; ++i) {
    const py::object item = state[py::int_(i)];
    if (!PyLong_Check(item.ptr()) || PyBool_Check(item.ptr()))
      throw py::type_error(expected + py::repr(state).cast<std::string>());
    v[i] = PyLong_AsUnsignedLongLong(item.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw rtx::ValueError(expected + py::repr(state).cast<std::string>());
    }
  }
  return {v[0], v[1]};
}

// rustytorch.Generator, and the random functions, each taking generator= as PyTorch's do.
void bind_random(py::module_& m, TensorClass& cls) {
  py::class_<Generator>(m, "Generator")
      .def(py::init([](const std::optional<Device>& device) { return Generator(device.value_or(Device(kCPU))); }),
           py::arg("device") = py::none())
      .def(
          "manual_seed",
          [](const py::object& self, const py::int_& seed) {
            self.cast<Generator&>().manual_seed(seed_of(seed));
            return self;
          },
          py::arg("seed"))
      .def("seed", &Generator::seed)
      .def("initial_seed", &Generator::initial_seed)
      .def("get_state", [](const Generator& g) { return state_tuple(g.get_state()); })
      .def(
          "set_state",
          [](const py::object& self, const py::object& state) {
            self.cast<Generator&>().set_state(state_of(state, "Generator.set_state"));
            return self;
          },
          py::arg("new_state"))
      .def_property_readonly("device", &Generator::device)
      .def(py::pickle(
          [](const Generator& g) { return py::make_tuple(state_tuple(g.get_state()), g.device().str()); },
          [](const py::tuple& t) {
            Generator g(Device(t[1].cast<std::string>()));
            g.set_state(state_of(t[0], "Generator.__setstate__"));
            return g;
          }));
  m.attr("default_generator") = rtx::default_generator();
  m.def("manual_seed", [](const py::int_& seed) {
    rtx::manual_seed(seed_of(seed));
    return rtx::default_generator();
  }, py::arg("seed"));
  m.def("seed", [] { return rtx::default_generator().seed(); });
  m.def("initial_seed", &rtx::initial_seed);
  m.def("get_rng_state", [] { return state_tuple(rtx::get_rng_state()); });
  m.def("set_rng_state", [](const py::object& state) { rtx::set_rng_state(state_of(state, "set_rng_state")); },
        py::arg("new_state"));

  using OptionalGenerator = std::optional<Generator>;
#define RTX_RANDOM_SHAPE(name)                                                                                  \
  m.def(                                                                                                        \
      #name,                                                                                                    \
      [](const py::args& size, const OptionalGenerator& g, std::optional<DType> dtype, std::optional<Device> device, \
         bool rg) {                                                                                             \
        const Shape shape = shape_args(size, #name "(): size");                                                 \
        return drawing_from(g, [&] { return rtx::name(shape, options(dtype, device, rg)); });                   \
      },                                                                                                        \
      py::kw_only(), py::arg("generator") = py::none(), py::arg("dtype") = py::none(),                          \
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  RTX_RANDOM_SHAPE(rand)
  RTX_RANDOM_SHAPE(randn)
#undef RTX_RANDOM_SHAPE
#define RTX_RANDOM_LIKE(name)                                                                                   \
  m.def(                                                                                                        \
      #name,                                                                                                    \
      [](const Tensor& t, const OptionalGenerator& g, std::optional<DType> dtype, std::optional<Device> device,   \
         bool rg) { return drawing_from(g, [&] { return rtx::name(t, like_options(dtype, device, rg)); }); },    \
      py::arg("input"), py::kw_only(), py::arg("generator") = py::none(), py::arg("dtype") = py::none(),         \
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  RTX_RANDOM_LIKE(rand_like)
  RTX_RANDOM_LIKE(randn_like)
#undef RTX_RANDOM_LIKE
  // torch.randint's two forms: randint(high, size) and randint(low, high, size).
  const auto randint = [](int64_t low, int64_t high, const py::object& size, const OptionalGenerator& g,
                          std::optional<DType> dtype, std::optional<Device> device, bool rg) {
    if (!py::isinstance<py::sequence>(size))
      throw py::type_error("randint(): size must be a tuple of ints, got " + type_name(size));
    const Shape shape = to_shape(size, "randint(): size");
    return drawing_from(g, [&] { return rtx::randint(low, high, shape, options(dtype.value_or(kInt64), device, rg)); });
  };
  m.def(
      "randint",
      [randint](int64_t high, const py::object& size, const OptionalGenerator& g, std::optional<DType> dtype,
                std::optional<Device> device, bool rg) { return randint(0, high, size, g, dtype, device, rg); },
      py::arg("high"), py::arg("size"), py::kw_only(), py::arg("generator") = py::none(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  m.def("randint", randint, py::arg("low"), py::arg("high"), py::arg("size"), py::kw_only(),
        py::arg("generator") = py::none(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("requires_grad") = false);
  m.def(
      "randperm",
      [](int64_t n, const OptionalGenerator& g, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
        return drawing_from(g, [&] { return rtx::randperm(n, options(dtype.value_or(kInt64), device, rg)); });
      },
      py::arg("n"), py::kw_only(), py::arg("generator") = py::none(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);
  cls.def(
      "uniform_",
      [](Tensor& t, double a, double b, const OptionalGenerator& g) -> Tensor& {
        return drawing_from(g, [&]() -> Tensor& { return rtx::uniform_(t, a, b); });
      },
      py::arg("from") = 0.0, py::arg("to") = 1.0, py::kw_only(), py::arg("generator") = py::none());
  cls.def(
      "normal_",
      [](Tensor& t, double mean, double std, const OptionalGenerator& g) -> Tensor& {
        return drawing_from(g, [&]() -> Tensor& { return rtx::normal_(t, mean, std); });
      },
      py::arg("mean") = 0.0, py::arg("std") = 1.0, py::kw_only(), py::arg("generator") = py::none());
  // The other distributions' in-place fills, each with its PyTorch parameters and defaults.
  const auto two_parameter_fill = [&cls](const char* name, auto fill, auto... params) {
    cls.def(name, [fill](Tensor& t, double a, double b, const OptionalGenerator& g) -> Tensor& {
      return drawing_from(g, [&]() -> Tensor& { return fill(t, a, b); });
    }, params..., py::kw_only(), py::arg("generator") = py::none());
  };
  cls.def("exponential_", [](Tensor& t, double lambd, const OptionalGenerator& g) -> Tensor& {
    return drawing_from(g, [&]() -> Tensor& { return rtx::exponential_(t, lambd); });
  }, py::arg("lambd") = 1.0, py::kw_only(), py::arg("generator") = py::none());
  cls.def("geometric_", [](Tensor& t, double p, const OptionalGenerator& g) -> Tensor& {
    return drawing_from(g, [&]() -> Tensor& { return rtx::geometric_(t, p); });
  }, py::arg("p"), py::kw_only(), py::arg("generator") = py::none());
  two_parameter_fill("log_normal_", &rtx::log_normal_, py::arg("mean") = 1.0, py::arg("std") = 2.0);
  two_parameter_fill("cauchy_", &rtx::cauchy_, py::arg("median") = 0.0, py::arg("sigma") = 1.0);
  // random_(), random_(to) and random_(from, to), as PyTorch reads them.
  cls.def("random_", [](Tensor& t, std::optional<int64_t> a, std::optional<int64_t> b,
                         const OptionalGenerator& g) -> Tensor& {
    return drawing_from(g, [&]() -> Tensor& { return b ? rtx::random_(t, a, b) : rtx::random_(t, std::nullopt, a); });
  }, py::arg("from") = py::none(), py::arg("to") = py::none(), py::kw_only(), py::arg("generator") = py::none());
  def_op(m, cls, "bernoulli", [](const Tensor& p, std::optional<double> prob, const OptionalGenerator& g) {
    return drawing_from(g, [&] { return prob ? rtx::bernoulli(p, *prob) : rtx::bernoulli(p); });
  }, py::arg("p") = py::none(), py::kw_only(), py::arg("generator") = py::none());
  def_op(m, cls, "multinomial", [](const Tensor& w, int64_t n, bool replacement, const OptionalGenerator& g) {
    return drawing_from(g, [&] { return rtx::multinomial(w, n, replacement); });
  }, py::arg("num_samples"), py::arg("replacement") = false, py::kw_only(), py::arg("generator") = py::none());
}

void bind_pointwise(py::module_& m, TensorClass& cls) {
#define RTX_UNARY(name, F, r, s, g)                                             \
  def_op(m, cls, #name, [](const Tensor& x) { return rtx::name(x); });        \
  def_op(m, cls, #name "_", [](Tensor& x) -> Tensor& { return rtx::name##_(x); });
  // One function per op and form, decoding `other` itself (see with_operand); number-first forms
  // (rt.mul(2, x)) are a second overload of the module function.
#define RTX_BINARY(name, F, r, s, ga, gb)                                                                  \
  def_op(m, cls, #name, [](const Tensor& a, py::handle b) {                                              \
    return with_operand(#name, b, [&](const Tensor& t) { return py::cast(rtx::name(a, t)); },           \
                        [&](const Scalar& v) { return py::cast(rtx::name(a, v)); });                    \
  }, py::arg("other"));                                                                                \
  m.def(#name, [](const Scalar& a, const Tensor& b) { return rtx::name(a, b); }, py::arg("input"), py::arg("other")); \
  cls.def(#name "_", [](const py::object& self, py::handle b) {                                         \
    Tensor& a = self.cast<Tensor&>();                                                                  \
    return with_operand(#name "_", b, [&](const Tensor& t) { return rtx::name##_(a, t), self; },        \
                        [&](const Scalar& v) { return rtx::name##_(a, v), self; });                     \
  }, py::arg("other"));
#define RTX_COMPARE(name, F)                                                                              \
  def_op(m, cls, #name, [](const Tensor& a, py::handle b) {                                              \
    return with_operand(#name, b, [&](const Tensor& t) { return py::cast(rtx::name(a, t)); },           \
                        [&](const Scalar& v) { return py::cast(rtx::name(a, v)); });                    \
  }, py::arg("other"));
#define RTX_LOGICAL(name, F) \
  def_op(m, cls, #name, [](const Tensor& a, const Tensor& b) { return rtx::name(a, b); }, py::arg("other"));
#define RTX_PREDICATE(name, F) def_op(m, cls, #name, [](const Tensor& x) { return rtx::name(x); });
#include "rtx/pointwise.def"

  // add/sub with alpha, PyTorch's aliases.
  def_op(m, cls, "add", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return rtx::add(a, b, alpha); },
         py::arg("other"), py::kw_only(), py::arg("alpha"));
  cls.def("add_", [](Tensor& a, const Tensor& b, const Scalar& alpha) -> Tensor& { return rtx::add_(a, b, alpha); },
          py::arg("other"), py::kw_only(), py::arg("alpha"));
  def_op(m, cls, "sub", [](const Tensor& a, const Tensor& b, const Scalar& alpha) { return rtx::add(a, b, alpha.is_floating() ? Scalar(-alpha.to_double()) : Scalar(-alpha.to_int())); },
         py::arg("other"), py::kw_only(), py::arg("alpha"));
  def_op(m, cls, "gelu", [](const Tensor& x, const std::string& a) { return rtx::gelu(x, a); },
         py::kw_only(), py::arg("approximate") = "none");
  def_op(m, cls, "leaky_relu", &rtx::leaky_relu, py::arg("negative_slope") = 0.01);
  def_op(m, cls, "elu", &rtx::elu, py::arg("alpha") = 1.0);
  def_op(m, cls, "softplus", &rtx::softplus, py::arg("beta") = 1.0, py::arg("threshold") = 20.0);
  const auto clamp = [](const Tensor& x, const py::object& min, const py::object& max) {
    const bool tensors = py::isinstance<Tensor>(min) || py::isinstance<Tensor>(max);
    if (tensors) {
      const Tensor lo = min.is_none() ? Tensor() : min.cast<Tensor>();
      const Tensor hi = max.is_none() ? Tensor() : max.cast<Tensor>();
      return rtx::clamp(x, lo, hi);
    }
    return rtx::clamp(x, min.is_none() ? std::nullopt : std::optional<Scalar>(min.cast<Scalar>()),
                      max.is_none() ? std::nullopt : std::optional<Scalar>(max.cast<Scalar>()));
  };
  def_op(m, cls, "clamp", clamp, py::arg("min") = py::none(), py::arg("max") = py::none());
  def_op(m, cls, "clip", clamp, py::arg("min") = py::none(), py::arg("max") = py::none());
  cls.def(
      "clamp_",
      [](Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) -> Tensor& { return rtx::clamp_(x, min, max); },
      py::arg("min") = py::none(), py::arg("max") = py::none());
  def_op(m, cls, "masked_fill", &rtx::masked_fill, py::arg("mask"), py::arg("value"));
  cls.def("masked_fill_", [](Tensor& x, const Tensor& mask, const Scalar& v) -> Tensor& { return rtx::masked_fill_(x, mask, v); },
          py::arg("mask"), py::arg("value"));
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&rtx::where), py::arg("condition"),
        py::arg("input"), py::arg("other"));
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, const Scalar&>(&rtx::where), py::arg("condition"),
        py::arg("input"), py::arg("other"));
  m.def("where", py::overload_cast<const Tensor&, const Scalar&, const Tensor&>(&rtx::where), py::arg("condition"),
        py::arg("input"), py::arg("other"));
  m.def("where", [](const Tensor& c, const Scalar& a, const Scalar& b) {
    return rtx::where(c, rtx::scalar_tensor(a, TensorOptions(a.dtype(), c.device())), b);
  }, py::arg("condition"), py::arg("input"), py::arg("other"));
  m.def("where", [](const Tensor& c) { return nonzero_tuple(c); }, py::arg("condition"));
  cls.def("where", [](const Tensor& x, const Tensor& c, const Tensor& y) { return rtx::where(c, x, y); },
          py::arg("condition"), py::arg("other"));
  cls.def("where", [](const Tensor& x, const Tensor& c, const Scalar& y) { return rtx::where(c, x, y); },
          py::arg("condition"), py::arg("other"));
  def_op(m, cls, "lerp", &rtx::lerp, py::arg("end"), py::arg("weight"));
  def_op(m, cls, "addcmul", &rtx::addcmul, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1);
  def_op(m, cls, "addcdiv", &rtx::addcdiv, py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1);
  cls.def("addcmul_", [](Tensor& x, const Tensor& a, const Tensor& b, const Scalar& v) -> Tensor& { return rtx::addcmul_(x, a, b, v); },
          py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1);
  cls.def("addcdiv_", [](Tensor& x, const Tensor& a, const Tensor& b, const Scalar& v) -> Tensor& { return rtx::addcdiv_(x, a, b, v); },
          py::arg("tensor1"), py::arg("tensor2"), py::kw_only(), py::arg("value") = 1);
  cls.def("lerp_", [](Tensor& x, const Tensor& e, const Scalar& w) -> Tensor& { return rtx::lerp_(x, e, w); },
          py::arg("end"), py::arg("weight"));
}

// op(x), or with an explicit dtype op(x.to(dtype)) as asked: autocast does not override it.
template <typename Op>
Tensor in_dtype(const Tensor& x, std::optional<DType> dtype, const Op& op) {
  if (!dtype) return op(x);
  autocast::ExcludeGuard requested_dtype;
  return op(x.to(*dtype));
}

void bind_reductions(py::module_& m, TensorClass& cls) {
#define RTX_DIMS_REDUCTION(name)                                                                            \
  def_op(m, cls, #name, [](const Tensor& x, const py::object& dim, bool keepdim, std::optional<DType> dtype) { \
    return in_dtype(x, dtype, [&](const Tensor& t) { return rtx::name(t, dims_arg(dim, #name "(): dim"), keepdim); }); \
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  RTX_DIMS_REDUCTION(sum)
  RTX_DIMS_REDUCTION(mean)
  RTX_DIMS_REDUCTION(prod)
#undef RTX_DIMS_REDUCTION
#define RTX_DIMS_ONLY(name)                                                                     \
  def_op(m, cls, #name, [](const Tensor& x, const py::object& dim, bool keepdim) {             \
    return rtx::name(x, dims_arg(dim, #name "(): dim"), keepdim);                                               \
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  RTX_DIMS_ONLY(amax)
  RTX_DIMS_ONLY(amin)
  RTX_DIMS_ONLY(any)
  RTX_DIMS_ONLY(all)
#undef RTX_DIMS_ONLY
  // max/min: of everything, along a dim (values and indices), or elementwise against a tensor.
  const auto extreme = [](bool is_max) {
    return [is_max](const Tensor& x, const py::object& dim, bool keepdim) -> py::object {
      if (dim.is_none()) return py::cast(is_max ? rtx::max(x) : rtx::min(x));
      if (py::isinstance<Tensor>(dim)) {
        const Tensor& other = dim.cast<const Tensor&>();
        return py::cast(is_max ? rtx::maximum(x, other) : rtx::minimum(x, other));
      }
      const int64_t d = to_int64(dim, is_max ? "max(): dim" : "min(): dim");
      return values_indices(is_max ? rtx::max(x, d, keepdim) : rtx::min(x, d, keepdim));
    };
  };
  def_op(m, cls, "max", extreme(true), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, cls, "min", extreme(false), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, cls, "argmax", &rtx::argmax, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, cls, "argmin", &rtx::argmin, py::arg("dim") = py::none(), py::arg("keepdim") = false);
#define RTX_MOMENT(name)                                                                                        \
  def_op(m, cls, #name, [](const Tensor& x, const py::object& dim, std::optional<bool> unbiased, bool keepdim, \
                           std::optional<int64_t> correction) {                                                 \
    return rtx::name(x, dims_arg(dim, #name "(): dim"), correction_of(unbiased, correction), keepdim);          \
  }, py::arg("dim") = py::none(), py::arg("unbiased") = py::none(), py::arg("keepdim") = false, py::kw_only(),  \
         py::arg("correction") = py::none());
  RTX_MOMENT(var)
  RTX_MOMENT(std)
#undef RTX_MOMENT
  def_op(m, cls, "norm", [](const Tensor& x, const py::object& p, const py::object& dim, bool keepdim) {
    double order = 2.0;
    if (py::isinstance<py::str>(p)) {
      const std::string s = p.cast<std::string>();
      if (s != "fro") throw py::value_error("norm(): p must be a number or 'fro', got '" + s + "'");
    } else if (!p.is_none()) {
      order = p.cast<double>();
    }
    return rtx::norm(x, order, dims_arg(dim, "norm(): dim"), keepdim);
  }, py::arg("p") = "fro", py::arg("dim") = py::none(), py::arg("keepdim") = false);
  def_op(m, cls, "logsumexp", [](const Tensor& x, const py::object& dim, bool keepdim) {
    return rtx::logsumexp(x, to_shape(dim, "logsumexp(): dim"), keepdim);
  }, py::arg("dim"), py::arg("keepdim") = false);
  for (const auto& [name, f] : {std::pair{"cumsum", &rtx::cumsum}, std::pair{"cumprod", &rtx::cumprod}}) {
    def_op(m, cls, name, [f = f](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
      return in_dtype(x, dtype, [&](const Tensor& t) { return f(t, dim); });
    }, py::arg("dim"), py::kw_only(), py::arg("dtype") = py::none());
    cls.def((std::string(name) + "_").c_str(), [f = f](Tensor& x, int64_t dim) -> Tensor& { return x.copy_(f(x, dim)); },
            py::arg("dim"));
  }
  def_op(m, cls, "logcumsumexp", &rtx::logcumsumexp, py::arg("dim"));
  def_op(m, cls, "cummax", [](const Tensor& x, int64_t dim) { return values_indices(rtx::cummax(x, dim)); },
         py::arg("dim"));
  def_op(m, cls, "cummin", [](const Tensor& x, int64_t dim) { return values_indices(rtx::cummin(x, dim)); },
         py::arg("dim"));
}

void bind_linalg_nn(py::module_& m, TensorClass& cls) {
  def_op(m, cls, "matmul", &rtx::matmul, py::arg("other"));
  def_op(m, cls, "mm", &rtx::mm, py::arg("mat2"));
  def_op(m, cls, "bmm", &rtx::bmm, py::arg("mat2"));
  m.def("linear", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
    return rtx::linear(x, w, b.value_or(Tensor()));
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("conv2d", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const py::object& stride,
                     const py::object& padding, const py::object& dilation, int64_t groups) {
    return rtx::conv2d(x, w, b.value_or(Tensor()), pair_of(stride, "stride"), pair_of(padding, "padding"),
                       pair_of(dilation, "dilation"), groups);
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("dilation") = 1, py::arg("groups") = 1);
  m.def("conv_transpose2d", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                               const py::object& stride, const py::object& padding, const py::object& output_padding,
                               int64_t groups, const py::object& dilation) {
    return rtx::conv_transpose2d(x, w, b.value_or(Tensor()), pair_of(stride, "stride"), pair_of(padding, "padding"),
                                 pair_of(output_padding, "output_padding"), groups, pair_of(dilation, "dilation"));
  }, py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("dilation") = 1);
  m.def("max_pool2d", [](const Tensor& x, const py::object& k, const py::object& stride, const py::object& padding,
                         const py::object& dilation, bool ceil_mode, bool return_indices) -> py::object {
    const Shape ks = pair_of(k, "kernel_size");
    const Shape st = stride.is_none() ? Shape{} : pair_of(stride, "stride");
    if (return_indices)
      return values_indices(rtx::max_pool2d_with_indices(x, ks, st, pair_of(padding, "padding"),
                                                         pair_of(dilation, "dilation"), ceil_mode));
    return py::cast(rtx::max_pool2d(x, ks, st, pair_of(padding, "padding"), pair_of(dilation, "dilation"), ceil_mode));
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
        py::arg("dilation") = 1, py::arg("ceil_mode") = false, py::arg("return_indices") = false);
  m.def("avg_pool2d", [](const Tensor& x, const py::object& k, const py::object& stride, const py::object& padding,
                         bool ceil_mode, bool count_include_pad) {
    return rtx::avg_pool2d(x, pair_of(k, "kernel_size"), stride.is_none() ? Shape{} : pair_of(stride, "stride"),
                           pair_of(padding, "padding"), ceil_mode, count_include_pad);
  }, py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
        py::arg("ceil_mode") = false, py::arg("count_include_pad") = true);
  m.def("adaptive_avg_pool2d", [](const Tensor& x, const py::object& size) {
    return rtx::adaptive_avg_pool2d(x, pair_of(size, "output_size"));
  }, py::arg("input"), py::arg("output_size"));
  def_op(m, cls, "softmax", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
    return in_dtype(x, dtype, [&](const Tensor& t) { return rtx::softmax(t, dim); });
  }, py::arg("dim"), py::arg("dtype") = py::none());
  def_op(m, cls, "log_softmax", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) {
    return in_dtype(x, dtype, [&](const Tensor& t) { return rtx::log_softmax(t, dim); });
  }, py::arg("dim"), py::arg("dtype") = py::none());
  m.def("layer_norm", [](const Tensor& x, const py::object& shape, const std::optional<Tensor>& w,
                         const std::optional<Tensor>& b, double eps) {
    return rtx::layer_norm(x, to_shape(shape, "layer_norm(): normalized_shape"), w.value_or(Tensor()), b.value_or(Tensor()), eps);
  }, py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
        py::arg("eps") = 1e-5);
  m.def("batch_norm", [](const Tensor& x, const std::optional<Tensor>& rm, const std::optional<Tensor>& rv,
                         const std::optional<Tensor>& w, const std::optional<Tensor>& b, bool training, double momentum,
                         double eps) {
    return rtx::batch_norm(x, rm.value_or(Tensor()), rv.value_or(Tensor()), w.value_or(Tensor()), b.value_or(Tensor()),
                           training, momentum, eps);
  }, py::arg("input"), py::arg("running_mean"), py::arg("running_var"), py::arg("weight") = py::none(),
        py::arg("bias") = py::none(), py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5);
  m.def("embedding", [](const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
    return rtx::embedding(weight, indices, padding_idx);
  }, py::arg("input"), py::arg("weight"), py::arg("padding_idx") = py::none());
  m.def("dropout", &rtx::dropout, py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true);
  m.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v,
                                           const std::optional<Tensor>& mask, double dropout_p, bool is_causal,
                                           std::optional<double> scale, bool enable_gqa) {
    return rtx::scaled_dot_product_attention(q, k, v, mask.value_or(Tensor()), dropout_p, is_causal, scale, enable_gqa);
  }, py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(), py::arg("dropout_p") = 0.0,
        py::arg("is_causal") = false, py::arg("scale") = py::none(), py::arg("enable_gqa") = false);
  m.def("cross_entropy", [](const Tensor& x, const Tensor& t, const std::optional<Tensor>& w, int64_t ignore_index,
                            const std::string& reduction, double label_smoothing) {
    return rtx::cross_entropy(x, t, w.value_or(Tensor()), ignore_index, reduction_of(reduction), label_smoothing);
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
        py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0);
  m.def("nll_loss", [](const Tensor& x, const Tensor& t, const std::optional<Tensor>& w, int64_t ignore_index,
                       const std::string& reduction) {
    return rtx::nll_loss(x, t, w.value_or(Tensor()), ignore_index, reduction_of(reduction));
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
        py::arg("reduction") = "mean");
  m.def("mse_loss", [](const Tensor& x, const Tensor& t, const std::string& reduction) {
    return rtx::mse_loss(x, t, reduction_of(reduction));
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
  m.def("binary_cross_entropy_with_logits", [](const Tensor& x, const Tensor& t, const std::optional<Tensor>& w,
                                               const std::string& reduction, const std::optional<Tensor>& pos_weight) {
    return rtx::binary_cross_entropy_with_logits(x, t, w.value_or(Tensor()), pos_weight.value_or(Tensor()),
                                                 reduction_of(reduction));
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("reduction") = "mean",
        py::arg("pos_weight") = py::none());
  m.def("one_hot", &rtx::one_hot, py::arg("input"), py::arg("num_classes") = -1);
}

void bind_join_index(py::module_& m, TensorClass& cls) {
  m.def("cat", &rtx::cat, py::arg("tensors"), py::arg("dim") = 0);
  m.def("concat", &rtx::cat, py::arg("tensors"), py::arg("dim") = 0);
  m.def("stack", &rtx::stack, py::arg("tensors"), py::arg("dim") = 0);
  def_op(m, cls, "split", [](const Tensor& x, const py::object& size, int64_t dim) {
    if (PyLong_Check(size.ptr())) return rtx::split(x, size.cast<int64_t>(), dim);
    return rtx::split(x, to_shape(size, "split(): split_size_or_sections"), dim);
  }, py::arg("split_size_or_sections"), py::arg("dim") = 0);
  def_op(m, cls, "chunk", &rtx::chunk, py::arg("chunks"), py::arg("dim") = 0);
  def_op(m, cls, "unbind", [](const Tensor& x, int64_t dim) {
    TensorList parts;
    const int64_t n = x.size(dim);
    for (int64_t i = 0; i < n; ++i) parts.push_back(x.select(dim, i));
    return parts;
  }, py::arg("dim") = 0);
  def_op(m, cls, "index_select", &rtx::index_select, py::arg("dim"), py::arg("index"));
  def_op(m, cls, "gather", &rtx::gather, py::arg("dim"), py::arg("index"));
  def_op(m, cls, "scatter", py::overload_cast<const Tensor&, int64_t, const Tensor&, const Tensor&>(&rtx::scatter),
         py::arg("dim"), py::arg("index"), py::arg("src"));
  def_op(m, cls, "scatter", py::overload_cast<const Tensor&, int64_t, const Tensor&, const Scalar&>(&rtx::scatter),
         py::arg("dim"), py::arg("index"), py::arg("value"));
  def_op(m, cls, "scatter_add", &rtx::scatter_add, py::arg("dim"), py::arg("index"), py::arg("src"));
  // In place: the scatter's result written back (reduce "add" sums into the tensor instead).
  cls.def("scatter_", [](const py::object& self, int64_t dim, const Tensor& index, py::handle src,
                         const std::optional<std::string>& reduce) {
    Tensor& x = self.cast<Tensor&>();
    if (reduce && *reduce != "add")
      throw rtx::ValueError("[scatter_] reduce must be None or 'add', got '" + *reduce + "'");
    return with_operand("scatter_", src, [&](const Tensor& t) {
      x.copy_(reduce ? rtx::scatter_add(x, dim, index, t) : rtx::scatter(x, dim, index, t));
      return self;
    }, [&](const Scalar& v) {
      x.copy_(reduce ? rtx::scatter_add(x, dim, index, rtx::full(index.sizes(), v, x.options()))
                     : rtx::scatter(x, dim, index, v));
      return self;
    });
  }, py::arg("dim"), py::arg("index"), py::arg("src"), py::kw_only(), py::arg("reduce") = py::none());
  cls.def("scatter_add_", [](const py::object& self, int64_t dim, const Tensor& index, const Tensor& src) {
    Tensor& x = self.cast<Tensor&>();
    x.copy_(rtx::scatter_add(x, dim, index, src));
    return self;
  }, py::arg("dim"), py::arg("index"), py::arg("src"));
  def_op(m, cls, "nonzero", [](const Tensor& x, bool as_tuple) -> py::object {
    return as_tuple ? py::object(nonzero_tuple(x)) : py::cast(rtx::nonzero(x));
  }, py::kw_only(), py::arg("as_tuple") = false);
  def_op(m, cls, "argwhere", &rtx::nonzero);
  def_op(m, cls, "masked_select", &rtx::masked_select, py::arg("mask"));
  def_op(m, cls, "index_add", &rtx::index_add, py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(),
         py::arg("alpha") = 1);
  def_op(m, cls, "tril", &rtx::tril, py::arg("diagonal") = 0);
  def_op(m, cls, "triu", &rtx::triu, py::arg("diagonal") = 0);
  def_op(m, cls, "topk", [](const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
    return values_indices(rtx::topk(x, k, dim, largest, sorted));
  }, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true);
  def_op(m, cls, "sort", [](const Tensor& x, int64_t dim, bool descending, bool) {
    return values_indices(rtx::sort(x, dim, descending));
  }, py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(), py::arg("stable") = true);
  def_op(m, cls, "argsort", [](const Tensor& x, int64_t dim, bool descending, bool) {
    return rtx::argsort(x, dim, descending);
  }, py::arg("dim") = -1, py::arg("descending") = false, py::kw_only(), py::arg("stable") = true);
  m.def("broadcast_tensors", [](const py::args& tensors) {
    TensorList list;
    for (py::handle t : tensors) list.push_back(t.cast<Tensor>());
    return rtx::broadcast_tensors(list);
  });
  m.def("broadcast_shapes", [](const py::args& shapes) {
    Shape out;
    for (py::handle s : shapes) out = rtx::broadcast_shapes(out, to_shape(s, "broadcast_shapes(): shape"));
    return to_size(out);
  });
  m.def("result_type", py::overload_cast<const Tensor&, const Tensor&>(&rtx::result_type), py::arg("tensor1"),
        py::arg("tensor2"));
  m.def("result_type", py::overload_cast<const Tensor&, const Scalar&>(&rtx::result_type), py::arg("tensor1"),
        py::arg("tensor2"));
}

// The tensors of a foreach op: a list or tuple of Tensors, as PyTorch takes them; TypeError naming
// op otherwise.
TensorList foreach_list(py::handle obj, const char* op) {
  if (!PyList_Check(obj.ptr()) && !PyTuple_Check(obj.ptr()))
    throw py::type_error(std::string(op) + "(): argument 'self' must be a list or tuple of Tensors, not " +
                         type_name(obj));
  TensorList out;
  for (py::handle item : obj) {
    if (!py::isinstance<Tensor>(item))
      throw py::type_error(std::string(op) + "(): element " + std::to_string(out.size()) +
                           " of argument 'self' must be a Tensor, not " + type_name(item));
    out.push_back(item.cast<Tensor>());
  }
  return out;
}

// An int or a sequence of ints, as a Shape (roll's shifts, movedim's dims, flip's dims).
Shape ints_arg(const py::object& obj, const char* what) {
  if (PyLong_Check(obj.ptr())) return {obj.cast<int64_t>()};
  return to_shape(obj, what);
}

void bind_rearrange(py::module_& m, TensorClass& cls) {
  m.def("flip", [](const Tensor& x, const py::object& dims) { return rtx::flip(x, ints_arg(dims, "flip(): dims")); },
        py::arg("input"), py::arg("dims"));
  cls.def("flip", [](const Tensor& x, const py::args& dims) { return rtx::flip(x, shape_args(dims, "flip(): dims")); });
  def_op(m, cls, "fliplr", &rtx::fliplr);
  def_op(m, cls, "flipud", &rtx::flipud);
  def_op(m, cls, "roll", [](const Tensor& x, const py::object& shifts, const py::object& dims) {
    return rtx::roll(x, ints_arg(shifts, "roll(): shifts"), dims.is_none() ? Shape{} : ints_arg(dims, "roll(): dims"));
  }, py::arg("shifts"), py::arg("dims") = py::none());
  const auto movedim = [](const Tensor& x, const py::object& source, const py::object& destination) {
    return rtx::movedim(x, ints_arg(source, "movedim(): source"), ints_arg(destination, "movedim(): destination"));
  };
  def_op(m, cls, "movedim", movedim, py::arg("source"), py::arg("destination"));
  def_op(m, cls, "moveaxis", movedim, py::arg("source"), py::arg("destination"));
  def_op(m, cls, "repeat_interleave", [](const Tensor& x, const py::object& repeats, std::optional<int64_t> dim,
                                         std::optional<int64_t> output_size) {
    Tensor out = py::isinstance<Tensor>(repeats) ? rtx::repeat_interleave(x, repeats.cast<Tensor>(), dim)
                                                 : rtx::repeat_interleave(x, to_int64(repeats, "repeat_interleave(): repeats"), dim);
    if (output_size && (dim ? out.size(*dim) : out.numel()) != *output_size)
      throw rtx::ShapeError("[repeat_interleave] output_size " + std::to_string(*output_size) +
                            " differs from the repeated size " + std::to_string(dim ? out.size(*dim) : out.numel()));
    return out;
  }, py::arg("repeats"), py::arg("dim") = py::none(), py::kw_only(), py::arg("output_size") = py::none());
  def_op(m, cls, "diff", [](const Tensor& x, int64_t n, int64_t dim, std::optional<Tensor> prepend,
                            std::optional<Tensor> append) {
    return rtx::diff(x, n, dim, prepend.value_or(Tensor()), append.value_or(Tensor()));
  }, py::arg("n") = 1, py::arg("dim") = -1, py::arg("prepend") = py::none(), py::arg("append") = py::none());
  cls.def("unfold", &rtx::unfold, py::arg("dimension"), py::arg("size"), py::arg("step"));
  // meshgrid(a, b, ...) or meshgrid([a, b, ...]), as PyTorch takes either.
  m.def("meshgrid", [](const py::args& args, const std::string& indexing) {
    const bool one_list = args.size() == 1 && !py::isinstance<Tensor>(args[0]);
    return rtx::meshgrid((one_list ? args[0] : py::object(args)).cast<TensorList>(), indexing);
  }, py::kw_only(), py::arg("indexing") = "ij");
  def_op(m, cls, "take_along_dim", &rtx::take_along_dim, py::arg("indices"), py::arg("dim") = py::none());
  def_op(m, cls, "outer", &rtx::outer, py::arg("vec2"));
  def_op(m, cls, "ger", &rtx::outer, py::arg("vec2"));
  def_op(m, cls, "dot", &rtx::dot, py::arg("tensor"));
  def_op(m, cls, "mv", &rtx::mv, py::arg("vec"));
  def_op(m, cls, "addmm", &rtx::addmm, py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1,
         py::arg("alpha") = 1);
  def_op(m, cls, "baddbmm", &rtx::baddbmm, py::arg("batch1"), py::arg("batch2"), py::kw_only(), py::arg("beta") = 1,
         py::arg("alpha") = 1);
  cls.def("addmm_", [](Tensor& x, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) -> Tensor& {
    return x.copy_(rtx::addmm(x, a, b, beta, alpha));
  }, py::arg("mat1"), py::arg("mat2"), py::kw_only(), py::arg("beta") = 1, py::arg("alpha") = 1);
  def_op(m, cls, "count_nonzero", [](const Tensor& x, const py::object& dim) {
    return rtx::sum(rtx::ne(x, Scalar(0)), dim.is_none() ? Shape{} : ints_arg(dim, "count_nonzero(): dim"));
  }, py::arg("dim") = py::none());
  def_op(m, cls, "clamp_min", [](const Tensor& x, const Scalar& min) { return rtx::clamp(x, min, std::nullopt); },
         py::arg("min"));
  def_op(m, cls, "clamp_max", [](const Tensor& x, const Scalar& max) { return rtx::clamp(x, std::nullopt, max); },
         py::arg("max"));
  cls.def("clamp_min_", [](Tensor& x, const Scalar& min) -> Tensor& { return rtx::clamp_(x, min, std::nullopt); },
          py::arg("min"));
  cls.def("clamp_max_", [](Tensor& x, const Scalar& max) -> Tensor& { return rtx::clamp_(x, std::nullopt, max); },
          py::arg("max"));
  cls.def("tril_", [](Tensor& x, int64_t d) -> Tensor& { return x.copy_(rtx::tril(x, d)); }, py::arg("diagonal") = 0);
  cls.def("triu_", [](Tensor& x, int64_t d) -> Tensor& { return x.copy_(rtx::triu(x, d)); }, py::arg("diagonal") = 0);
}

// PyTorch's other names for ops bound above: the function and the methods (with their in-place forms).
void bind_aliases(py::module_& m, TensorClass& cls) {
  const std::pair<const char*, const char*> aliases[] = {
      {"absolute", "abs"},       {"negative", "neg"},      {"multiply", "mul"},      {"subtract", "sub"},
      {"divide", "div"},         {"true_divide", "div"},   {"greater", "gt"},        {"greater_equal", "ge"},
      {"less", "lt"},            {"less_equal", "le"},     {"not_equal", "ne"},      {"arcsin", "asin"},
      {"arccos", "acos"},        {"arctan", "atan"},       {"arcsinh", "asinh"},     {"arccosh", "acosh"},
      {"arctanh", "atanh"},      {"arctan2", "atan2"},     {"fix", "trunc"},         {"swapaxes", "transpose"},
      {"swapdims", "transpose"}, {"concatenate", "cat"},
  };
  for (const auto& [alias, name] : aliases) {
    const std::string alias_ = std::string(alias) + "_", name_ = std::string(name) + "_";
    if (py::hasattr(m, name) && !py::hasattr(m, alias)) m.attr(alias) = m.attr(name);
    if (py::hasattr(cls, name) && !py::hasattr(cls, alias)) cls.attr(alias) = cls.attr(name);
    if (py::hasattr(cls, name_.c_str()) && !py::hasattr(cls, alias_.c_str())) cls.attr(alias_.c_str()) = cls.attr(name_.c_str());
  }
}

void bind_foreach(py::module_& m) {
  m.def(
      "_foreach_norm",
      [](py::handle self, double ord, std::optional<DType> dtype) {
        return py::tuple(py::cast(rtx::foreach_norm(foreach_list(self, "_foreach_norm"), ord, dtype)));
      },
      "The ord-norm of each tensor of a list or tuple, as a tuple of 0-d tensors.", py::arg("self"),
      py::arg("ord") = 2.0, py::arg("dtype") = py::none());
  m.def(
      "_foreach_mul_",
      [](py::handle self, py::handle scalar) {
        TensorList tensors = foreach_list(self, "_foreach_mul_");
        with_operand(
            "_foreach_mul_", scalar,
            [&](const Tensor& s) {
              rtx::foreach_mul_(tensors, s);
              return py::none();
            },
            [&](const Scalar& s) {
              rtx::foreach_mul_(tensors, s);
              return py::none();
            });
      },
      "Multiplies every tensor of a list or tuple in place by a number or a 0-d tensor.", py::arg("self"),
      py::arg("scalar"));
}

}  // namespace

void bind_ops(py::module_& m, TensorClass& cls) {
  bind_creation(m);
  bind_random(m, cls);
  bind_pointwise(m, cls);
  bind_reductions(m, cls);
  bind_linalg_nn(m, cls);
  bind_join_index(m, cls);
  bind_foreach(m);
  // View functions (the methods are in tensor.cpp).
  m.def("reshape", [](const Tensor& t, const py::object& s) { return t.reshape(to_shape(s, "reshape(): shape")); },
        py::arg("input"), py::arg("shape"));
  m.def("permute", [](const Tensor& t, const py::object& d) { return t.permute(to_shape(d, "permute(): dims")); },
        py::arg("input"), py::arg("dims"));
  m.def("transpose", &rtx::transpose, py::arg("input"), py::arg("dim0"), py::arg("dim1"));
  m.def("squeeze", &rtx::squeeze, py::arg("input"), py::arg("dim") = py::none());
  m.def("unsqueeze", &rtx::unsqueeze, py::arg("input"), py::arg("dim"));
  m.def("flatten", &rtx::flatten, py::arg("input"), py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  m.def("narrow", &rtx::narrow, py::arg("input"), py::arg("dim"), py::arg("start"), py::arg("length"));
  m.def("diagonal", &rtx::diagonal, py::arg("input"), py::arg("offset") = 0, py::arg("dim1") = 0, py::arg("dim2") = 1);
  m.def("clone", &rtx::clone, py::arg("input"));
  m.def("t", [](const Tensor& x) { return x.t(); }, py::arg("input"));
  m.def("numel", &rtx::Tensor::numel, py::arg("input"));
  m.def("is_floating_point", &rtx::Tensor::is_floating_point, py::arg("input"));
  m.def("is_tensor", [](py::handle obj) { return py::isinstance<Tensor>(obj); }, py::arg("obj"));
  bind_rearrange(m, cls);
  bind_composite_ops(m, cls);
  bind_aliases(m, cls);
}

}  // namespace rtx::python
