// Front-ends of the multi-tensor ops (PyTorch's _foreach_norm and _foreach_mul_): every tensor
// checked before any work, errors naming the tensor's position; the tensors grouped by device and
// dtype for one kernel call per group, non-contiguous ones staged through contiguous copies. A
// tensor whose result autograd records, or (for the product) that is not floating point, goes
// through the one-tensor op (norm, mul_), which records it and keeps its dtype rules.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dispatch/foreach.h"
#include "ops/internal.h"

namespace rtx {
namespace {

using detail::shape_str;

constexpr const char* kNorm = "_foreach_norm";
constexpr const char* kMul = "_foreach_mul_";

void check_list(const char* op, const TensorList& tensors) {
  RTX_CHECK(!tensors.empty(), ValueError, "[{}] expects a non-empty list of tensors", op);
  for (size_t i = 0; i < tensors.size(); ++i)
    RTX_CHECK(tensors[i].defined(), ValueError, "[{}] tensor {} of the list is undefined", op, i);
}

// Positions in the list of the tensors of one device and dtype, in list order.
struct Group {
  Device device;
  DType dtype;
  std::vector<size_t> members;
};

// The positions `which` grouped by the device of tensors[i] and dtype_of(tensors[i]).
template <typename DTypeOf>
std::vector<Group> group_tensors(const TensorList& tensors, const std::vector<size_t>& which, const DTypeOf& dtype_of) {
  std::vector<Group> groups;
  for (size_t i : which) {
    const Device device = tensors[i].device();
    const DType dtype = dtype_of(tensors[i]);
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& group) { return group.device == device && group.dtype == dtype; });
    if (g == groups.end()) groups.push_back({device, dtype, {i}});
    else g->members.push_back(i);
  }
  return groups;
}

// Raises unless tensors[i] may be overwritten in place with a result of dtype result.
void check_writable(const TensorList& tensors, size_t i, DType result) {
  const Tensor& t = tensors[i];
  RTX_CHECK(detail::can_cast(result, t.dtype()), DTypeError,
            "[{}] tensor {} (shape {}) has dtype {}, but its product has dtype {}, which cannot be written into it",
            kMul, i, shape_str(t.sizes()), t.dtype(), result);
  RTX_CHECK(result != kBool, DTypeError,
            "[{}] tensor {} (shape {}) has dtype bool, and so has the scalar: products of bools are not supported; "
            "convert with .to(rtx::kInt64) first",
            kMul, i, shape_str(t.sizes()));
  RTX_CHECK(!(is_grad_enabled() && t.requires_grad() && t.is_leaf()), Error,
            "[{}] tensor {} (shape {}) is a leaf that requires grad, which cannot be modified in place; do it inside "
            "NoGradGuard (as optimizers do) or on a clone",
            kMul, i, shape_str(t.sizes()));
  autograd::check_inplace(t, kMul);
}

// The product of every tensor of a checked list with one scalar, in place: tensors that `fused`
// accepts go through the kernel, grouped by device and dtype (run(group tensors, device, dtype)),
// the others one by one (one(tensor)).
template <typename Fused, typename One, typename Run>
void multiply_each(TensorList& tensors, const Fused& fused, const One& one, const Run& run) {
  std::vector<size_t> kernel_members, one_by_one;
  for (size_t i = 0; i < tensors.size(); ++i) (fused(tensors[i]) ? kernel_members : one_by_one).push_back(i);
  for (size_t i : kernel_members) detail::check_no_internal_overlap(tensors[i], kMul);
  for (size_t i : one_by_one) one(tensors[i]);
  for (const Group& g : group_tensors(tensors, kernel_members, [](const Tensor& t) { return t.dtype(); })) {
    TensorList staged;
    for (size_t i : g.members) staged.push_back(detail::contiguous_raw(tensors[i]));
    run(staged, g.device, g.dtype);
    for (size_t k = 0; k < staged.size(); ++k) {
      const Tensor& t = tensors[g.members[k]];
      if (!staged[k].is_same(t)) detail::copy_raw(t, staged[k]);
      autograd::bump_version(t);
    }
  }
}

// The type the kernels multiply in: float for the 16-bit floats and float32, float64 for float64.
DType compute_dtype(DType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

}  // namespace

