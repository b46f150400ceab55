// optim::SGD: applies sgd_update_multi to the parameters with a gradient, group by group, keeping
// their momentum buffers and master weights.
#include "multi_step.h"
#include "rtx/optim.h"

namespace rtx::optim {

SGD::SGD(TensorList params, SgdOptions options) : SGD(std::vector<ParamGroup<SgdOptions>>{{std::move(params), options}}) {}

SGD::SGD(std::vector<ParamGroup<SgdOptions>> groups) : OptimizerWithOptions(std::move(groups), "SGD") {}

void SGD::step() {
  for (size_t g = 0; g < num_param_groups(); ++g) {
    TensorList with_grad, grads, buffers, masters;
    for (const Tensor& p : params(g)) {
      if (!p.grad().defined()) continue;
      const auto& tensors = state(p).tensors;
      with_grad.push_back(p);
      grads.push_back(p.grad());
      buffers.push_back(detail::find_state(tensors, "momentum_buffer"));
      masters.push_back(detail::find_state(tensors, "master_param"));
    }
    if (with_grad.empty()) continue;
    sgd_update_multi(with_grad, grads, buffers, masters, options(g));
    for (size_t i = 0; i < with_grad.size(); ++i) {
      auto& tensors = state(with_grad[i]).tensors;
      if (buffers[i].defined()) tensors["momentum_buffer"] = buffers[i];
      if (masters[i].defined()) tensors["master_param"] = masters[i];
    }
  }
}

}  // namespace rtx::optim
