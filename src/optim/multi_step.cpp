// The helpers of the multi-tensor updates (multi_step.h).
#include "multi_step.h"

#include "autograd/function.h"
#include "core/check.h"
#include "core/shape.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx::optim::detail {

void check_lists(const char* op, const TensorList& params, const TensorList& grads) {
  RTX_CHECK(grads.size() == params.size(), ValueError, "[{}] got {} gradients for {} parameters", op, grads.size(),
            params.size());
}

void size_state_list(const char* op, const char* name, TensorList& list, size_t n) {
  if (list.empty()) list.resize(n);
  RTX_CHECK(list.size() == n, ValueError, "[{}] {} has {} entries for {} parameters", op, name, list.size(), n);
}

void Staging::add(TensorList& list, const Tensor& t, bool written) {
  const Tensor used = t.is_contiguous() ? t : t.contiguous();
  list.push_back(used);
  if (written) written_.emplace_back(t, used);
}

void Staging::finish() {
  for (auto& [t, used] : written_) {
    if (used.is_same(t)) autograd::bump_version(t);
    else t.copy_(used);
  }
  written_.clear();
}

namespace {

// t as a 1-element tensor of dtype on device (t itself when it is one already).
Tensor scalar_on(const char* op, const char* name, const Tensor& t, DType dtype, Device device) {
  RTX_CHECK(t.numel() == 1, ValueError, "[{}] {} must hold one element, got shape {}", op, name,
            rtx::detail::shape_str(t.sizes()));
  return t.to(device, dtype);
}

}  // namespace

ResolvedScalars::ResolvedScalars(const char* op, const DeviceScalars& s, Device device, double options_lr)
    : host_lr_(options_lr) {
  if (s.lr.defined()) {
    RTX_CHECK(s.lr.is_floating_point(), DTypeError, "[{}] a tensor lr must be a float tensor, got {}", op,
              s.lr.dtype());
    if (s.lr.is_cpu() && !device.is_cpu()) {
      RTX_CHECK(s.lr.numel() == 1, ValueError, "[{}] lr must hold one element, got shape {}", op,
                rtx::detail::shape_str(s.lr.sizes()));
      host_lr_ = s.lr.item<double>();
    } else {
      lr_ = scalar_on(op, "lr", s.lr, kFloat64, device);
      pointers_.lr = lr_.data_ptr<double>();
    }
  }
  if (s.grad_scale.defined()) {
    RTX_CHECK(s.grad_scale.dtype() == kFloat32, DTypeError, "[{}] grad_scale must be a float32 tensor, got {}", op,
              s.grad_scale.dtype());
    grad_scale_ = scalar_on(op, "grad_scale", s.grad_scale, kFloat32, device);
    pointers_.grad_scale = grad_scale_.data_ptr<float>();
  }
  if (s.found_inf.defined()) {
    RTX_CHECK(s.found_inf.dtype() == kFloat32, DTypeError, "[{}] found_inf must be a float32 tensor, got {}", op,
              s.found_inf.dtype());
    found_inf_ = scalar_on(op, "found_inf", s.found_inf, kFloat32, device);
    pointers_.found_inf = found_inf_.data_ptr<float>();
  }
}

}  // namespace rtx::optim::detail
