// sgd_update: PyTorch's SGD rule (momentum, dampening, Nesterov, weight decay, maximize) through
// in-place ops, so it runs on every device.
#include "check_update.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"
#include "rtx/optim.h"

namespace rtx::optim {

void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdOptions& o) {
  validate(o);
  detail::check_param_and_grad("sgd_update", param, grad);
  detail::check_state("sgd_update", "momentum_buffer", momentum_buffer, param);
  NoGradGuard no_grad;
  Tensor d = o.maximize ? neg(grad) : grad;
  if (o.weight_decay != 0) d = add(d, param, o.weight_decay);
  if (o.momentum != 0) {
    if (!momentum_buffer.defined()) {
      momentum_buffer = d.clone();
    } else {
      momentum_buffer.mul_(o.momentum);
      add_(momentum_buffer, d, 1 - o.dampening);
    }
    d = o.nesterov ? add(d, momentum_buffer, o.momentum) : momentum_buffer;
  }
  add_(param, d, -o.lr);
}

}  // namespace rtx::optim
