// Module::to: converts parameters and buffers in place. The converted data replaces the data of the
// existing tensors (as PyTorch's module.to does), so handles held by layers and optimizers stay valid
// and parameters remain leaves with their requires_grad and a gradient converted alongside.
#include "core/tensor_impl.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"

namespace rtx::nn {
namespace {

// Points target's TensorImpl at source's data and geometry (its autograd record is kept).
void replace_data(const Tensor& target, const Tensor& source) {
  detail::TensorImpl& dst = *target.impl();
  const detail::TensorImpl& src = *source.impl();
  dst.storage = src.storage;
  dst.sizes = src.sizes;
  dst.strides = src.strides;
  dst.offset = src.offset;
  dst.dtype = src.dtype;
  dst.is_view = false;
  dst.refresh();
}

}  // namespace

void Module::convert_tensors(const std::function<Tensor(const Tensor&)>& convert) {
  NoGradGuard no_grad;
  auto apply = [&](Tensor t) {
    const Tensor converted = convert(t.detach());
    if (converted.dtype() == t.dtype() && converted.device() == t.device()) return;
    const Tensor grad = t.grad();
    replace_data(t, converted);
    if (grad.defined()) t.set_grad(convert(grad));
  };
  for (const auto& [prefix, module] : prefixed_modules()) {
    for (const auto& item : module->parameters_) apply(item.second);
    for (const auto& item : module->buffers_) apply(item.second);
  }
}

void Module::to(Device device) {
  convert_tensors([&](const Tensor& t) { return t.to(device); });
}

void Module::to(DType dtype) {
  convert_tensors([&](const Tensor& t) { return t.is_floating_point() ? t.to(dtype) : t; });
}

void Module::to(Device device, DType dtype) {
  convert_tensors([&](const Tensor& t) { return t.is_floating_point() ? t.to(device, dtype) : t.to(device); });
}

}  // namespace rtx::nn
