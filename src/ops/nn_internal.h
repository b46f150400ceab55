// Internal ops and helpers of the neural-network and loss front-ends: the recorded backward ops of
// softmax, log_softmax and embedding (differentiable again, for higher-order gradients) and the
// small helpers both front-ends share.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "rtx/ops.h"

namespace rtx::detail {

// The dtype statistics are kept in: float32 for the 16-bit floats, the dtype itself otherwise.
DType acc_dtype(DType t);
// DTypeError naming op and arg unless t holds floats.
void check_float(const Tensor& t, const char* op, const char* arg = "input");
// Whether a backward formula must be built from public ops so that it can be differentiated again:
// grad mode is on (create_graph) and one of ts requires grad.
bool needs_differentiable_backward(const TensorList& ts);
// Smallest and largest index of an int32/int64 tensor, skipping skip; nullopt when none is left.
std::optional<std::pair<int64_t, int64_t>> index_bounds(const Tensor& indices,
                                                        std::optional<int64_t> skip = std::nullopt);

// Gradient of softmax's input from the output gradient g and the output: out * (g - sum(g * out, dim)).
Tensor softmax_backward(const Tensor& g, const Tensor& out, int64_t dim);
// Gradient of log_softmax's input: g - exp(out) * sum(g, dim).
Tensor log_softmax_backward(const Tensor& g, const Tensor& out, int64_t dim);
// Gradient of embedding's weight: the rows of g ([indices..., dim]) summed into zeros [num_weights, dim]
// by index, row padding_idx left zero.
Tensor embedding_backward(const Tensor& g, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx);

}  // namespace rtx::detail
