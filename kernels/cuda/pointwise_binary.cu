// CUDA kernels of the binary and ternary pointwise ops (the table's binary, comparison and logical
// ops, lerp, where, addcmul, addcdiv): every op instantiates the one launcher (pointwise.cuh) with
// its functor for the dtypes its rule allows.
#include "backend/cuda/register.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/pointwise.cuh"
#include "ops/kernels.h"

namespace rtx::cuda {
namespace {

#define RTX_DISPATCH_RULE_ARITH RTX_DISPATCH_NUMERIC
#define RTX_DISPATCH_RULE_TRUEDIV RTX_DISPATCH_FLOATS

#define RTX_BINARY(name, F, rule, s, ga, gb)                                                                           \
  void name##_cuda(const Tensor& out, const Tensor& a, const Tensor& b) {                                              \
    RTX_DISPATCH_RULE_##rule(out.dtype(), #name, [&] { pointwise<scalar_t, scalar_t, scalar_t>(out, fn::F{}, a, b); }); \
  }
#define RTX_COMPARE(name, F)                                                                                \
  void name##_cuda(const Tensor& out, const Tensor& a, const Tensor& b) {                                   \
    RTX_DISPATCH_ALL(a.dtype(), #name, [&] { pointwise<bool, scalar_t, scalar_t>(out, fn::F{}, a, b); }); \
  }
#define RTX_LOGICAL(name, F) \
  void name##_cuda(const Tensor& out, const Tensor& a, const Tensor& b) { pointwise<bool, bool, bool>(out, fn::F{}, a, b); }
#include "rtx/pointwise.def"

void lerp_cuda(const Tensor& out, const Tensor& a, const Tensor& b, double w) {
  RTX_DISPATCH_FLOATS(out.dtype(), "lerp", [&] { pointwise<scalar_t, scalar_t, scalar_t>(out, fn::Lerp{w}, a, b); });
}
void gelu_backward_cuda(const Tensor& out, const Tensor& g, const Tensor& x, double approx) {
  RTX_DISPATCH_FLOATS(out.dtype(), "gelu_backward", [&] {
    if (approx != 0.0) pointwise<scalar_t, scalar_t, scalar_t>(out, fn::GeluTanhBackward{}, g, x);
    else pointwise<scalar_t, scalar_t, scalar_t>(out, fn::GeluBackward{}, g, x);
  });
}
void where_cuda(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b, double) {
  RTX_DISPATCH_ALL(out.dtype(), "where", [&] { pointwise<scalar_t, bool, scalar_t, scalar_t>(out, fn::Where{}, c, a, b); });
}
void addcmul_cuda(const Tensor& out, const Tensor& x, const Tensor& a, const Tensor& b, double v) {
  RTX_DISPATCH_NUMERIC(out.dtype(), "addcmul",
                       [&] { pointwise<scalar_t, scalar_t, scalar_t, scalar_t>(out, fn::Addcmul{v}, x, a, b); });
}
void addcdiv_cuda(const Tensor& out, const Tensor& x, const Tensor& a, const Tensor& b, double v) {
  RTX_DISPATCH_FLOATS(out.dtype(), "addcdiv",
                      [&] { pointwise<scalar_t, scalar_t, scalar_t, scalar_t>(out, fn::Addcdiv{v}, x, a, b); });
}

}  // namespace

void register_pointwise_binary_kernels() {
  using namespace kernels;
#define RTX_BINARY(name, F, r, s, ga, gb) name##_kernel.set(kCUDA, name##_cuda);
#define RTX_COMPARE(name, F) name##_kernel.set(kCUDA, name##_cuda);
#define RTX_LOGICAL(name, F) name##_kernel.set(kCUDA, name##_cuda);
#include "rtx/pointwise.def"
  lerp_kernel.set(kCUDA, lerp_cuda);
  gelu_backward_kernel.set(kCUDA, gelu_backward_cuda);
  where_kernel.set(kCUDA, where_cuda);
  addcmul_kernel.set(kCUDA, addcmul_cuda);
  addcdiv_kernel.set(kCUDA, addcdiv_cuda);
}

}  // namespace rtx::cuda