TensorList foreach_norm(const TensorList& tensors, double ord, std::optional<DType> dtype) {
  check_list(kNorm, tensors);
  RTX_CHECK(!std::isnan(ord), ValueError, "[{}] ord must be a number (got NaN)", kNorm);
  RTX_CHECK(!dtype || is_floating(*dtype), DTypeError, "[{}] dtype must be a floating point type, got {}", kNorm,
            *dtype);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    RTX_CHECK(t.is_floating_point(), DTypeError,
              "[{}] tensor {} (shape {}, on {}) has dtype {}; norms need floating point tensors", kNorm, i,
              shape_str(t.sizes()), t.device(), t.dtype());
    RTX_CHECK(!dtype || promote_types(t.dtype(), *dtype) == *dtype, DTypeError,
              "[{}] tensor {} (shape {}) has dtype {}, which does not convert to dtype {} without narrowing", kNorm, i,
              shape_str(t.sizes()), t.dtype(), *dtype);
    RTX_CHECK(!(std::isinf(ord) && t.numel() == 0), IndexError,
              "[{}] tensor {} is empty (shape {}): its norm of order {} has no identity", kNorm, i,
              shape_str(t.sizes()), ord);
  }
  TensorList out(tensors.size());
  std::vector<size_t> fused;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_grad_enabled() && t.requires_grad()) {
      autocast::ExcludeGuard keeps_the_dtype;
      out[i] = norm(dtype ? t.to(*dtype) : t, ord);
    } else {
      fused.push_back(i);
    }
  }
  for (const Group& g : group_tensors(tensors, fused, [&](const Tensor& t) { return dtype.value_or(t.dtype()); })) {
    TensorList inputs;
    for (size_t i : g.members) inputs.push_back(detail::contiguous_raw(detail::cast(tensors[i], g.dtype)));
    const Tensor result = detail::make_tensor({static_cast<int64_t>(inputs.size())}, g.dtype, g.device);
    kernels::foreach_norm_kernel.get(g.device)(result, inputs, ord);
    for (size_t k = 0; k < g.members.size(); ++k)
      out[g.members[k]] = detail::make_view(result, {}, {}, static_cast<int64_t>(k));
  }
  return out;
}

void foreach_mul_(TensorList& tensors, const Tensor& scalar) {
  check_list(kMul, tensors);
  detail::check_defined(scalar, kMul, "scalar");
  RTX_CHECK(scalar.dim() == 0, ShapeError, "[{}] the scalar must be a 0-d tensor, got one of shape {}", kMul,
            shape_str(scalar.sizes()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    RTX_CHECK(t.device() == scalar.device() || scalar.is_cpu(), DeviceError,
              "[{}] tensor {} (shape {}) is on {} but the scalar is on {}; a scalar is on the tensors' device or "
              "the CPU",
              kMul, i, shape_str(t.sizes()), t.device(), scalar.device());
    check_writable(tensors, i, result_type(t, scalar));
  }
  // A scalar within one of the tensors would change while they are multiplied.
  const bool inside =
      std::any_of(tensors.begin(), tensors.end(), [&](const Tensor& t) { return t.shares_storage(scalar); });
  const Tensor s = inside ? scalar.clone() : scalar;
  multiply_each(
      tensors, [&](const Tensor& t) { return t.is_floating_point() && !autograd::inplace_needs_grad(t, {s}); },
      [&](Tensor& t) { mul_(t, s); },
      [&](const TensorList& group, Device device, DType dtype) {
        // A CPU scalar with tensors elsewhere is host data: its value travels with the launch.
        if (s.device() == device)
          kernels::foreach_mul_kernel.get(device)(group, detail::cast(s, compute_dtype(dtype)), 0.0);
        else
          kernels::foreach_mul_kernel.get(device)(group, Tensor(), s.item<double>());
      });
}

void foreach_mul_(TensorList& tensors, const Scalar& scalar) {
  check_list(kMul, tensors);
  for (size_t i = 0; i < tensors.size(); ++i) check_writable(tensors, i, result_type(tensors[i], scalar));
  multiply_each(
      tensors, [](const Tensor& t) { return t.is_floating_point() && !autograd::inplace_needs_grad(t, {}); },
      [&](Tensor& t) { mul_(t, scalar); },
      [&](const TensorList& group, Device device, DType) {
        kernels::foreach_mul_kernel.get(device)(group, Tensor(), scalar.to_double());
      });
}

}  // namespace rtx
