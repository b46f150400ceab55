// nn::LayerNorm: normalization over the trailing dims with a learned scale and shift.
#include "core/check.h"
#include "format.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

LayerNorm::LayerNorm(Shape normalized_shape, double eps) : normalized_shape(std::move(normalized_shape)), eps(eps) {
  RTX_CHECK(!this->normalized_shape.empty(), ValueError, "[LayerNorm] normalized_shape must not be empty");
  for (int64_t s : this->normalized_shape)
    RTX_CHECK(s > 0, ValueError, "[LayerNorm] normalized_shape must hold positive sizes, got {}",
              detail::py_tuple(this->normalized_shape));
  RTX_CHECK(eps > 0, ValueError, "[LayerNorm] eps must be positive, got {}", eps);
  weight = register_parameter("weight", ones(this->normalized_shape));
  bias = register_parameter("bias", zeros(this->normalized_shape));
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

std::string LayerNorm::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine=True", detail::py_tuple(normalized_shape), detail::py_float(eps));
}

}  // namespace rtx::nn
