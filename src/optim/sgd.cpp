// optim::SGD: applies sgd_update to every parameter with a gradient, keeping each momentum buffer.
#include "rtx/optim.h"

namespace rtx::optim {

SGD::SGD(TensorList params, SgdOptions options) : SGD(std::vector<ParamGroup<SgdOptions>>{{std::move(params), options}}) {}

SGD::SGD(std::vector<ParamGroup<SgdOptions>> groups) : OptimizerWithOptions(std::move(groups), "SGD") {}

void SGD::step() {
  for (size_t g = 0; g < num_param_groups(); ++g) {
    const SgdOptions& o = options(g);
    for (Tensor p : params(g)) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      auto& tensors = state(p).tensors;
      Tensor buffer = tensors.count("momentum_buffer") ? tensors.at("momentum_buffer") : Tensor();
      sgd_update(p, grad, buffer, o);
      if (buffer.defined()) tensors["momentum_buffer"] = buffer;
    }
  }
}

}  // namespace rtx::optim
