// CUDA copy/cast, transfer and fill kernels. A move with a CPU end is one cudaMemcpyAsync on the
// current stream, waited for (and the device's index faults reported, src/backend/cuda/device_faults.h)
// unless it is non-blocking with a pinned host end; moves between GPUs are peer copies ordered with
// both devices' streams.
#include "kernels/cuda/copy.h"
#include "backend/cuda/capture.h"
#include "backend/cuda/device_faults.h"
#include "core/dtype_dispatch.h"
#include "core/tensor_impl.h"
#include "kernels/common/pointwise_functors.h"
#include "kernels/cuda/pointwise.cuh"
#include "dispatch/copy.h"

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

// Between the host and a GPU or between two GPUs; the front-end hands over contiguous operands of
// one dtype.
void transfer_cuda(const Tensor& dst, const Tensor& src, bool non_blocking) {
  RTX_CHECK(same_layout_dense(dst, src), Error, "[to] moves between devices take contiguous operands of one dtype");
  const size_t bytes = dst.nbytes();
  if (dst.is_cpu() || src.is_cpu()) {
    const Device gpu = dst.is_cuda() ? dst.device() : src.device();
    detail::KernelScope scope(gpu);
    if (detail::any_capture_active()) {
      const std::string what = fmt::format("copying a {} {} tensor from {} to {} touches host memory{}", dst.sizes(),
                                           dst.dtype(), src.device(), dst.device(),
                                           dst.is_cpu() ? " and waits for the device (as .item(), .cpu(), .tolist() "
                                                          "and printing do)"
                                                        : "");
      detail::check_no_capture("to", gpu.index, scope.stream(), what.c_str());
    }
    const Tensor& host = dst.is_cpu() ? dst : src;
    RTX_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes,
                                   dst.is_cuda() ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, scope.stream()));
    if (non_blocking && host.is_pinned()) {
      detail::record_pinned_use(host.data_ptr(), scope.stream());
    } else {
      RTX_CUDA_CHECK(cudaStreamSynchronize(scope.stream()));
      detail::report_device_fault(gpu.index);
    }
    return;
  }
  // Between GPUs: the copy runs on dst's current stream after src's pending work, and src's stream
  // waits for the copy before it may reuse src's memory.
  const Stream src_stream = current_stream(src.device().index);
  const Stream dst_stream = current_stream(dst.device().index);
  Event src_ready;
  src_ready.record(src_stream);
  dst_stream.wait(src_ready);
  {
    detail::KernelScope scope(dst.device());
    RTX_CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), dst.device().index, src.data_ptr(), src.device().index, bytes,
                                       scope.stream()));
  }
  Event copied;
  copied.record(dst_stream);
  src_stream.wait(copied);
}

}  // namespace

// On one GPU: a memcpy when nothing converts or moves, the pointwise launcher otherwise.
void copy_cuda(const Tensor& dst, const Tensor& src) {
  if (same_layout_dense(dst, src)) {
    if (dst.data_ptr() == src.data_ptr()) return;
    detail::KernelScope scope(dst.device());
    RTX_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, scope.stream()));
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


Tensor contiguous_cuda(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = rtx::detail::make_tensor(t.sizes(), t.dtype(), t.device());
  copy_cuda(c, t);
  return c;
}

RTX_REGISTER_KERNELS(copy_cuda) {
  RTX_COPY_KERNELS(RTX_SET_CUDA_KERNEL)
  kernels::transfer_kernel.set(kCUDA, transfer_cuda);
}

}  // namespace rtx::cuda
