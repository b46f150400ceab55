// adam_update: PyTorch's Adam/AdamW rule (bias correction, L2 or decoupled weight decay, AMSGrad,
// maximize). Contiguous tensors take the fused kernel (one pass); others go through in-place ops.
#include <cmath>

#include "check_update.h"
#include "autograd/function.h"
#include "dispatch/optim.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"
#include "rtx/optim.h"

namespace rtx {
namespace optim {
namespace {

bool all_contiguous(const TensorList& ts) {
  for (const Tensor& t : ts)
    if (t.defined() && !t.is_contiguous()) return false;
  return true;
}

}  // namespace

void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                 int64_t step, const AdamOptions& o) {
  validate(o);
  detail::check_param_and_grad("adam_update", param, grad);
  RTX_CHECK(step >= 1, ValueError, "[adam_update] step counts this update too and must be at least 1, got {}", step);
  detail::check_state("adam_update", "exp_avg", exp_avg, param);
  detail::check_state("adam_update", "exp_avg_sq", exp_avg_sq, param);
  if (o.amsgrad) detail::check_state("adam_update", "max_exp_avg_sq", max_exp_avg_sq, param);
  NoGradGuard no_grad;
  if (!exp_avg.defined()) exp_avg = zeros_like(param);
  if (!exp_avg_sq.defined()) exp_avg_sq = zeros_like(param);
  if (o.amsgrad && !max_exp_avg_sq.defined()) max_exp_avg_sq = zeros_like(param);
  const auto [beta1, beta2] = o.betas;
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(beta1, t);
  const double bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, t));
  const Tensor max_state = o.amsgrad ? max_exp_avg_sq : Tensor();
  if (all_contiguous({param, grad, exp_avg, exp_avg_sq, max_state})) {
    if (param.numel() > 0)
      kernels::adam_step_kernel.get(param.device())(
          param, grad, exp_avg, exp_avg_sq, max_state,
          {o.lr, beta1, beta2, o.eps, o.weight_decay, o.decoupled_weight_decay, o.maximize, bias_correction1,
           bias_correction2_sqrt});
    for (const Tensor& updated : {param, exp_avg, exp_avg_sq, max_state})
      if (updated.defined()) autograd::bump_version(updated);
    return;
  }
  Tensor g = o.maximize ? neg(grad) : grad;
  if (o.weight_decay != 0) {
    if (o.decoupled_weight_decay)
      param.mul_(1 - o.lr * o.weight_decay);
    else
      g = add(g, param, o.weight_decay);
  }
  lerp_(exp_avg, g, 1 - beta1);
  exp_avg_sq.mul_(beta2);
  addcmul_(exp_avg_sq, g, g, 1 - beta2);
  Tensor second_moment = exp_avg_sq;
  if (o.amsgrad) {
    max_exp_avg_sq.maximum_(exp_avg_sq);
    second_moment = max_exp_avg_sq;
  }
  Tensor denom = sqrt(second_moment);
  denom.div_(bias_correction2_sqrt).add_(o.eps);
  addcdiv_(param, exp_avg, denom, -o.lr / bias_correction1);
}

}  // namespace optim
}  // namespace rtx
