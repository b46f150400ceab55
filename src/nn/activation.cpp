// nn::ReLU and nn::GELU: elementwise activations as modules.
#include "core/check.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(std::string approximate) : approximate(std::move(approximate)) {
  RTX_CHECK(this->approximate == "none" || this->approximate == "tanh", ValueError,
            "[GELU] approximate must be 'none' or 'tanh', got '{}'", this->approximate);
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }

std::string GELU::extra_repr() const { return "approximate='" + approximate + "'"; }

}  // namespace rtx::nn
