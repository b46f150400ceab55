// Converting tensors in place (Module::to and the Python nn.Module's to/cuda/float/half/...): the
// converted data replaces the data of the existing tensors, as PyTorch's module.to does, so handles
// held by layers, optimizers and Python Parameters stay valid, tied weights stay one tensor, and
// parameters remain leaves with their requires_grad and a gradient converted alongside.
#include <unordered_set>

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

void convert_in_place(const TensorList& tensors, std::optional<Device> device, std::optional<DType> dtype,
                      bool non_blocking) {
  NoGradGuard no_grad;
  auto convert = [&](const Tensor& t) {
    const DType to_dtype = dtype && t.is_floating_point() ? *dtype : t.dtype();
    return t.to(device.value_or(t.device()), to_dtype, non_blocking);
  };
  std::unordered_set<const detail::TensorImpl*> done;
  for (Tensor t : tensors) {
    if (!t.defined() || !done.insert(t.impl()).second) continue;
    const Tensor converted = convert(t.detach());
    if (converted.dtype() == t.dtype() && converted.device() == t.device()) continue;
    const Tensor grad = t.grad();
    replace_data(t, converted);
    if (grad.defined()) t.set_grad(convert(grad));
  }
}

void Module::convert(std::optional<Device> device, std::optional<DType> dtype) {
  TensorList tensors;
  for (const auto& [prefix, module] : prefixed_modules()) {
    for (const auto& item : module->parameters_) tensors.push_back(item.second);
    for (const auto& item : module->buffers_) tensors.push_back(item.second);
  }
  convert_in_place(tensors, device, dtype);
}

void Module::to(Device device) { convert(device, std::nullopt); }

void Module::to(DType dtype) { convert(std::nullopt, dtype); }

void Module::to(Device device, DType dtype) { convert(device, dtype); }

}  // namespace rtx::nn
