// adam_update and adam_update_multi: PyTorch's Adam/AdamW rule (bias correction, L2 or decoupled
// weight decay, AMSGrad, maximize, master weights) through the fused kernels
// (kernels/common/adam_step.h): the parameters of one device, dtype and (host) step count are one
// kernel call.
#include <tuple>

#include "check_update.h"
#include "multi_step.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx::optim {
namespace {

// The step counts of one call: kept by the host (host non-null) or in tensors (steps non-null).
struct Steps {
  std::vector<int64_t>* host;
  TensorList* tensors;
};

void adam_update_lists(const char* op, const TensorList& params, const TensorList& grads, TensorList& exp_avgs,
                       TensorList& exp_avg_sqs, TensorList& max_exp_avg_sqs, TensorList& masters, const Steps& steps,
                       const AdamOptions& o, const DeviceScalars& scalars) {
  validate(o);
  const size_t n = params.size();
  detail::check_lists(op, params, grads);
  detail::size_state_list(op, "exp_avgs", exp_avgs, n);
  detail::size_state_list(op, "exp_avg_sqs", exp_avg_sqs, n);
  detail::size_state_list(op, "max_exp_avg_sqs", max_exp_avg_sqs, n);
  detail::size_state_list(op, "master_params", masters, n);
  if (steps.host != nullptr) {
    RTX_CHECK(steps.host->size() == n, ValueError, "[{}] got {} step counts for {} parameters", op,
              steps.host->size(), n);
    RTX_CHECK(!scalars.found_inf.defined(), ValueError,
              "[{}] found_inf needs the step counts in tensors (capturable or fused)", op);
  } else {
    detail::size_state_list(op, "steps", *steps.tensors, n);
  }
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    detail::check_param_and_grad(op, p, grads[i]);
    const DType dtype = detail::state_dtype(p, o.master_weights);
    detail::check_state(op, "exp_avg", exp_avgs[i], p, dtype);
    detail::check_state(op, "exp_avg_sq", exp_avg_sqs[i], p, dtype);
    if (o.amsgrad) detail::check_state(op, "max_exp_avg_sq", max_exp_avg_sqs[i], p, dtype);
    if (detail::keeps_master(p, o.master_weights)) detail::check_state(op, "master_param", masters[i], p, kFloat32);
    if (steps.tensors != nullptr && (*steps.tensors)[i].defined()) {
      const Tensor& s = (*steps.tensors)[i];
      RTX_CHECK(s.numel() == 1 && s.dtype() == kFloat32 && s.device() == p.device(), ValueError,
                "[{}] step {} must be a 1-element float32 tensor on {}, got {} {} on {}", op, i, p.device(), s.dtype(),
                rtx::detail::shape_str(s.sizes()), s.device());
    }
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    const TensorOptions state_options(detail::state_dtype(p, o.master_weights), p.device());
    if (!exp_avgs[i].defined()) exp_avgs[i] = zeros(p.sizes(), state_options);
    if (!exp_avg_sqs[i].defined()) exp_avg_sqs[i] = zeros(p.sizes(), state_options);
    if (o.amsgrad && !max_exp_avg_sqs[i].defined()) max_exp_avg_sqs[i] = zeros(p.sizes(), state_options);
    if (detail::keeps_master(p, o.master_weights) && !masters[i].defined())
      masters[i] = p.detach().to(kFloat32, false, /*copy=*/true);
    if (steps.tensors != nullptr && !(*steps.tensors)[i].defined())
      (*steps.tensors)[i] = zeros({}, TensorOptions(kFloat32, p.device()));
  }
  const auto key_of = [&](size_t i) {
    return std::make_tuple(params[i].device(), params[i].dtype(), steps.host != nullptr ? (*steps.host)[i] : 0);
  };
  for (const auto& bucket : detail::buckets<std::tuple<Device, DType, int64_t>>(n, key_of)) {
    const Tensor& first = params[bucket[0]];
    const bool master = detail::keeps_master(first, o.master_weights);
    const detail::ResolvedScalars resolved(op, scalars, first.device(), o.lr);
    TensorList p, g, m, v, vmax, masters_used, steps_used;
    detail::Staging staging;
    for (size_t i : bucket) {
      staging.add(p, params[i], true);
      staging.add(g, grads[i], scalars.grad_scale.defined());
      staging.add(m, exp_avgs[i], true);
      staging.add(v, exp_avg_sqs[i], true);
      if (o.amsgrad) staging.add(vmax, max_exp_avg_sqs[i], true);
      if (master) staging.add(masters_used, masters[i], true);
      if (steps.tensors != nullptr) staging.add(steps_used, (*steps.tensors)[i], true);
    }
    kernels::AdamStep step{resolved.host_lr(), o.betas.first, o.betas.second, o.eps, o.weight_decay,
                           o.decoupled_weight_decay, o.maximize, 1.0, 1.0};
    if (steps.host != nullptr) step.set_step(static_cast<double>((*steps.host)[bucket[0]] + 1));
    kernels::adam_multi_step_kernel.get(first.device())({p, g, masters_used, m, v, vmax, steps_used}, step,
                                                        resolved.pointers());
    staging.finish();
  }
  if (steps.host != nullptr)
    for (int64_t& s : *steps.host) ++s;
}

}  // namespace

void adam_update_multi(const TensorList& params, const TensorList& grads, TensorList& exp_avgs,
                       TensorList& exp_avg_sqs, TensorList& max_exp_avg_sqs, TensorList& master_params,
                       std::vector<int64_t>& steps, const AdamOptions& options, const DeviceScalars& scalars) {
  adam_update_lists("adam_update_multi", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, master_params,
                    {&steps, nullptr}, options, scalars);
}

void adam_update_multi(const TensorList& params, const TensorList& grads, TensorList& exp_avgs,
                       TensorList& exp_avg_sqs, TensorList& max_exp_avg_sqs, TensorList& master_params,
                       TensorList& steps, const AdamOptions& options, const DeviceScalars& scalars) {
  adam_update_lists("adam_update_multi", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, master_params,
                    {nullptr, &steps}, options, scalars);
}

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                 int64_t step, const AdamOptions& o) {
  RTX_CHECK(step >= 1, ValueError, "[adam_update] step counts this update too and must be at least 1, got {}", step);
  RTX_CHECK(!o.master_weights, ValueError, "[adam_update] master weights need adam_update_multi, which keeps them");
  TensorList m{exp_avg}, v{exp_avg_sq}, vmax{max_exp_avg_sq}, masters;
  std::vector<int64_t> steps{step - 1};
  adam_update_lists("adam_update", {param}, {grad}, m, v, vmax, masters, {&steps, nullptr}, o, {});
  exp_avg = m[0];
  exp_avg_sq = v[0];
  max_exp_avg_sq = vmax[0];
}

}  // namespace rtx::optim
