// Recording backward: saved tensors, FunctionNode, AccumulateGrad, gradient edges and in-place rules.
#include "autograd/function.h"

#include "autograd/accumulate_grad.h"
#include "core/check.h"
#include "core/shape.h"
#include "rtx/ops.h"

namespace rtx::autograd {

AutogradMeta::~AutogradMeta() { release_node(std::move(grad_fn)); }

bool requires_grad(const Tensor& t) {
  const detail::TensorImpl* impl = t.impl();
  if (impl == nullptr || !impl->autograd) return false;
  return impl->autograd->requires_grad || impl->autograd->grad_fn != nullptr;
}

// ---- SavedTensor ------------------------------------------------------------------------------

SavedTensor::SavedTensor(const Tensor& t, bool is_output, uint32_t output_nr)
    : version_(t.defined() ? t.version() : 0), is_output_(is_output), output_nr_(output_nr) {
  if (!t.defined()) return;
  if (is_output) {
    data_ = detail::alias(t);
    data_.impl()->is_view = t.impl()->is_view;
    requires_grad_ = true;
  } else {
    data_ = t;
  }
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& owner) const {
  if (!data_.defined()) return {};
  if (data_.version() != version_) {
    RTX_THROW(Error,
              "[autograd] a tensor of shape {} that '{}' saved for backward was modified in place (version {} "
              "when saved, {} now); clone it before the in-place op or use the out-of-place op",
              detail::shape_str(data_.sizes()), owner->name(), version_, data_.version());
  }
  if (!is_output_) return data_;
  Tensor t = detail::alias(data_);
  if (requires_grad_) {
    auto& m = t.impl()->autograd_meta();
    m.grad_fn = owner;
    m.output_nr = output_nr_;
  }
  return t;
}

// ---- FunctionNode -----------------------------------------------------------------------------

TensorList FunctionNode::apply(TensorList&& grads) {
  RTX_CHECK(!released_, Error,
            "[autograd] backward through '{}' a second time, but its saved tensors were freed after the first "
            "backward; pass retain_graph=true to the first backward() if you need to run it twice",
            name());
  // Outputs that received no gradient get zeros, so that formulas never see undefined gradients.
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      const InputMeta& m = input_meta()[i];
      grads[i] = zeros(m.shape, TensorOptions(m.dtype, m.device));
    }
  }
  TensorList saved;
  saved.reserve(saved_.size());
  auto self = shared_from_this();
  for (const auto& s : saved_) saved.push_back(s.unpack(self));
  TensorList out = backward_(grads, saved);
  RTX_CHECK(out.size() == next_edges().size(), Error,
            "[autograd] backward of '{}' returned {} gradients for {} inputs", name(), out.size(), next_edges().size());
  return out;
}

void FunctionNode::release_variables() {
  saved_.clear();
  backward_ = nullptr;
  released_ = true;
}

// ---- AccumulateGrad ---------------------------------------------------------------------------

AccumulateGrad::AccumulateGrad(std::shared_ptr<detail::TensorImpl> leaf) : Node("AccumulateGrad"), leaf_(std::move(leaf)) {
  add_input_meta(Tensor(leaf_));
}

Tensor AccumulateGrad::run_hooks(uint32_t, Tensor grad) const {
  auto& m = leaf_->autograd_meta();
  for (const auto& h : m.leaf_hooks) {
    Tensor r = h.second(grad);
    if (r.defined()) grad = checked_hook_result(*this, 0, grad, std::move(r));
  }
  return grad;
}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g.defined()) return {};
  auto& m = leaf_->autograd_meta();
  if (!m.grad.defined()) {
    // Take the buffer over when nothing else can see it; otherwise copy, so that leaves never share a
    // .grad, later in-place updates of one grad never show up in another, and .grad is contiguous.
    const bool exclusive = g.impl_ptr().use_count() == 1 && g.impl()->storage.use_count() == 1 && g.is_contiguous();
    if (is_grad_enabled()) {
      m.grad = exclusive ? g : g.clone();  // create_graph: clone is recorded, so .grad keeps its history
    } else {
      m.grad = exclusive && !requires_grad(g) ? g : g.detach().clone();
    }
  } else if (is_grad_enabled()) {
    m.grad = m.grad + g;
  } else {
    m.grad.add_(g);
  }
  if (!m.post_accumulate_hooks.empty()) {
    const Tensor leaf(leaf_);
    // A copy: a hook may remove itself (or others) while running.
    const auto hooks = m.post_accumulate_hooks;
    for (const auto& h : hooks) h.second(leaf);
  }
  return {};
}

