// Front-ends of the loss-scaling ops (rtx/amp.h): argument checks, gradients grouped by dtype for
// the fused kernels, non-contiguous gradients staged through contiguous copies.
#include <algorithm>
#include <vector>

#include "dispatch/amp.h"
#include "ops/internal.h"
#include "rtx/amp.h"

namespace rtx::amp {
namespace {

constexpr const char* kUnscale = "_amp_foreach_non_finite_check_and_unscale_";
constexpr const char* kUpdate = "_amp_update_scale_";

void check_scalar_tensor(const char* op, const char* name, const Tensor& t, DType dtype) {
  rtx::detail::check_defined(t, op, name);
  RTX_CHECK(t.numel() == 1 && t.dtype() == dtype, ValueError, "[{}] {} must be a 1-element {} tensor, got {} {}", op,
            name, dtype, t.dtype(), rtx::detail::shape_str(t.sizes()));
}

void check_same_device(const char* op, const char* name, const Tensor& t, const char* other_name, const Tensor& other) {
  RTX_CHECK(t.device() == other.device(), DeviceError, "[{}] {} is on {} but {} is on {}", op, name, t.device(),
            other_name, other.device());
}

}  // namespace

void non_finite_check_and_unscale_(const TensorList& grads, Tensor& found_inf, const Tensor& inv_scale) {
  check_scalar_tensor(kUnscale, "found_inf", found_inf, kFloat32);
  check_scalar_tensor(kUnscale, "inv_scale", inv_scale, kFloat32);
  check_same_device(kUnscale, "inv_scale", inv_scale, "found_inf", found_inf);
  std::vector<DType> dtypes;
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    RTX_CHECK(g.defined(), ValueError, "[{}] gradient {} is an undefined tensor", kUnscale, i);
    RTX_CHECK(g.is_floating_point(), DTypeError, "[{}] gradient {} has dtype {}; only float gradients can be unscaled",
              kUnscale, i, g.dtype());
    RTX_CHECK(g.device() == found_inf.device(), DeviceError, "[{}] gradient {} is on {} but found_inf is on {}",
              kUnscale, i, g.device(), found_inf.device());
    if (std::find(dtypes.begin(), dtypes.end(), g.dtype()) == dtypes.end()) dtypes.push_back(g.dtype());
  }
  NoGradGuard no_grad;
  for (DType dtype : dtypes) {
    TensorList group, staged_from;
    for (const Tensor& g : grads) {
      if (g.dtype() != dtype) continue;
      group.push_back(g.is_contiguous() ? g : g.contiguous());
      staged_from.push_back(g);
    }
    kernels::non_finite_check_and_unscale_kernel.get(found_inf.device())(group, found_inf, inv_scale);
    for (size_t k = 0; k < group.size(); ++k) {
      if (group[k].is_same(staged_from[k])) autograd::bump_version(group[k]);
      else staged_from[k].copy_(group[k]);
    }
  }
  autograd::bump_version(found_inf);
}

void update_scale_(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                   double backoff_factor, int64_t growth_interval) {
  check_scalar_tensor(kUpdate, "scale", scale, kFloat32);
  check_scalar_tensor(kUpdate, "growth_tracker", growth_tracker, kInt32);
  check_scalar_tensor(kUpdate, "found_inf", found_inf, kFloat32);
  check_same_device(kUpdate, "growth_tracker", growth_tracker, "scale", scale);
  check_same_device(kUpdate, "found_inf", found_inf, "scale", scale);
  kernels::update_scale_kernel.get(scale.device())(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                                  growth_interval);
  autograd::bump_version(scale);
  autograd::bump_version(growth_tracker);
}

}  // namespace rtx::amp
