// CPU copy/cast and fill kernels.
#include "backend/cpu/copy.h"
#include "backend/cpu/loops.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "dispatch/copy.h"

namespace rtx::cpu {

void copy_cpu(const Tensor& dst, const Tensor& src) {
  RTX_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using out_t = scalar_t;
    RTX_DISPATCH_ALL(src.dtype(), "copy_", [&] { pointwise<out_t, scalar_t>(dst, fn::Identity{}, src); });
  });
}

namespace {

template <typename T>
struct Constant {
  T value;
  T operator()() const { return value; }
};

void fill_cpu(const Tensor& t, const Scalar& value) {
  RTX_DISPATCH_ALL(t.dtype(), "fill_", [&] {
    const scalar_t v = value.to<scalar_t>();
    pointwise<scalar_t>(t, Constant<scalar_t>{v});
  });
}

}  // namespace

RTX_REGISTER_KERNELS(copy_cpu) { RTX_COPY_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
