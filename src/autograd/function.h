// What op front-ends use to record backward: FunctionNode (a backward formula plus the tensors it
// saved), make_node / set_history, and the in-place rules.
//
//   Tensor out = ...;  // computed by the kernel
//   if (auto node = autograd::make_node("exp", x)) {
//     node->save_output(out);
//     node->set_backward([](const TensorList& g, const TensorList& s) { return TensorList{g[0] * s[0]}; });
//     autograd::set_history(out, node);
//   }
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "autograd/meta.h"
#include "core/tensor_impl.h"
#include "rtx/autograd.h"

namespace rtx::autograd {

// A tensor kept for backward. Inputs are held as they are; outputs of the owning node as a detached
// alias (a strong reference would be a cycle) that gets its grad_fn back when unpacked. Unpacking
// checks that no in-place write happened since.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output, uint32_t output_nr = 0);
  Tensor unpack(const std::shared_ptr<Node>& owner) const;

 private:
  Tensor data_;
  uint64_t version_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  uint32_t output_nr_ = 0;
};

class FunctionNode final : public Node {
 public:
  // grads: one per output (zeros where none flowed); saved: what save()/save_output() kept, in order.
  // Returns one gradient per input (undefined where none).
  using Backward = std::function<TensorList(const TensorList& grads, const TensorList& saved)>;

  explicit FunctionNode(std::string name) : Node(std::move(name)) {}
  void save(const Tensor& t) { saved_.emplace_back(t, false); }
  void save_output(const Tensor& t, uint32_t output_nr = 0) { saved_.emplace_back(t, true, output_nr); }
  void set_backward(Backward fn) { backward_ = std::move(fn); }

  TensorList apply(TensorList&& grads) override;
  void release_variables() override;

 private:
  std::vector<SavedTensor> saved_;
  Backward backward_;
  bool released_ = false;
};

bool requires_grad(const Tensor& t);  // defined and requires grad

// A node with edges to the inputs when grad mode is on and some input requires grad; else null.
std::shared_ptr<FunctionNode> make_node_list(const char* name, const TensorList& inputs);
template <typename... Ts>
std::shared_ptr<FunctionNode> make_node(const char* name, const Ts&... inputs) {
  if (!is_grad_enabled() || !(requires_grad(inputs) || ...)) return nullptr;
  return make_node_list(name, TensorList{inputs...});
}
// Makes t the next output of node (t must not have history yet).
void set_history(const Tensor& t, const std::shared_ptr<Node>& node);
// Where a gradient for t goes: its grad_fn, or its leaf accumulator; invalid when t needs none.
Edge gradient_edge(const Tensor& t);

// In-place ops: check_inplace raises for writes autograd cannot follow (a leaf that requires grad, a
// view of a tensor that requires grad). When the op records grad, the front-end computes the result
// out of place and commit_inplace writes it into self and hands self the result's history.
RTX_API void check_inplace(const Tensor& self, const char* op);
RTX_API Tensor& commit_inplace(Tensor& self, const Tensor& result);
// Whether an in-place op on self must go through the recording path.
bool inplace_needs_grad(const Tensor& self, const TensorList& others);
// Bumps the storage version (every in-place write calls it).
void bump_version(const Tensor& t);

// Marks out as a differentiable view of base (see AutogradMeta::is_view).
void mark_view(const Tensor& out);

int64_t next_hook_handle();
// What a hook returned in place of grad, the gradient of input `input_nr` of `node`: ShapeError,
// DTypeError or DeviceError naming the node when its shape, dtype or device differ from grad's (a
// hook may change a gradient's values only, as PyTorch's may).
Tensor checked_hook_result(const Node& node, uint32_t input_nr, const Tensor& grad, Tensor result);

// Releases a node without recursion, so that destroying a long graph cannot overflow the stack.
void release_node(std::shared_ptr<Node>&& node);

// Anomaly mode check of a forward output; raises naming op.
void check_forward_anomaly(const Tensor& out, const std::string& op);

}  // namespace rtx::autograd
