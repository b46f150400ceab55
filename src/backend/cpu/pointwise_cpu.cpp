// CPU kernels of the pointwise family: every op instantiates the one launcher (loops.h) with its
// functor for the dtypes its rule allows.
#include "backend/cpu/loops.h"
#include "backend/cpu/register.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "ops/kernels.h"

namespace rtx::cpu {
namespace {

#define RTX_DISPATCH_RULE_FLOAT RTX_DISPATCH_FLOATS
#define RTX_DISPATCH_RULE_NUMERIC RTX_DISPATCH_NUMERIC
#define RTX_DISPATCH_RULE_ARITH RTX_DISPATCH_NUMERIC
#define RTX_DISPATCH_RULE_TRUEDIV RTX_DISPATCH_FLOATS

template <typename F>
void unary_same(const Tensor& out, const Tensor& x, const F& f, const char* op, bool floats_only) {
  if (floats_only) {
    RTX_DISPATCH_FLOATS(out.dtype(), op, [&] { pointwise<scalar_t, scalar_t>(out, f, x); });
  } else {
    RTX_DISPATCH_NUMERIC(out.dtype(), op, [&] { pointwise<scalar_t, scalar_t>(out, f, x); });
  }
}

#define RTX_UNARY(name, F, rule, s, g)                                                      \
  void name##_cpu(const Tensor& out, const Tensor& x) {                                     \
    RTX_DISPATCH_RULE_##rule(out.dtype(), #name, [&] { pointwise<scalar_t, scalar_t>(out, fn::F{}, x); }); \
  }
#define RTX_BINARY(name, F, rule, s, ga, gb)                                                \
  void name##_cpu(const Tensor& out, const Tensor& a, const Tensor& b) {                    \
    RTX_DISPATCH_RULE_##rule(out.dtype(), #name, [&] { pointwise<scalar_t, scalar_t, scalar_t>(out, fn::F{}, a, b); }); \
  }
#define RTX_COMPARE(name, F)                                                                \
  void name##_cpu(const Tensor& out, const Tensor& a, const Tensor& b) {                    \
    RTX_DISPATCH_ALL(a.dtype(), #name, [&] { pointwise<bool, scalar_t, scalar_t>(out, fn::F{}, a, b); }); \
  }
#define RTX_LOGICAL(name, F)                                                                \
  void name##_cpu(const Tensor& out, const Tensor& a, const Tensor& b) {                    \
    pointwise<bool, bool, bool>(out, fn::F{}, a, b);                                        \
  }
#define RTX_PREDICATE(name, F)                                                              \
  void name##_cpu(const Tensor& out, const Tensor& x) {                                     \
    RTX_DISPATCH_ALL(x.dtype(), #name, [&] { pointwise<bool, scalar_t>(out, fn::F{}, x); }); \
  }
#include "rtx/pointwise.def"

void gelu_cpu(const Tensor& out, const Tensor& x, double approx, double) {
  if (approx != 0.0) unary_same(out, x, fn::GeluTanh{}, "gelu", true);
  else unary_same(out, x, fn::Gelu{}, "gelu", true);
}
void gelu_backward_cpu(const Tensor& out, const Tensor& g, const Tensor& x, double approx) {
  RTX_DISPATCH_FLOATS(out.dtype(), "gelu_backward", [&] {
    if (approx != 0.0) pointwise<scalar_t, scalar_t, scalar_t>(out, fn::GeluTanhBackward{}, g, x);
    else pointwise<scalar_t, scalar_t, scalar_t>(out, fn::GeluBackward{}, g, x);
  });
}
void leaky_relu_cpu(const Tensor& out, const Tensor& x, double slope, double) {
  unary_same(out, x, fn::LeakyRelu{slope}, "leaky_relu", true);
}
void elu_cpu(const Tensor& out, const Tensor& x, double alpha, double) { unary_same(out, x, fn::Elu{alpha}, "elu", true); }
void softplus_cpu(const Tensor& out, const Tensor& x, double beta, double threshold) {
  unary_same(out, x, fn::Softplus{beta, threshold}, "softplus", true);
}
void clamp_cpu(const Tensor& out, const Tensor& x, double lo, double hi) {
  unary_same(out, x, fn::Clamp{lo, hi}, "clamp", false);
}
void lerp_cpu(const Tensor& out, const Tensor& a, const Tensor& b, double w) {
  RTX_DISPATCH_FLOATS(out.dtype(), "lerp", [&] { pointwise<scalar_t, scalar_t, scalar_t>(out, fn::Lerp{w}, a, b); });
}
void where_cpu(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b, double) {
  RTX_DISPATCH_ALL(out.dtype(), "where", [&] { pointwise<scalar_t, bool, scalar_t, scalar_t>(out, fn::Where{}, c, a, b); });
}
void addcmul_cpu(const Tensor& out, const Tensor& x, const Tensor& a, const Tensor& b, double v) {
  RTX_DISPATCH_NUMERIC(out.dtype(), "addcmul",
                       [&] { pointwise<scalar_t, scalar_t, scalar_t, scalar_t>(out, fn::Addcmul{v}, x, a, b); });
}
void addcdiv_cpu(const Tensor& out, const Tensor& x, const Tensor& a, const Tensor& b, double v) {
  RTX_DISPATCH_FLOATS(out.dtype(), "addcdiv",
                      [&] { pointwise<scalar_t, scalar_t, scalar_t, scalar_t>(out, fn::Addcdiv{v}, x, a, b); });
}

}  // namespace

void register_pointwise_kernels() {
  using namespace kernels;
#define RTX_UNARY(name, F, r, s, g) name##_kernel.set(kCPU, name##_cpu);
#define RTX_BINARY(name, F, r, s, ga, gb) name##_kernel.set(kCPU, name##_cpu);
#define RTX_COMPARE(name, F) name##_kernel.set(kCPU, name##_cpu);
#define RTX_LOGICAL(name, F) name##_kernel.set(kCPU, name##_cpu);
#define RTX_PREDICATE(name, F) name##_kernel.set(kCPU, name##_cpu);
#include "rtx/pointwise.def"
  gelu_kernel.set(kCPU, gelu_cpu);
  gelu_backward_kernel.set(kCPU, gelu_backward_cpu);
  leaky_relu_kernel.set(kCPU, leaky_relu_cpu);
  elu_kernel.set(kCPU, elu_cpu);
  softplus_kernel.set(kCPU, softplus_cpu);
  clamp_kernel.set(kCPU, clamp_cpu);
  lerp_kernel.set(kCPU, lerp_cpu);
  where_kernel.set(kCPU, where_cpu);
  addcmul_kernel.set(kCPU, addcmul_cpu);
  addcdiv_kernel.set(kCPU, addcdiv_cpu);
}

}  // namespace rtx::cpu
