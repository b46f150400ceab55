// Internal ops and helpers of the neural-network and loss front-ends: the recorded backward ops of
// softmax, log_softmax and embedding (differentiable again, for higher-order gradients) and the
// small helpers both front-ends share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dispatch/index.h"
#include "rtx/ops.h"

namespace rtx::detail {

// The dtype statistics are kept in: float32 for the 16-bit floats, the dtype itself otherwise.
DType acc_dtype(DType t);
// DTypeError naming op and arg unless t holds floats.
void check_float(const Tensor& t, const char* op, const char* arg = "input");
// Whether a backward formula must be built from public ops so that it can be differentiated again:
// grad mode is on (create_graph) and one of ts requires grad.
bool needs_differentiable_backward(const TensorList& ts);
// Throws the IndexError of fault when it is found (src/ops/index.cpp).
void raise_index_fault(const kernels::IndexFault& fault);
// Checks the values of an int32/int64 index tensor with nn's index_check kernel: an IndexError at
// once on the CPU, at the next synchronization on CUDA (src/dispatch/index.h).
void check_indices(const Tensor& indices, const kernels::IndexCheck& check);
// The messages of the index faults of embedding and one_hot (src/ops/nn.cpp) and of the class-index
// losses (src/ops/loss.cpp), which kernels::index_fault_message routes to.
std::string embedding_fault_message(const kernels::IndexFault& fault);
std::string one_hot_fault_message(const kernels::IndexFault& fault);
std::string class_target_fault_message(const kernels::IndexFault& fault);

// Gradient of softmax's input from the output gradient g and the output: out * (g - sum(g * out, dim)).
Tensor softmax_backward(const Tensor& g, const Tensor& out, int64_t dim);
// Gradient of log_softmax's input: g - exp(out) * sum(g, dim).
Tensor log_softmax_backward(const Tensor& g, const Tensor& out, int64_t dim);
// Gradient of embedding's weight: the rows of g ([indices..., dim]) summed into zeros [num_weights, dim]
// by index, row padding_idx left zero.
Tensor embedding_backward(const Tensor& g, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx);

}  // namespace rtx::detail
