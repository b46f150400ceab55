// CUDA kernels of the one-input pointwise ops (the table's unary ops, predicates and unary functor
// ops): every op instantiates the one launcher (pointwise.cuh) with its functor for the dtypes its
// rule allows, through kernels/common/pointwise_kernels.inc (shared with the CPU backend).
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/pointwise.cuh"
#include "dispatch/pointwise.h"

namespace rtx::cuda {
namespace {

constexpr DeviceType kDevice = kCUDA;
#define RTX_POINTWISE_UNARY 1
#define RTX_POINTWISE_BINARY 0
#include "kernels/common/pointwise_kernels.inc"

}  // namespace

RTX_REGISTER_KERNELS(pointwise_unary_cuda) { pointwise_table::register_pointwise_unary(); }

}  // namespace rtx::cuda
