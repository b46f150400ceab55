// CUDA kernels of the unary pointwise ops (the table's unary ops and predicates, and the unary ops
// with parameters): every op instantiates the one launcher (pointwise.cuh) with its functor for the
// dtypes its rule allows.
#include "backend/cuda/register.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/pointwise.cuh"
#include "ops/kernels.h"

namespace rtx::cuda {
namespace {

#define RTX_DISPATCH_RULE_FLOAT RTX_DISPATCH_FLOATS
#define RTX_DISPATCH_RULE_NUMERIC RTX_DISPATCH_NUMERIC

template <typename F>
void unary_same(const Tensor& out, const Tensor& x, const F& f, const char* op, bool floats_only) {
  if (floats_only) {
    RTX_DISPATCH_FLOATS(out.dtype(), op, [&] { pointwise<scalar_t, scalar_t>(out, f, x); });
  } else {
    RTX_DISPATCH_NUMERIC(out.dtype(), op, [&] { pointwise<scalar_t, scalar_t>(out, f, x); });
  }
}

#define RTX_UNARY(name, F, rule, s, g)                                                                      \
  void name##_cuda(const Tensor& out, const Tensor& x) {                                                    \
    RTX_DISPATCH_RULE_##rule(out.dtype(), #name, [&] { pointwise<scalar_t, scalar_t>(out, fn::F{}, x); }); \
  }
#define RTX_PREDICATE(name, F)                                                                 \
  void name##_cuda(const Tensor& out, const Tensor& x) {                                       \
    RTX_DISPATCH_ALL(x.dtype(), #name, [&] { pointwise<bool, scalar_t>(out, fn::F{}, x); }); \
  }
#include "rtx/pointwise.def"

void gelu_cuda(const Tensor& out, const Tensor& x, double approx, double) {
  if (approx != 0.0) unary_same(out, x, fn::GeluTanh{}, "gelu", true);
  else unary_same(out, x, fn::Gelu{}, "gelu", true);
}
void leaky_relu_cuda(const Tensor& out, const Tensor& x, double slope, double) {
  unary_same(out, x, fn::LeakyRelu{slope}, "leaky_relu", true);
}
void elu_cuda(const Tensor& out, const Tensor& x, double alpha, double) { unary_same(out, x, fn::Elu{alpha}, "elu", true); }
void softplus_cuda(const Tensor& out, const Tensor& x, double beta, double threshold) {
  unary_same(out, x, fn::Softplus{beta, threshold}, "softplus", true);
}
void clamp_cuda(const Tensor& out, const Tensor& x, double lo, double hi) {
  unary_same(out, x, fn::Clamp{lo, hi}, "clamp", false);
}

}  // namespace

void register_pointwise_unary_kernels() {
  using namespace kernels;
#define RTX_UNARY(name, F, r, s, g) name##_kernel.set(kCUDA, name##_cuda);
#define RTX_PREDICATE(name, F) name##_kernel.set(kCUDA, name##_cuda);
#include "rtx/pointwise.def"
  gelu_kernel.set(kCUDA, gelu_cuda);
  leaky_relu_kernel.set(kCUDA, leaky_relu_cuda);
  elu_kernel.set(kCUDA, elu_cuda);
  softplus_kernel.set(kCUDA, softplus_cuda);
  clamp_kernel.set(kCUDA, clamp_cuda);
}

}  // namespace rtx::cuda
