// nn::Flatten: merges a range of dims (by default every dim after the batch dim).
#include <fmt/format.h>

#include "rtx/nn.h"
#include "rtx/ops.h"

namespace rtx::nn {

Flatten::Flatten(int64_t start_dim, int64_t end_dim) : start_dim(start_dim), end_dim(end_dim) {}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

std::string Flatten::extra_repr() const { return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim); }

}  // namespace rtx::nn
