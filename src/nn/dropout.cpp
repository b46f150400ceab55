// nn::Dropout: random zeroing in training mode, identity in evaluation mode.
#include "core/check.h"
#include "format.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

Dropout::Dropout(double p) : p(p) {
  RTX_CHECK(p >= 0 && p <= 1, ValueError, "[Dropout] p must be in [0, 1], got {}", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return "p=" + detail::py_float(p) + ", inplace=False"; }

}  // namespace rtx::nn
