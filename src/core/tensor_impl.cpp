// TensorImpl construction and the basic constructors used by every op.
#include "core/tensor_impl.h"

#include "autograd/meta.h"
#include "core/checked_size.h"
#include "core/shape.h"

namespace rtx::detail {

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage_, Shape sizes_, Shape strides_, int64_t offset_, DType dtype_)
    : storage(std::move(storage_)), sizes(std::move(sizes_)), strides(std::move(strides_)), offset(offset_), dtype(dtype_) {
  refresh();
}

TensorImpl::~TensorImpl() = default;

void TensorImpl::refresh() {
  numel = numel_of(sizes);
  contiguous = detail::is_contiguous(sizes, strides);
}

autograd::AutogradMeta& TensorImpl::autograd_meta() {
  if (!autograd) autograd = std::make_unique<autograd::AutogradMeta>();
  return *autograd;
}

Tensor make_tensor(const Shape& sizes, DType dtype, Device device, bool pinned) {
  const size_t bytes = checked_nbytes(sizes, element_size(dtype), "empty");
  auto storage = std::make_shared<Storage>(bytes, device, pinned);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes, contiguous_strides(sizes), 0, dtype));
}

Tensor make_permuted(const Shape& sizes, const std::vector<int64_t>& layout, DType dtype, Device device) {
  Shape stored(sizes.size());
  for (size_t i = 0; i < layout.size(); ++i) stored[i] = sizes[static_cast<size_t>(layout[i])];
  Tensor t = make_tensor(stored, dtype, device);
  const Shape stored_strides = t.strides();
  Shape strides(sizes.size());
  for (size_t i = 0; i < layout.size(); ++i) strides[static_cast<size_t>(layout[i])] = stored_strides[i];
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage, sizes, std::move(strides), 0, dtype));
}

Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset) {
  return make_view(t, std::move(sizes), std::move(strides), offset, t.dtype());
}

Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>(t.impl()->storage, std::move(sizes), std::move(strides), offset, dtype);
  impl->is_view = true;
  return Tensor(std::move(impl));
}

Tensor alias(const Tensor& t) { return make_view(t, t.sizes(), t.strides(), t.storage_offset()); }

}  // namespace rtx::detail
