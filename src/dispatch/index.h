// Kernel tables of the indexing family (gather, index_select, scatter, tril/triu) and of joining
// (cat, which src/ops/join.cpp's front-ends share), and the contract of every kernel that reads index
// values (these and nn's index_check). Kernels see operands the front-end has validated and shaped;
// they never validate user input, except index values, which only a kernel reads:
//  - A kernel that checks index values takes an IndexCheck (valid values, and the op the check
//    belongs to) and returns an IndexFault. It never reads or writes through a bad value: it skips
//    it (the output element stays as it was, or zero where it had no value).
//  - The CPU returns the first bad value in the index's row-major order, and the front-end raises at
//    once. The CUDA backend never waits for the device: its kernels put the same first bad value
//    into the device's fault record (src/backend/cuda/device_faults.h) and return no fault; the
//    record raises the op's IndexError at the next synchronization with the device. With
//    sync_checks() (RTX_SYNC_CHECKS=1) the CUDA kernels wait and return the fault, as the CPU does.
//  - A kernel that reads indices checked before it by another kernel (embedding, one_hot, the
//    losses, after nn's index_check) skips bad values too on a device whose check reports later.
// Every message is built by index_fault_message, from the op's front-end, for both ways of raising.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dispatch.h"
#include "rtx/scalar.h"
#include "rtx/tensor.h"

namespace rtx::kernels {

// The ops whose kernels check index values: the tag a fault carries back to its op's message.
enum class IndexOp : uint8_t {
  Gather,
  IndexSelect,
  Scatter,
  ScatterAdd,
  IndexAdd,
  Embedding,
  OneHot,
  CrossEntropy,
  NllLoss,
};

// The op's name as its messages spell it.
inline const char* index_op_name(IndexOp op) {
  constexpr const char* kNames[] = {"gather",    "index_select", "scatter",       "scatter_add", "index_add",
                                    "embedding", "one_hot",      "cross_entropy", "nll_loss"};
  return kNames[static_cast<int>(op)];
}

// What a kernel checks: values in [0, bound) are valid, and so is skip when set. dim (the dim indexed,
// for the index family) only goes into the message.
struct IndexCheck {
  IndexOp op = IndexOp::Gather;
  int64_t bound = 0;
  int64_t dim = 0;
  std::optional<int64_t> skip;
};

// A bad index value a kernel met (found is false when it met none, or when its device reports later).
struct IndexFault {
  bool found = false;
  IndexCheck check;
  int64_t value = 0;
};

// The message of the IndexError a fault raises, written by its op's front-end (src/ops/index.cpp
// routes to them): one per op, whether the CPU raises at the op or a device at a synchronization.
std::string index_fault_message(const IndexFault& fault);
// Whether device kernels wait for their index checks and return the fault (RTX_SYNC_CHECKS=1, read
// once, for debugging, like CUDA_LAUNCH_BLOCKING) instead of reporting at the next synchronization.
RTX_API bool sync_checks();
// Overrides RTX_SYNC_CHECKS for the rest of the process (tests).
RTX_API void set_sync_checks(bool on);

// How a scatter combines src into out.
enum class ScatterMode : uint8_t { Assign, Add };

// out[..., j, ...] = x[..., index[..., j, ...], ...] along dim: out and index share a shape, x has the
// same number of dims and at least index's size in every dim but dim.
// The index kernels' check has bound = the size of dim of x (scatter: of out).
using GatherFn = IndexFault(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                            const IndexCheck& check);
// out = x.index_select(dim, index): index is 1-d, out has x's shape with index.numel() at dim.
using IndexSelectFn = IndexFault(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index,
                                 const IndexCheck& check);
// out[..., index[..., j, ...], ...] (=|+= alpha *) src[..., j, ...] along dim, in index order along dim
// (deterministic: the last write wins, sums accumulate in order). index and src share a shape; out has
// the same number of dims and at least index's size in every dim but dim. out already holds its old values.
using ScatterFn = IndexFault(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, ScatterMode mode,
                             const Scalar& alpha, const IndexCheck& check);
// out (new, contiguous) = inputs concatenated along dim: every input has out's shape but at dim
// (sizes adding up to out's), any dtype (converted to out's).
using CatFn = void(const Tensor& out, const TensorList& inputs, int64_t dim);
// out (new, contiguous) = x with the elements above (upper: below) the diagonal of the last two dims
// zeroed; same shape.
using TriangleFn = void(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper);
// The family's kernels, each with its signature (src/core/dispatch.h says how the list is used).
#define RTX_INDEX_KERNELS(X)     \
  X(gather, GatherFn)            \
  X(index_select, IndexSelectFn) \
  X(scatter, ScatterFn)          \
  X(cat, CatFn)                  \
  X(triangle, TriangleFn)
RTX_INDEX_KERNELS(RTX_FAMILY_KERNEL)

}  // namespace rtx::kernels
