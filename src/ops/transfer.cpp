// Moves between devices (Tensor::to(device), cpu(), cuda()) and pinned host memory.
#include "autograd/function.h"
#include "core/tensor_impl.h"
#include "ops/internal.h"
#include "dispatch/copy.h"
#include "rtx/cuda.h"

namespace rtx {

using detail::check_defined;

Tensor Tensor::to(Device device, bool non_blocking, bool copy) const { return to(device, dtype(), non_blocking, copy); }

Tensor Tensor::to(Device device, DType dtype, bool non_blocking, bool copy) const {
  check_defined(*this, "to");
  Tensor r = to_dtype(*this, dtype);
  if (r.device() == device) return copy && r.is_same(*this) ? rtx::clone(r) : r;
  // Checked before allocating, so that the message names the move rather than the allocator.
  RTX_CHECK(cuda::is_available() && kernels::transfer_kernel.has(kCUDA), DeviceError, "[to] cannot move a tensor from {} to {}: {}",
            r.device(), device,
            cuda::is_available() ? "this build registers no CUDA kernels" : cuda::unavailable_reason());
  // A non-blocking move to the host lands in pinned memory, so that the copy can run asynchronously.
  const bool pinned = non_blocking && device.is_cpu();
  Tensor out = detail::make_tensor(r.sizes(), r.dtype(), device, pinned);
  const Device gpu = device.is_cpu() ? r.device() : device;
  kernels::transfer_kernel.get(gpu)(out, r.contiguous(), non_blocking);
  if (auto node = autograd::make_node("to", r)) {
    const Device src_device = r.device();
    node->set_backward([src_device](const TensorList& g, const TensorList&) { return TensorList{g[0].to(src_device)}; });
    autograd::set_history(out, node);
  }
  return out;
}

Tensor Tensor::cpu() const { return to(Device(kCPU)); }
Tensor Tensor::cuda(int index, bool non_blocking) const { return to(Device(kCUDA, index), non_blocking); }

bool Tensor::is_pinned() const {
  check_defined(*this, "is_pinned");
  return impl()->storage->pinned();
}

Tensor Tensor::pin_memory() const {
  check_defined(*this, "pin_memory");
  RTX_CHECK(is_cpu(), DeviceError, "[pin_memory] only CPU tensors can be pinned, this one is on {}", device());
  if (is_pinned()) return *this;
  Tensor out = detail::make_tensor(sizes(), dtype(), device(), /*pinned=*/true);
  detail::copy_raw(out, *this);
  if (auto node = autograd::make_node("pin_memory", *this)) {
    node->set_backward([](const TensorList& g, const TensorList&) { return TensorList{g[0]}; });
    autograd::set_history(out, node);
  }
  return out;
}

}  // namespace rtx
