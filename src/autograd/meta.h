// The autograd record of a tensor: leaf flag and .grad, or the node that produced it.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "rtx/autograd.h"

namespace rtx::autograd {

struct AutogradMeta {
  AutogradMeta() = default;
  ~AutogradMeta();  // releases grad_fn without recursion (see release_node)
  AutogradMeta(const AutogradMeta&) = delete;
  AutogradMeta& operator=(const AutogradMeta&) = delete;

  bool requires_grad = false;          // set on leaves by requires_grad_()
  Tensor grad;                         // accumulated gradient (leaves, and non-leaves that retain it)
  std::shared_ptr<Node> grad_fn;       // null for leaves
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad node, while some graph holds it
  uint32_t output_nr = 0;              // which output of grad_fn this tensor is
  bool retains_grad = false;
  std::vector<std::pair<int64_t, Node::Hook>> leaf_hooks;  // hooks on a leaf's gradient
  // hooks run after a backward pass accumulated a leaf's .grad
  std::vector<std::pair<int64_t, std::function<void(const Tensor&)>>> post_accumulate_hooks;
  // A differentiable view remembers how many recorded in-place writes its storage had when it was
  // made; a later one changed the base's history without the view's grad_fn knowing.
  bool is_view = false;
  uint64_t view_version = 0;
};

}  // namespace rtx::autograd
