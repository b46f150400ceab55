// nn::Embedding: a lookup table of rows initialized from the standard normal.
#include "core/check.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim), padding_idx(padding_idx) {
  RTX_CHECK(num_embeddings > 0 && embedding_dim > 0, ValueError,
            "[Embedding] num_embeddings and embedding_dim must be positive, got {} and {}", num_embeddings,
            embedding_dim);
  if (padding_idx) {
    RTX_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings, ValueError,
              "[Embedding] padding_idx {} is out of range for {} embeddings", *padding_idx, num_embeddings);
    if (*padding_idx < 0) this->padding_idx = *padding_idx + num_embeddings;
  }
  weight = register_parameter("weight", randn({num_embeddings, embedding_dim}));
  if (this->padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *this->padding_idx).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices, padding_idx); }

std::string Embedding::extra_repr() const {
  std::string out = fmt::format("{}, {}", num_embeddings, embedding_dim);
  if (padding_idx) out += fmt::format(", padding_idx={}", *padding_idx);
  return out;
}

}  // namespace rtx::nn
