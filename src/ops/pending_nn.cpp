// Placeholder definitions, replaced as the family is implemented.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "ops/internal.h"

namespace rtx {
Tensor softmax(const Tensor& x, int64_t dim) { RTX_THROW(Error, "[softmax] not implemented yet"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { RTX_THROW(Error, "[log_softmax] not implemented yet"); }
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) { RTX_THROW(Error, "[layer_norm] not implemented yet"); }
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps) { RTX_THROW(Error, "[batch_norm] not implemented yet"); }
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) { RTX_THROW(Error, "[embedding] not implemented yet"); }
Tensor dropout(const Tensor& x, double p, bool training) { RTX_THROW(Error, "[dropout] not implemented yet"); }
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction, double label_smoothing) { RTX_THROW(Error, "[cross_entropy] not implemented yet"); }
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, int64_t ignore_index, Reduction reduction) { RTX_THROW(Error, "[nll_loss] not implemented yet"); }
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) { RTX_THROW(Error, "[mse_loss] not implemented yet"); }
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& weight, const Tensor& pos_weight, Reduction reduction) { RTX_THROW(Error, "[binary_cross_entropy_with_logits] not implemented yet"); }
Tensor one_hot(const Tensor& indices, int64_t num_classes) { RTX_THROW(Error, "[one_hot] not implemented yet"); }
}  // namespace rtx

#include "backend/cpu/register.h"
namespace rtx::cpu {
void register_nn_kernels() {}
}  // namespace rtx::cpu
