// Multi-tensor apply: one kernel launch processes many tensors (an optimizer's parameters, their
// gradients and states; a GradScaler's gradients; the tensors of a foreach op). The launch's
// parameter struct carries, for up to kTensors tensors, the addresses of kDepth parallel lists
// (params[i], grads[i], ...), their element counts and one per-tensor scalar address (a step count,
// where a tensor's partial norms go); each tensor is cut into chunks of kMultiTensorChunk elements
// and each block handles one chunk. When the struct's tensors or blocks are used up, the launcher
// launches and goes on with the rest, so any number of tensors of any size takes
// ceil(chunks / kMultiTensorBlocks) launches or a few more. The struct stays below 4 KB of kernel
// parameters, the limit that HIP keeps.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "backend/cuda/runtime.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/compat.h"
#include "rtx/tensor.h"

namespace rtx::cuda {

constexpr int64_t kMultiTensorChunk = 65536;  // elements per block
constexpr int kMultiTensorBlocks = 320;       // blocks per launch
constexpr int kMultiTensorThreads = 512;
constexpr int kMultiTensorParamBytes = 3400;  // the struct's budget (with the op: < 4 KB)

template <int kDepth>
struct MultiTensorMeta {
  static constexpr int kTensors =
      (kMultiTensorParamBytes - kMultiTensorBlocks * (1 + 4)) / (8 * kDepth + 8 + 8);
  static_assert(kTensors >= 8 && kTensors <= 255, "block_tensor holds a byte");
  void* addresses[kDepth][kTensors];  // null for a list the op does not use
  void* scalars[kTensors];            // the per-tensor scalar, or null
  int64_t numel[kTensors];
  uint8_t block_tensor[kMultiTensorBlocks];  // which tensor of the struct block b works on
  int32_t block_chunk[kMultiTensorBlocks];   // and which of its chunks
};

// Block b of a launch: op(meta, tensor, begin, end) for the element range [begin, end) of one tensor;
// the op strides its threads over the range.
template <int kDepth, typename Op>
__global__ void __launch_bounds__(kMultiTensorThreads)
    multi_tensor_kernel(const RTX_GRID_CONSTANT MultiTensorMeta<kDepth> meta, const Op op) {
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kMultiTensorChunk;
  const int64_t end = meta.numel[tensor] < begin + kMultiTensorChunk ? meta.numel[tensor] : begin + kMultiTensorChunk;
  op(meta, tensor, begin, end);
}

// Runs op over every element of every tensor of lists[0] on `device`: lists[d][i] is the tensor i
// of list d (an empty list gives null addresses), scalar_of(i) the address of tensor i's scalar
// (a void*, or null). Tensors are contiguous and those of one index have one element count; tensors
// without elements take no block.
template <int kDepth, typename Op, typename ScalarOf>
void multi_tensor_apply_with(Device device, const std::array<const TensorList*, kDepth>& lists,
                             const ScalarOf& scalar_of, const Op& op) {
  using Meta = MultiTensorMeta<kDepth>;
  static_assert(sizeof(Meta) + sizeof(Op) < 4000, "kernel parameters past HIP's 4 KB limit");
  const TensorList& first = *lists[0];
  detail::KernelScope scope(device);
  Meta meta;
  const auto set_slot = [&](int slot, size_t i) {
    for (int d = 0; d < kDepth; ++d) meta.addresses[d][slot] = lists[d]->empty() ? nullptr : (*lists[d])[i].data_ptr();
    meta.scalars[slot] = scalar_of(i);
    meta.numel[slot] = first[i].numel();
  };
  const auto launch = [&](int blocks) {
    multi_tensor_kernel<kDepth, Op><<<blocks, kMultiTensorThreads, 0, scope.stream()>>>(meta, op);
    RTX_CUDA_CHECK_LAUNCH();
  };
  int slot = 0, blocks = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    const int64_t n = first[i].numel();
    if (n == 0) continue;
    set_slot(slot, i);
    const int64_t chunks = (n + kMultiTensorChunk - 1) / kMultiTensorChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      meta.block_tensor[blocks] = static_cast<uint8_t>(slot);
      meta.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      if (blocks == kMultiTensorBlocks || (last_chunk && slot == Meta::kTensors - 1)) {
        launch(blocks);
        blocks = 0;
        if (last_chunk) {
          slot = -1;  // the next tensor starts the struct afresh
        } else {
          set_slot(0, i);  // the rest of this tensor's chunks follow in the next launch
          slot = 0;
        }
      }
    }
    ++slot;
  }
  if (blocks > 0) launch(blocks);
}

// multi_tensor_apply_with where scalars[i] is tensor i's scalar (none when scalars is empty).
template <int kDepth, typename Op>
void multi_tensor_apply(Device device, const std::array<const TensorList*, kDepth>& lists, const TensorList& scalars,
                        const Op& op) {
  multi_tensor_apply_with<kDepth>(
      device, lists, [&](size_t i) -> void* { return scalars.empty() ? nullptr : scalars[i].data_ptr(); }, op);
}

}  // namespace rtx::cuda