// ---- recording --------------------------------------------------------------------------------

Edge gradient_edge(const Tensor& t) {
  detail::TensorImpl* impl = t.impl();
  if (impl == nullptr || !impl->autograd) return {};
  AutogradMeta& m = *impl->autograd;
  if (m.grad_fn) {
    RTX_CHECK(!m.is_view || m.view_version == impl->storage->recorded_writes(), Error,
              "[autograd] a view of shape {} is used after an in-place op on its base changed the base's history; "
              "make the view again after the in-place op",
              detail::shape_str(impl->sizes));
    return Edge{m.grad_fn, m.output_nr};
  }
  if (!m.requires_grad) return {};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m.grad_accumulator = acc;
  }
  return Edge{acc, 0};
}

std::shared_ptr<FunctionNode> make_node_list(const char* name, const TensorList& inputs) {
  if (!is_grad_enabled()) return nullptr;
  bool any = false;
  for (const auto& t : inputs) any = any || requires_grad(t);
  if (!any) return nullptr;
  auto node = std::make_shared<FunctionNode>(name);
  auto& edges = node->mutable_next_edges();
  edges.reserve(inputs.size());
  for (const auto& t : inputs) edges.push_back(gradient_edge(t));
  return node;
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& node) {
  AutogradMeta& m = t.impl()->autograd_meta();
  m.grad_fn = node;
  m.output_nr = node->add_input_meta(t);
  if (is_anomaly_enabled()) check_forward_anomaly(t, node->name());
}

void mark_view(const Tensor& out) {
  AutogradMeta& m = out.impl()->autograd_meta();
  m.is_view = true;
  m.view_version = out.impl()->storage->recorded_writes();
}

void bump_version(const Tensor& t) { t.impl()->storage->bump_version(); }

void check_inplace(const Tensor& self, const char* op) {
  if (!is_grad_enabled() || !self.defined() || !self.impl()->autograd) return;
  const AutogradMeta& m = *self.impl()->autograd;
  RTX_CHECK(!(m.requires_grad && !m.grad_fn), Error,
            "[{}] a leaf tensor that requires grad cannot be modified in place; do it inside NoGradGuard (as "
            "optimizers do) or on a clone",
            op);
}

bool inplace_needs_grad(const Tensor& self, const TensorList& others) {
  if (!is_grad_enabled()) return false;
  if (requires_grad(self)) return true;
  for (const auto& o : others)
    if (requires_grad(o)) return true;
  return false;
}

Tensor& commit_inplace(Tensor& self, const Tensor& result) {
  RTX_CHECK(!self.impl()->is_view, Error,
            "[{}] an in-place op on a view cannot be recorded for autograd (the view's base would not see it); "
            "use the out-of-place op",
            result.grad_fn() ? result.grad_fn()->name() : std::string("inplace"));
  {
    NoGradGuard no_grad;
    Tensor dst = detail::alias(self);
    dst.copy_(result);
  }
  self.impl()->storage->bump_recorded_writes();
  // self takes result's history (none when result has no autograd record).
  const AutogradMeta* r = result.impl()->autograd.get();
  AutogradMeta& m = self.impl()->autograd_meta();
  m.grad_fn = r != nullptr ? r->grad_fn : nullptr;
  m.output_nr = r != nullptr ? r->output_nr : 0;
  return self;
}

void check_forward_anomaly(const Tensor& out, const std::string& op) {
  if (!is_floating(out.dtype()) || out.numel() == 0) return;
  NoGradGuard no_grad;
  const bool finite = isfinite(out).all().item<bool>();
  RTX_CHECK(finite, Error, "[anomaly] '{}' produced NaN or Inf in its output of shape {} (forward)", op,
            detail::shape_str(out.sizes()));
}

}  // namespace rtx::autograd
