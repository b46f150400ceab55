// CUDA kernels of the pointwise ops of two and three inputs (the table's binary, comparison and
// logical ops and its binary, ternary and where functor ops): every op instantiates the one
// launcher (pointwise.cuh) with its functor for the dtypes its rule allows, through
// kernels/common/pointwise_kernels.inc (shared with the CPU backend).
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/pointwise.cuh"
#include "dispatch/pointwise.h"

namespace rtx::cuda {
namespace {

constexpr DeviceType kDevice = kCUDA;
#define RTX_POINTWISE_UNARY 0
#define RTX_POINTWISE_BINARY 1
#include "kernels/common/pointwise_kernels.inc"

}  // namespace

RTX_REGISTER_KERNELS(pointwise_binary_cuda) { pointwise_table::register_pointwise_binary(); }

}  // namespace rtx::cuda
