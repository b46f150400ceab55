// Node bookkeeping (edges, input metadata, hooks) and stack-safe destruction of long graphs.
#include <atomic>

#include "autograd/function.h"
#include "core/check.h"
#include "core/shape.h"

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
    if (r.defined()) grad = checked_hook_result(*this, output_nr, grad, std::move(r));
  }
  return grad;
}

int64_t next_hook_handle() { return g_next_hook_handle++; }

Tensor checked_hook_result(const Node& node, uint32_t input_nr, const Tensor& grad, Tensor result) {
  const std::string of = node.name() == "AccumulateGrad"
                             ? std::string("a leaf tensor")
                             : fmt::format("output {} of '{}'", input_nr, node.name());
  constexpr const char* kRule = "a hook must return None or a tensor of the gradient's shape, dtype and device";
  RTX_CHECK(result.sizes() == grad.sizes(), ShapeError,
            "[register_hook] a hook on the gradient of {} returned a tensor of shape {} for a gradient of shape {}; {}",
            of, detail::shape_str(result.sizes()), detail::shape_str(grad.sizes()), kRule);
  RTX_CHECK(result.dtype() == grad.dtype(), DTypeError,
            "[register_hook] a hook on the gradient of {} returned a tensor of dtype {} for a gradient of dtype {}; {}",
            of, result.dtype(), grad.dtype(), kRule);
  RTX_CHECK(result.device() == grad.device(), DeviceError,
            "[register_hook] a hook on the gradient of {} returned a tensor on {} for a gradient on {}; {}", of,
            result.device(), grad.device(), kRule);
  return result;
}

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
