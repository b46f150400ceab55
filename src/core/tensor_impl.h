// TensorImpl: what a Tensor handle points to. Storage + sizes/strides (in elements) + offset + dtype,
// and an autograd record that stays null until the tensor takes part in differentiation.
#pragma once

#include <memory>
#include <vector>

#include "core/storage.h"
#include "rtx/tensor.h"

namespace rtx::autograd {
struct AutogradMeta;
}

namespace rtx::detail {

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides, int64_t offset, DType dtype);
  ~TensorImpl();

  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;
  int64_t offset = 0;
  DType dtype;
  int64_t numel = 0;
  bool contiguous = true;
  bool is_view = false;  // shares storage with the tensor it was made from
  std::unique_ptr<autograd::AutogradMeta> autograd;

  // Recomputes numel and contiguity after sizes/strides change.
  void refresh();
  char* data() const { return static_cast<char*>(storage->data()) + offset * static_cast<int64_t>(element_size(dtype)); }
  autograd::AutogradMeta& autograd_meta();  // creates it on first use
};

// A new contiguous tensor (uninitialized); pinned: in page-locked host memory (device must be the CPU).
Tensor make_tensor(const Shape& sizes, DType dtype, Device device, bool pinned = false);
// A new tensor of `sizes` (uninitialized, owning its storage) whose dims lie in memory in the order
// `layout` (a permutation of the dims, outermost first), as torch.empty_permuted.
Tensor make_permuted(const Shape& sizes, const std::vector<int64_t>& layout, DType dtype, Device device);
// A view of t's storage with other geometry; no autograd record.
Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset);
// The same over t's memory read as another dtype (offset and strides in elements of that dtype).
Tensor make_view(const Tensor& t, Shape sizes, Shape strides, int64_t offset, DType dtype);
// A view of t with the same geometry and no autograd record (what detach returns).
Tensor alias(const Tensor& t);

}  // namespace rtx::detail
