// User-defined differentiable functions: forward runs without recording; one node calls the user's
// backward. Saved tensors that are outputs are kept weakly (see SavedTensor) to avoid a cycle.
#include <optional>

#include "autograd/function.h"
#include "core/check.h"
#include "rtx/ops.h"

namespace rtx::autograd {

struct FunctionCtx::Saved {
  Tensor pending;  // as given to save_for_backward, until forward returns
  SavedTensor saved;
};

struct FunctionAccess {
  static std::vector<std::shared_ptr<FunctionCtx::Saved>>& saved(FunctionCtx& c) { return c.saved_; }
  static std::vector<bool>& needs(FunctionCtx& c) { return c.needs_input_grad_; }
};

namespace {
// The node of the running backward, so that saved outputs can get their grad_fn back.
thread_local std::shared_ptr<Node> t_current_owner;
}  // namespace

void FunctionCtx::save_for_backward(const TensorList& tensors) {
  saved_.clear();
  for (const auto& t : tensors) {
    auto s = std::make_shared<Saved>();
    s->pending = t;
    saved_.push_back(std::move(s));
  }
}

TensorList FunctionCtx::saved_tensors() const {
  TensorList out;
  for (const auto& s : saved_) out.push_back(s->pending.defined() ? s->pending : s->saved.unpack(t_current_owner));
  return out;
}

TensorList apply_function(const std::string& name, const TensorList& inputs, ForwardFn forward, BackwardFn backward) {
  auto ctx = std::make_shared<FunctionCtx>();
  auto& needs = FunctionAccess::needs(*ctx);
  for (const auto& t : inputs) needs.push_back(is_grad_enabled() && requires_grad(t));
  TensorList outputs;
  {
    NoGradGuard no_grad;
    outputs = forward(*ctx, inputs);
  }
  auto node = make_node_list(name.c_str(), inputs);
  if (!node) {
    for (auto& s : FunctionAccess::saved(*ctx)) s->pending = Tensor();
    return outputs;
  }
  // The backward gets one gradient per output: the node's for differentiable outputs (by their slot),
  // zeros for the others (integer outputs), undefined for undefined outputs.
  std::vector<int64_t> slots(outputs.size(), -1);
  std::vector<std::optional<InputMeta>> metas(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.defined()) continue;
    if (!is_floating(out.dtype())) {
      metas[i] = InputMeta{out.sizes(), out.dtype(), out.device()};
      continue;
    }
    // An output that is an input (or already has history) becomes a fresh alias that can take this node.
    bool reuse = out.impl()->autograd != nullptr;
    for (const auto& in : inputs) reuse = reuse || out.is_same(in);
    if (reuse) out = detail::alias(out);
    set_history(out, node);
    slots[i] = out.output_nr();
  }
  for (auto& s : FunctionAccess::saved(*ctx)) {
    uint32_t nr = 0;
    bool is_output = false;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined() && outputs[i].shares_storage(s->pending) && outputs[i].sizes() == s->pending.sizes() &&
          outputs[i].storage_offset() == s->pending.storage_offset() && outputs[i].impl()->autograd &&
          outputs[i].grad_fn() == node) {
        is_output = true;
        nr = outputs[i].output_nr();
      }
    }
    s->saved = SavedTensor(s->pending, is_output, nr);
    s->pending = Tensor();
  }
  const size_t n_inputs = inputs.size();
  std::weak_ptr<Node> weak_node = node;
  node->set_backward([ctx, backward, n_inputs, name, weak_node, slots, metas](const TensorList& grads,
                                                                             const TensorList&) {
    std::shared_ptr<Node> prev = t_current_owner;
    t_current_owner = weak_node.lock();
    struct Restore {
      std::shared_ptr<Node>& slot;
      std::shared_ptr<Node> prev;
      ~Restore() { slot = prev; }
    } restore{t_current_owner, prev};
    TensorList grad_outputs(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] >= 0) grad_outputs[i] = grads[static_cast<size_t>(slots[i])];
      else if (metas[i]) grad_outputs[i] = zeros(metas[i]->shape, TensorOptions(metas[i]->dtype, metas[i]->device));
    }
    TensorList g = backward(*ctx, grad_outputs);
    RTX_CHECK(g.size() == n_inputs, Error, "[{}] backward returned {} gradients for {} inputs", name, g.size(), n_inputs);
    return g;
  });
  return outputs;
}

}  // namespace rtx::autograd
