// sgd_update and sgd_update_multi: PyTorch's SGD rule (momentum, dampening, Nesterov, weight decay,
// maximize, master weights) through the fused kernels (kernels/common/sgd_step.h): the parameters of
// one device and dtype whose momentum buffers are all new, or all not, are one kernel call.
#include <tuple>

#include "check_update.h"
#include "multi_step.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx::optim {
namespace {

void sgd_update_lists(const char* op, const TensorList& params, const TensorList& grads, TensorList& buffers,
                      TensorList& masters, const SgdOptions& o, const DeviceScalars& scalars) {
  validate(o);
  const size_t n = params.size();
  detail::check_lists(op, params, grads);
  detail::size_state_list(op, "momentum_buffers", buffers, n);
  detail::size_state_list(op, "master_params", masters, n);
  const bool momentum = o.momentum != 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    detail::check_param_and_grad(op, p, grads[i]);
    if (momentum)
      detail::check_state(op, "momentum_buffer", buffers[i], p, detail::state_dtype(p, o.master_weights));
    if (detail::keeps_master(p, o.master_weights)) detail::check_state(op, "master_param", masters[i], p, kFloat32);
  }
  NoGradGuard no_grad;
  std::vector<bool> first(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    if (momentum && !buffers[i].defined()) {
      buffers[i] = zeros(p.sizes(), TensorOptions(detail::state_dtype(p, o.master_weights), p.device()));
      first[i] = true;
    }
    if (detail::keeps_master(p, o.master_weights) && !masters[i].defined())
      masters[i] = p.detach().to(kFloat32, false, /*copy=*/true);
  }
  const auto key_of = [&](size_t i) { return std::make_tuple(params[i].device(), params[i].dtype(), bool(first[i])); };
  for (const auto& bucket : detail::buckets<std::tuple<Device, DType, bool>>(n, key_of)) {
    const Tensor& lead = params[bucket[0]];
    const bool master = detail::keeps_master(lead, o.master_weights);
    const detail::ResolvedScalars resolved(op, scalars, lead.device(), o.lr);
    TensorList p, g, b, masters_used;
    detail::Staging staging;
    for (size_t i : bucket) {
      staging.add(p, params[i], true);
      staging.add(g, grads[i], scalars.grad_scale.defined());
      if (momentum) staging.add(b, buffers[i], true);
      if (master) staging.add(masters_used, masters[i], true);
    }
    const kernels::SgdStep step{resolved.host_lr(), o.momentum, o.dampening, o.weight_decay,
                                o.nesterov,         o.maximize, first[bucket[0]]};
    kernels::sgd_multi_step_kernel.get(lead.device())({p, g, masters_used, b}, step, resolved.pointers());
    staging.finish();
  }
}

}  // namespace

void sgd_update_multi(const TensorList& params, const TensorList& grads, TensorList& momentum_buffers,
                      TensorList& master_params, const SgdOptions& options, const DeviceScalars& scalars) {
  sgd_update_lists("sgd_update_multi", params, grads, momentum_buffers, master_params, options, scalars);
}

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdOptions& o) {
  RTX_CHECK(!o.master_weights, ValueError, "[sgd_update] master weights need sgd_update_multi, which keeps them");
  TensorList buffers{momentum_buffer}, masters;
  sgd_update_lists("sgd_update", {param}, {grad}, buffers, masters, o, {});
  momentum_buffer = buffers[0];
}

}  // namespace rtx::optim
