// CPU kernels of the pointwise family: every op of the table (rtx/pointwise.def) instantiates the
// one launcher (loops.h) with its functor for the dtypes its rule allows; the instantiations are
// kernels/common/pointwise_kernels.inc, shared with the CUDA backend. The ops of long float math
// (exp and tanh through the host polynomials) also build their contiguous loops for AVX2 and
// AVX-512.
#include "backend/cpu/loops.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "dispatch/pointwise.h"

namespace rtx::cpu {

template <> inline constexpr bool kLongMath<fn::Exp> = true;
template <> inline constexpr bool kLongMath<fn::Sigmoid> = true;
template <> inline constexpr bool kLongMath<fn::Tanh> = true;
template <> inline constexpr bool kLongMath<fn::Silu> = true;
template <> inline constexpr bool kLongMath<fn::GeluTanh> = true;
template <> inline constexpr bool kLongMath<fn::GeluTanhBackward> = true;

namespace {

constexpr DeviceType kDevice = kCPU;
#define RTX_POINTWISE_UNARY 1
#define RTX_POINTWISE_BINARY 1
#include "kernels/common/pointwise_kernels.inc"

}  // namespace

RTX_REGISTER_KERNELS(pointwise_cpu) {
  pointwise_table::register_pointwise_unary();
  pointwise_table::register_pointwise_binary();
}

}  // namespace rtx::cpu
