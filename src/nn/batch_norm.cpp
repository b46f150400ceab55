// nn::BatchNorm1d / BatchNorm2d: batch normalization with running statistics, as PyTorch's layers.
#include <algorithm>

#include "core/check.h"
#include "format.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

BatchNorm::BatchNorm(int64_t num_features, double eps, double momentum, std::vector<int64_t> accepted_dims)
    : num_features(num_features), eps(eps), momentum(momentum), accepted_dims_(std::move(accepted_dims)) {
  RTX_CHECK(num_features > 0, ValueError, "[{}] num_features must be positive, got {}", name(), num_features);
  RTX_CHECK(eps > 0, ValueError, "[{}] eps must be positive, got {}", name(), eps);
  RTX_CHECK(momentum >= 0 && momentum <= 1, ValueError, "[{}] momentum must be in [0, 1], got {}", name(), momentum);
  weight = register_parameter("weight", ones({num_features}));
  bias = register_parameter("bias", zeros({num_features}));
  running_mean = register_buffer("running_mean", zeros({num_features}));
  running_var = register_buffer("running_var", ones({num_features}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
}

Tensor BatchNorm::forward(const Tensor& x) {
  RTX_CHECK(std::find(accepted_dims_.begin(), accepted_dims_.end(), x.dim()) != accepted_dims_.end(), ShapeError,
            "[{}] expected an input of {} dims, got shape {}", name(), fmt::join(accepted_dims_, " or "),
            detail::py_tuple(x.sizes()));
  if (is_training()) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

std::string BatchNorm::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine=True, track_running_stats=True", num_features,
                     detail::py_float(eps), detail::py_float(momentum));
}

BatchNorm1d::BatchNorm1d(int64_t num_features, double eps, double momentum)
    : BatchNorm(num_features, eps, momentum, {2, 3}) {}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum)
    : BatchNorm(num_features, eps, momentum, {4}) {}

}  // namespace rtx::nn
