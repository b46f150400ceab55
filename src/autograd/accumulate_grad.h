// The node at a leaf: adds the incoming gradient into the leaf's .grad.
#pragma once

#include <memory>

#include "autograd/function.h"

namespace rtx::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<detail::TensorImpl> leaf);
  TensorList apply(TensorList&& grads) override;
  // A leaf's hooks live on the leaf (this node exists only while a graph uses the leaf).
  Tensor run_hooks(uint32_t output_nr, Tensor grad) const override;
  const std::shared_ptr<detail::TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<detail::TensorImpl> leaf_;
};

}  // namespace rtx::autograd
