// Reverse-mode automatic differentiation: graph nodes, the engine entry points, grad-mode guards,
// custom functions, gradient checkpointing and anomaly detection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx {

// Whether ops record backward nodes (true by default, per thread).
RTX_API bool is_grad_enabled();
RTX_API void set_grad_enabled(bool enabled);

// Disables recording for its scope.
class RTX_API NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Enables recording for its scope (inside a NoGradGuard, say).
class RTX_API EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

namespace autograd {

class Node;

// Where a gradient goes: input `input_nr` of `function`.
struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool valid() const { return function != nullptr; }
};

// Shape, dtype and device of one gradient a node receives (one forward output).
struct InputMeta {
  Shape shape;
  DType dtype = kFloat32;
  Device device;
};

// A backward function in the graph. apply() maps the gradients of the forward outputs to the
// gradients of the forward inputs (one per next edge; undefined where no gradient flows).
class RTX_API Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(std::string name);
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual TensorList apply(TensorList&& grads) = 0;
  // Frees what the node saved for backward (called after a backward without retain_graph).
  virtual void release_variables() {}

  const std::string& name() const { return name_; }
  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  const std::vector<InputMeta>& input_meta() const { return input_meta_; }
  uint32_t add_input_meta(const Tensor& t);

  // Hooks on the gradient of forward output `output_nr` (run before apply).
  using Hook = std::function<Tensor(const Tensor&)>;
  int64_t add_hook(uint32_t output_nr, Hook hook);
  bool remove_hook(int64_t handle);
  virtual Tensor run_hooks(uint32_t output_nr, Tensor grad) const;
  bool has_hooks() const { return !hooks_.empty(); }

 private:
  struct HookEntry {
    int64_t handle;
    uint32_t output_nr;
    Hook fn;
  };
  std::string name_;
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<InputMeta> input_meta_;
  std::vector<HookEntry> hooks_;
};

// Computes gradients of tensors w.r.t. graph leaves and accumulates them into .grad.
// grad_tensors may be empty (then every tensor must be a one-element tensor).
RTX_API void backward(const TensorList& tensors, const TensorList& grad_tensors = {}, bool retain_graph = false,
                      bool create_graph = false);
// Runs callback once the backward pass (or grad) running on this thread has run all its nodes, before
// it returns; callbacks run in the order queued, and one may queue more. Error outside a backward pass.
RTX_API void queue_callback(std::function<void()> callback);
// Returns d(outputs)/d(inputs) without touching .grad. retain_graph defaults to create_graph.
RTX_API TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                        std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                        bool allow_unused = false);

// ---- custom functions --------------------------------------------------------------------------
// What a custom function's forward hands to its backward.
class RTX_API FunctionCtx {
 public:
  void save_for_backward(const TensorList& tensors);
  TensorList saved_tensors() const;  // raises if one was modified in place since it was saved
  // Whether input i needs a gradient (valid in both forward and backward).
  bool needs_input_grad(size_t i) const { return i < needs_input_grad_.size() && needs_input_grad_[i]; }

 private:
  friend struct FunctionAccess;
  struct Saved;
  std::vector<std::shared_ptr<Saved>> saved_;
  std::vector<bool> needs_input_grad_;
};
using ForwardFn = std::function<TensorList(FunctionCtx& ctx, const TensorList& inputs)>;
using BackwardFn = std::function<TensorList(FunctionCtx& ctx, const TensorList& grad_outputs)>;
// Runs forward without recording and records one node whose backward is `backward`, which returns one
// gradient per input (undefined for none). The outputs require grad when any input does.
RTX_API TensorList apply_function(const std::string& name, const TensorList& inputs, ForwardFn forward,
                                  BackwardFn backward);

// Gradient checkpointing: runs fn without keeping its intermediate tensors, and runs it again during
// backward to get them. fn must be deterministic given its inputs and the RNG state (which is replayed).
RTX_API TensorList checkpoint(const std::function<TensorList(const TensorList&)>& fn, const TensorList& inputs);

// ---- anomaly mode ------------------------------------------------------------------------------
RTX_API bool is_anomaly_enabled();
// While alive, every recorded op checks its outputs and every backward node its gradients for
// NaN/Inf and raises an Error naming the op that produced them.
class RTX_API DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace autograd
}  // namespace rtx
