// The ops built from other ops (rtx/ops.h's last sections) for Python, with PyTorch's names and
// arguments: elementwise (nan_to_num, logit, xlogy, copysign, ...), statistics (var_mean, median,
// quantile, ...), counting and searching (unique, bincount, searchsorted, ...), joining and splitting (hstack, tensor_split, block_diag, ...) and matrices (diag,
// tril_indices, kron, tensordot, cross, cdist, ...).
#include "bindings.h"

namespace rtx::python {
namespace {

// A tensor operand that PyTorch also takes as a Python number: the number as a 0-d CPU tensor, which
// combines with a tensor on any device and ranks below it in type promotion.
Tensor tensor_operand(py::handle obj, const char* what) {
  if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
  try {
    return rtx::scalar_tensor(obj.cast<Scalar>());
  } catch (const py::cast_error&) {
    throw py::type_error(std::string(what) + " must be a Tensor or a number, not " + type_name(obj));
  }
}

// Binds f(Tensor, Tensor) as a function and a method whose second operand may be a number, with the
// in-place method name_ writing the result into self.
template <typename F>
void def_binary(py::module_& m, TensorClass& cls, const char* name, const char* other_name, F f) {
  const std::string what = std::string(name) + "(): " + other_name;
  const auto op = [f, what](py::handle a, py::handle b) {
    return f(tensor_operand(a, what.c_str()), tensor_operand(b, what.c_str()));
  };
  m.def(name, op, py::arg("input"), py::arg(other_name));
  cls.def(name, op, py::arg(other_name));
  const std::string in_place = std::string(name) + "_";
  cls.def(in_place.c_str(), [f, what, in_place](Tensor& self, py::handle b) -> Tensor& {
    const Tensor result = f(self, tensor_operand(b, what.c_str()));
    if (is_floating(result.dtype()) && !is_floating(self.dtype()))
      throw rtx::DTypeError("[" + in_place + "] the result is " + dtype_name(result.dtype()) +
                            ", which cannot be written in place into a tensor of " + dtype_name(self.dtype()));
    return self.copy_(result);
  }, py::arg(other_name));
}

// An int or a sequence of ints (tensor_split's indices, rot90's dims); a 0-d or 1-d integer tensor
// counts as its values.
Shape int_list(const py::object& obj, const char* what) {
  if (py::isinstance<Tensor>(obj)) {
    const Tensor t = obj.cast<Tensor>();
    if (!is_integral(t.dtype()) || t.dim() > 1)
      throw py::type_error(std::string(what) + " must be ints or an integer tensor of at most 1 dim");
    return t.flatten().tolist<int64_t>();
  }
  return to_shape(obj, what);
}

void bind_elementwise(py::module_& m, TensorClass& cls) {
  def_op(m, cls, "nan_to_num", &rtx::nan_to_num, py::arg("nan") = 0.0, py::arg("posinf") = py::none(),
         py::arg("neginf") = py::none());
  cls.def("nan_to_num_", [](Tensor& x, double nan, std::optional<double> posinf, std::optional<double> neginf)
                             -> Tensor& { return x.copy_(rtx::nan_to_num(x, nan, posinf, neginf)); },
          py::arg("nan") = 0.0, py::arg("posinf") = py::none(), py::arg("neginf") = py::none());
  def_op(m, cls, "logit", &rtx::logit, py::arg("eps") = py::none());
  cls.def("logit_", [](Tensor& x, std::optional<double> eps) -> Tensor& { return x.copy_(rtx::logit(x, eps)); },
          py::arg("eps") = py::none());
  def_binary(m, cls, "xlogy", "other", &rtx::xlogy);
  def_binary(m, cls, "copysign", "other", &rtx::copysign);
  def_binary(m, cls, "float_power", "exponent", &rtx::float_power);
  def_binary(m, cls, "fmax", "other", &rtx::fmax);
  def_binary(m, cls, "fmin", "other", &rtx::fmin);
  def_op(m, cls, "heaviside", &rtx::heaviside, py::arg("values"));
  for (const auto& [name, f] : {std::pair{"frac", &rtx::frac}, std::pair{"deg2rad", &rtx::deg2rad},
                                std::pair{"rad2deg", &rtx::rad2deg}}) {
    def_op(m, cls, name, f);
    cls.def((std::string(name) + "_").c_str(), [f = f](Tensor& x) -> Tensor& { return x.copy_(f(x)); });
  }
  def_op(m, cls, "signbit", &rtx::signbit);
  def_op(m, cls, "isposinf", &rtx::isposinf);
  def_op(m, cls, "isneginf", &rtx::isneginf);
}

void bind_statistics(py::module_& m, TensorClass& cls) {
  const auto moment_mean = [](auto op) {
    return [op](const Tensor& x, const py::object& dim, std::optional<bool> unbiased, bool keepdim,
                std::optional<int64_t> correction) {
      const TensorList r = op(x, dims_arg(dim, "dim"), correction_of(unbiased, correction), keepdim);
      return py::make_tuple(r[0], r[1]);
    };
  };
  const auto moment_args = [](py::module_& mod, const char* name, auto f) {
    mod.def(name, f, py::arg("input"), py::arg("dim") = py::none(), py::arg("unbiased") = py::none(),
            py::arg("keepdim") = false, py::kw_only(), py::arg("correction") = py::none());
  };
  moment_args(m, "var_mean", moment_mean(&rtx::var_mean));
  moment_args(m, "std_mean", moment_mean(&rtx::std_mean));
  py::object min_max = py::module_::import("collections").attr("namedtuple")("aminmax", py::make_tuple("min", "max"));
  m.attr("_MinMax") = min_max;
  def_op(m, cls, "aminmax", [min_max](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    const TensorList r = rtx::aminmax(x, dim, keepdim);
    return min_max(r[0], r[1]);
  }, py::kw_only(), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  for (const auto& [name, f] : {std::pair{"nansum", &rtx::nansum}, std::pair{"nanmean", &rtx::nanmean}}) {
    def_op(m, cls, name, [f = f](const Tensor& x, const py::object& dim, bool keepdim, std::optional<DType> dtype) {
      return f(dtype ? x.to(*dtype) : x, dims_arg(dim, "dim"), keepdim);
    }, py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(), py::arg("dtype") = py::none());
  }
  def_op(m, cls, "kthvalue", [](const Tensor& x, int64_t k, int64_t dim, bool keepdim) {
    return values_indices(rtx::kthvalue(x, k, dim, keepdim));
  }, py::arg("k"), py::arg("dim") = -1, py::arg("keepdim") = false);
  // median(x) is a 0-d tensor; median(x, dim) gives values and indices.
  using Flat = Tensor (*)(const Tensor&);
  using AlongDim = ValuesIndices (*)(const Tensor&, int64_t, bool);
  for (const auto& [name, flat, along] : {std::tuple<const char*, Flat, AlongDim>{"median", &rtx::median, &rtx::median},
                                          std::tuple<const char*, Flat, AlongDim>{"nanmedian", &rtx::nanmedian,
                                                                                  &rtx::nanmedian}}) {
    def_op(m, cls, name, [flat = flat, along = along](const Tensor& x, std::optional<int64_t> dim,
                                                      bool keepdim) -> py::object {
      if (!dim) return py::cast(flat(x));
      return values_indices(along(x, *dim, keepdim));
    }, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  }
  for (const auto& [name, f] : {std::pair{"quantile", &rtx::quantile}, std::pair{"nanquantile", &rtx::nanquantile}}) {
    def_op(m, cls, name, [f = f](const Tensor& x, const py::object& q, std::optional<int64_t> dim, bool keepdim,
                                 const std::string& interpolation) {
      const TensorOptions like_x(x.dtype());
      const Tensor qs = py::isinstance<Tensor>(q)      ? q.cast<Tensor>()
                        : PySequence_Check(q.ptr()) ? rtx::tensor(q.cast<std::vector<double>>(), like_x)
                                                    : rtx::scalar_tensor(q.cast<double>(), like_x);
      return f(x, qs, dim, keepdim, interpolation);
    }, py::arg("q"), py::arg("dim") = py::none(), py::arg("keepdim") = false, py::kw_only(),
           py::arg("interpolation") = "linear");
  }
}

void bind_search(py::module_& m, TensorClass& cls) {
  // unique(x) is the values; return_inverse and return_counts add the others, in that order.
  const auto pick = [](const TensorList& r, bool inverse, bool counts) -> py::object {
    if (!inverse && !counts) return py::cast(r[0]);
    py::list out;
    out.append(r[0]);
    if (inverse) out.append(r[1]);
    if (counts) out.append(r[2]);
    return py::tuple(out);
  };
  def_op(m, cls, "unique", [pick](const Tensor& x, bool, bool inverse, bool counts, const py::object& dim) {
    if (!dim.is_none()) throw rtx::ValueError("[unique] dim is not supported; unique works on the flattened tensor");
    return pick(rtx::unique(x), inverse, counts);
  }, py::arg("sorted") = true, py::arg("return_inverse") = false, py::arg("return_counts") = false,
         py::arg("dim") = py::none());
  def_op(m, cls, "unique_consecutive", [pick](const Tensor& x, bool inverse, bool counts, const py::object& dim) {
    if (!dim.is_none())
      throw rtx::ValueError("[unique_consecutive] dim is not supported; it works on the flattened tensor");
    return pick(rtx::unique_consecutive(x), inverse, counts);
  }, py::arg("return_inverse") = false, py::arg("return_counts") = false, py::arg("dim") = py::none());
  def_op(m, cls, "bincount", [](const Tensor& x, std::optional<Tensor> weights, int64_t minlength) {
    return rtx::bincount(x, weights.value_or(Tensor()), minlength);
  }, py::arg("weights") = py::none(), py::arg("minlength") = 0);
  m.def("searchsorted", [](const Tensor& seq, py::handle values, bool out_int32, bool right,
                           std::optional<std::string> side, std::optional<Tensor> sorter) {
    if (side && *side != "left" && *side != "right")
      throw rtx::ValueError("[searchsorted] side must be 'left' or 'right', got '" + *side + "'");
    if (side && right && *side == "left")
      throw rtx::ValueError("[searchsorted] side='left' and right=True contradict each other");
    return rtx::searchsorted(seq, tensor_operand(values, "searchsorted(): values"), right || side == "right",
                             out_int32, sorter.value_or(Tensor()));
  }, py::arg("sorted_sequence"), py::arg("input"), py::kw_only(), py::arg("out_int32") = false,
        py::arg("right") = false, py::arg("side") = py::none(), py::arg("sorter") = py::none());
  m.def("bucketize", [](py::handle x, const Tensor& boundaries, bool out_int32, bool right) {
    return rtx::bucketize(tensor_operand(x, "bucketize(): input"), boundaries, right, out_int32);
  }, py::arg("input"), py::arg("boundaries"), py::kw_only(), py::arg("out_int32") = false, py::arg("right") = false);
}

void bind_stacking(py::module_& m) {
  // atleast_nd(t) is a tensor; atleast_nd(a, b, ...) or of a list, a tuple of them.
  for (const auto& [name, f] : {std::pair{"atleast_1d", &rtx::atleast_1d}, std::pair{"atleast_2d", &rtx::atleast_2d},
                                std::pair{"atleast_3d", &rtx::atleast_3d}}) {
    m.def(name, [f = f](const py::args& args) -> py::object {
      if (args.size() == 1 && py::isinstance<Tensor>(args[0])) return py::cast(f(args[0].cast<Tensor>()));
      const bool one_list = args.size() == 1;
      py::list out;
      for (const Tensor& t : (one_list ? args[0] : py::object(args)).cast<TensorList>()) out.append(f(t));
      return py::tuple(out);
    });
  }
  for (const auto& [name, f] : {std::pair{"hstack", &rtx::hstack}, std::pair{"vstack", &rtx::vstack},
                                std::pair{"row_stack", &rtx::vstack}, std::pair{"dstack", &rtx::dstack},
                                std::pair{"column_stack", &rtx::column_stack}}) {
    m.def(name, f, py::arg("tensors"));
  }
  m.def("block_diag", [](const py::args& tensors) { return rtx::block_diag(py::object(tensors).cast<TensorList>()); });
  m.def("cartesian_prod", [](const py::args& tensors) {
    return rtx::cartesian_prod(py::object(tensors).cast<TensorList>());
  });
}

void bind_matrix(py::module_& m, TensorClass& cls) {
  def_op(m, cls, "tensor_split", [](const Tensor& x, const py::object& split, int64_t dim) {
    const bool sections = PyLong_Check(split.ptr()) || (py::isinstance<Tensor>(split) && split.cast<Tensor>().dim() == 0);
    const TensorList pieces = sections ? rtx::tensor_split(x, int_list(split, "tensor_split(): sections")[0], dim)
                                       : rtx::tensor_split(x, int_list(split, "tensor_split(): indices"), dim);
    return py::tuple(py::cast(pieces));
  }, py::arg("indices_or_sections"), py::arg("dim") = 0);
  using BySections = TensorList (*)(const Tensor&, int64_t);
  using ByIndices = TensorList (*)(const Tensor&, const Shape&);
  for (const auto& [name, sections, indices] :
       {std::tuple<const char*, BySections, ByIndices>{"hsplit", &rtx::hsplit, &rtx::hsplit},
        std::tuple<const char*, BySections, ByIndices>{"vsplit", &rtx::vsplit, &rtx::vsplit},
        std::tuple<const char*, BySections, ByIndices>{"dsplit", &rtx::dsplit, &rtx::dsplit}}) {
    def_op(m, cls, name, [sections = sections, indices = indices](const Tensor& x, const py::object& split) {
      const TensorList pieces = PyLong_Check(split.ptr()) ? sections(x, split.cast<int64_t>())
                                                          : indices(x, int_list(split, "split(): indices"));
      return py::tuple(py::cast(pieces));
    }, py::arg("indices_or_sections"));
  }
  def_op(m, cls, "diag", &rtx::diag, py::arg("diagonal") = 0);
  def_op(m, cls, "diag_embed", &rtx::diag_embed, py::arg("offset") = 0, py::arg("dim1") = -2, py::arg("dim2") = -1);
  def_op(m, cls, "trace", &rtx::trace);
  for (const auto& [name, f] : {std::pair{"tril_indices", &rtx::tril_indices},
                                std::pair{"triu_indices", &rtx::triu_indices}}) {
    m.def(name, [f = f](int64_t row, int64_t col, int64_t offset, std::optional<DType> dtype,
                        std::optional<Device> device) {
      return f(row, col, offset, TensorOptions(dtype.value_or(kInt64), device.value_or(Device(kCPU))));
    }, py::arg("row"), py::arg("col"), py::arg("offset") = 0, py::kw_only(), py::arg("dtype") = py::none(),
          py::arg("device") = py::none());
  }
  def_op(m, cls, "kron", &rtx::kron, py::arg("other"));
  // dims: n (a's last n against b's first n), a pair of dim lists, or a [2, n] tensor of them.
  m.def("tensordot", [](const Tensor& a, const Tensor& b, const py::object& dims) {
    if (PyLong_Check(dims.ptr())) return rtx::tensordot(a, b, dims.cast<int64_t>());
    if (py::isinstance<Tensor>(dims) && dims.cast<Tensor>().dim() == 0)
      return rtx::tensordot(a, b, dims.cast<Tensor>().item().to_int());
    const py::sequence pair = dims.cast<py::sequence>();  // a tensor of 2 rows is a sequence of them, too
    if (pair.size() != 2) throw py::value_error("tensordot(): dims must be an int or a pair of dim lists");
    return rtx::tensordot(a, b, int_list(pair[0], "tensordot(): dims"), int_list(pair[1], "tensordot(): dims"));
  }, py::arg("a"), py::arg("b"), py::arg("dims") = 2);
  def_op(m, cls, "cross", &rtx::cross, py::arg("other"), py::arg("dim") = py::none());
  // compute_mode picks how PyTorch computes p = 2 distances; there is one way here.
  m.def("cdist", [](const Tensor& a, const Tensor& b, double p, const py::object&) { return rtx::cdist(a, b, p); },
        py::arg("x1"), py::arg("x2"), py::arg("p") = 2.0, py::arg("compute_mode") = py::none());
  def_op(m, cls, "rot90", [](const Tensor& x, int64_t k, const py::object& dims) {
    return rtx::rot90(x, k, int_list(dims, "rot90(): dims"));
  }, py::arg("k") = 1, py::arg("dims") = py::make_tuple(0, 1));
  m.def("unflatten", [](const Tensor& t, int64_t dim, const py::object& sizes) {
    return t.unflatten(dim, to_shape(sizes, "unflatten(): sizes"));
  }, py::arg("input"), py::arg("dim"), py::arg("sizes"));
}

// Methods and functions over the ops above: indexed fills and copies, scaled products, and the
// shape and complex-number helpers that real tensors answer trivially.
void bind_methods(py::module_& m, TensorClass& cls) {
  def_op(m, cls, "index_fill", &rtx::index_fill, py::arg("dim"), py::arg("index"), py::arg("value"));
  cls.def("index_fill_", [](Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) -> Tensor& {
    return x.copy_(rtx::index_fill(x, dim, index, value));
  }, py::arg("dim"), py::arg("index"), py::arg("value"));
  def_op(m, cls, "index_copy", &rtx::index_copy, py::arg("dim"), py::arg("index"), py::arg("source"));
  cls.def("index_copy_", [](Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) -> Tensor& {
    return x.copy_(rtx::index_copy(x, dim, index, source));
  }, py::arg("dim"), py::arg("index"), py::arg("source"));
  for (const auto& [name, f] : {std::pair{"addmv", &rtx::addmv}, std::pair{"addr", &rtx::addr}}) {
    def_op(m, cls, name, f, py::arg(name == std::string("addmv") ? "mat" : "vec1"),
           py::arg(name == std::string("addmv") ? "vec" : "vec2"), py::kw_only(), py::arg("beta") = 1,
           py::arg("alpha") = 1);
  }
  def_op(m, cls, "ravel", [](const Tensor& x) { return x.reshape({-1}); });
  def_op(m, cls, "broadcast_to", [](const Tensor& x, const py::object& size) {
    return x.expand(to_shape(size, "broadcast_to(): size"));
  }, py::arg("size"));
  def_op(m, cls, "msort", [](const Tensor& x) { return rtx::sort(x, 0).values; });
  cls.def("sum_to_size", [](const Tensor& x, const py::args& size) {
    return rtx::sum_to(x, shape_args(size, "sum_to_size(): size"));
  });
  // fill_diagonal_: the elements [i, i, ..., i] of a tensor whose dims are all equal (2-d: any
  // shape); wrap continues a tall matrix's diagonal below every (cols + 1)-th row, as numpy does.
  cls.def("fill_diagonal_", [](Tensor& x, const Scalar& value, bool wrap) -> Tensor& {
    if (x.dim() < 2) throw rtx::ShapeError("[fill_diagonal_] expects a tensor of at least 2 dims");
    int64_t step = 0;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (x.dim() > 2 && x.size(d) != x.size(0))
        throw rtx::ShapeError("[fill_diagonal_] all dims must have the same size above 2 dims");
      step += x.stride(d);
    }
    int64_t n = x.size(0);
    for (int64_t d = 1; d < x.dim(); ++d) n = std::min(n, x.size(d));
    if (wrap && x.dim() == 2 && x.size(0) > x.size(1) + 1 && x.is_contiguous())
      n = (x.numel() + x.size(1)) / (x.size(1) + 1);
    Tensor diagonal = rtx::as_strided(x, {n}, {step}, x.storage_offset());
    rtx::fill_(diagonal, value);
    return x;
  }, py::arg("fill_value"), py::arg("wrap") = false);
  def_op(m, cls, "is_complex", [](const Tensor&) { return false; });
  for (const char* name : {"conj", "resolve_conj", "resolve_neg", "conj_physical"}) {
    m.def(name, [](py::object x) { return x; }, py::arg("input"));
    cls.def(name, [](py::object self) { return self; });
  }
  cls.def_property_readonly("real", [](py::object self) { return self; });
  cls.def_property_readonly("imag", [](const Tensor&) -> Tensor {
    throw rtx::DTypeError("[imag] is defined for complex tensors only; rustytorch has no complex dtypes");
  });
}

}  // namespace

void bind_composite_ops(py::module_& m, TensorClass& cls) {
  bind_elementwise(m, cls);
  bind_statistics(m, cls);
  bind_search(m, cls);
  bind_stacking(m);
  bind_matrix(m, cls);
  bind_methods(m, cls);
  m.attr("sgn") = m.attr("sign");
  cls.attr("sgn") = cls.attr("sign");
  cls.attr("sgn_") = cls.attr("sign_");
}

}  // namespace rtx::python
