// Node bookkeeping (edges, input metadata, hooks) and stack-safe destruction of long graphs.
#include <atomic>

#include "autograd/function.h"

namespace rtx::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
std::atomic<int64_t> g_next_hook_handle{1};
}  // namespace

Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(g_next_sequence_nr++) {}

Node::~Node() {
  for (auto& e : next_edges_) release_node(std::move(e.function));
}

uint32_t Node::add_input_meta(const Tensor& t) {
  input_meta_.push_back(InputMeta{t.sizes(), t.dtype(), t.device()});
  return static_cast<uint32_t>(input_meta_.size() - 1);
}

int64_t Node::add_hook(uint32_t output_nr, Hook hook) {
  const int64_t h = g_next_hook_handle++;
  hooks_.push_back(HookEntry{h, output_nr, std::move(hook)});
  return h;
}

bool Node::remove_hook(int64_t handle) {
  for (auto it = hooks_.begin(); it != hooks_.end(); ++it) {
    if (it->handle == handle) {
      hooks_.erase(it);
      return true;
    }
  }
  return false;
}

Tensor Node::run_hooks(uint32_t output_nr, Tensor grad) const {
  for (const auto& h : hooks_) {
    if (h.output_nr != output_nr) continue;
    Tensor r = h.fn(grad);
    if (r.defined()) grad = std::move(r);
  }
  return grad;
}

int64_t next_hook_handle() { return g_next_hook_handle++; }

void release_node(std::shared_ptr<Node>&& node) {
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  if (!node) return;
  pending.push_back(std::move(node));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may push this node's children; they are released by this loop, not recursively
  }
  draining = false;
}

}  // namespace rtx::autograd
