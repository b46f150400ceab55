// CUDA copy/cast and fill kernels. A copy with a CPU end (the front-end hands over contiguous
// operands of one dtype) is one cudaMemcpyAsync on the current stream; a device-to-host copy waits
// for it so the host may read the result. Copies between GPUs are peer copies; copies on one GPU
// are a memcpy when nothing converts or moves, the pointwise launcher otherwise.
#include "backend/cuda/register.h"
#include "core/dtype_dispatch.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/pointwise.cuh"
#include "ops/kernels.h"

namespace rtx::cuda {
namespace {

template <typename T>
struct Constant {
  T value;
  __device__ T operator()() const { return value; }
};

bool same_layout_dense(const Tensor& dst, const Tensor& src) {
  return dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes();
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  const size_t bytes = dst.nbytes();
  if (dst.is_cpu() || src.is_cpu()) {
    RTX_CHECK(same_layout_dense(dst, src), Error, "[copy_] host/device copies take contiguous operands of one dtype");
    const Device gpu = dst.is_cuda() ? dst.device() : src.device();
    detail::KernelScope scope(gpu);
    if (dst.is_cuda()) {
      RTX_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyHostToDevice, scope.stream()));
    } else {
      RTX_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToHost, scope.stream()));
      RTX_CUDA_CHECK(cudaStreamSynchronize(scope.stream()));
    }
    return;
  }
  if (dst.device() != src.device()) {
    RTX_CHECK(same_layout_dense(dst, src), Error, "[copy_] copies between GPUs take contiguous operands of one dtype");
    // The copy runs on dst's current stream after src's pending work, and src's stream waits for the
    // copy before it may reuse src's memory.
    const Stream src_stream = current_stream(src.device().index);
    const Stream dst_stream = current_stream(dst.device().index);
    Event src_ready;
    src_ready.record(src_stream);
    dst_stream.wait(src_ready);
    {
      detail::KernelScope scope(dst.device());
      RTX_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index, src.data_ptr(), src.device().index,
                                         bytes, scope.stream()));
    }
    Event copied;
    copied.record(dst_stream);
    src_stream.wait(copied);
    return;
  }
  if (same_layout_dense(dst, src)) {
    if (dst.data_ptr() == src.data_ptr()) return;
    detail::KernelScope scope(dst.device());
    RTX_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes, cudaMemcpyDeviceToDevice, scope.stream()));
    return;
  }
  RTX_DISPATCH_ALL(dst.dtype(), "copy_", [&] {
    using out_t = scalar_t;
    RTX_DISPATCH_ALL(src.dtype(), "copy_", [&] { pointwise<out_t, scalar_t>(dst, fn::Identity{}, src); });
  });
}

void fill_cuda(const Tensor& t, const Scalar& value) {
  RTX_DISPATCH_ALL(t.dtype(), "fill_", [&] { pointwise<scalar_t>(t, Constant<scalar_t>{value.to<scalar_t>()}); });
}

}  // namespace

void register_copy_kernels() {
  kernels::copy_kernel.set(kCUDA, copy_cuda);
  kernels::fill_kernel.set(kCUDA, fill_cuda);
}

}  // namespace rtx::cuda
