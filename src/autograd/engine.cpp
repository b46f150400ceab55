// The backward engine: counts dependencies, then runs nodes in reverse creation order (highest
// sequence number first) once all their incoming gradients have arrived. Iterative throughout, so a
// graph of any depth runs in constant stack. The engine, not the formulas, reduces a gradient to its
// input's shape when broadcasting expanded it, and casts it to the input's dtype.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>

#include "autocast/policy.h"
#include "autograd/accumulate_grad.h"
#include "autograd/function.h"
#include "core/check.h"
#include "core/shape.h"
#include "rtx/ops.h"

namespace rtx::autograd {
namespace {

// Hands the root gradients to the graph.
class GraphRoot final : public Node {
 public:
  GraphRoot(std::vector<Edge> edges, TensorList grads) : Node("GraphRoot"), grads_(std::move(grads)) {
    mutable_next_edges() = std::move(edges);
  }
  TensorList apply(TensorList&&) override { return grads_; }

 private:
  TensorList grads_;
};

struct CompareSeq {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Nodes a run makes room for up front: graphs up to this size never regrow the run's tables.
constexpr size_t kTypicalNodes = 64;

// The nodes of one backward run numbered 0, 1, ... in discovery order: a table with open addressing
// (two arrays, not one allocation per node), so that the run's per-node state lives in vectors.
class NodeIndex {
 public:
  // The index of node, numbering it if it is new; `added` tells which.
  size_t insert(Node* node, bool* added) {
    if (2 * (count_ + 1) > keys_.size()) grow();
    const size_t slot = slot_of(node);
    *added = keys_[slot] == nullptr;
    if (*added) {
      keys_[slot] = node;
      values_[slot] = count_++;
    }
    return values_[slot];
  }
  // The index of a node inserted before (every node the run reaches is).
  size_t at(Node* node) const {
    const size_t slot = slot_of(node);
    RTX_CHECK(keys_[slot] == node, Error, "[backward] internal error: node '{}' was not indexed", node->name());
    return values_[slot];
  }
  size_t size() const { return count_; }

 private:
  // The slot holding node, or the empty one where it would go (the table is never full).
  size_t slot_of(Node* node) const {
    const size_t mask = keys_.size() - 1;
    size_t slot = static_cast<size_t>((reinterpret_cast<uintptr_t>(node) >> 4) * 0x9E3779B97F4A7C15ull) & mask;
    while (keys_[slot] != nullptr && keys_[slot] != node) slot = (slot + 1) & mask;
    return slot;
  }
  void grow() {
    const std::vector<Node*> keys = std::move(keys_);
    const std::vector<size_t> values = std::move(values_);
    keys_.assign(std::max<size_t>(2 * kTypicalNodes, 2 * keys.size()), nullptr);
    values_.assign(keys_.size(), 0);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == nullptr) continue;
      const size_t slot = slot_of(keys[i]);
      keys_[slot] = keys[i];
      values_[slot] = values[i];
    }
  }

  std::vector<Node*> keys_;
  std::vector<size_t> values_;
  size_t count_ = 0;
};

Tensor conform_gradient(Tensor g, const InputMeta& meta, const Node& producer, size_t i) {
  if (g.sizes() != meta.shape) g = sum_to(g, meta.shape);  // undoes broadcasting; raises if impossible
  // A 0-d CPU input may have joined tensors on another device (a number operand): its gradient moves.
  if (g.device() != meta.device && meta.device.is_cpu() && meta.shape.empty()) g = g.to(meta.device);
  RTX_CHECK(g.device() == meta.device, DeviceError,
            "[autograd] backward of '{}' returned a gradient on {} for input {} on {}", producer.name(), g.device(), i,
            meta.device);
  if (g.dtype() != meta.dtype) g = g.to(meta.dtype);
  return g;
}

void check_backward_anomaly(const Tensor& g, const Node& node, size_t i) {
  if (!is_floating(g.dtype()) || g.numel() == 0) return;
  NoGradGuard no_grad;
  RTX_CHECK(isfinite(g).all().item<bool>(), Error,
            "[anomaly] backward of '{}' produced NaN or Inf in the gradient for its input {} (shape {})", node.name(), i,
            detail::shape_str(g.sizes()));
}

// The callbacks queued during the backward pass running on this thread (null outside one).
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

// Runs the graph below `roots`. When `capture` is given (autograd::grad), gradients arriving at those
// edges are returned instead of being accumulated, and only nodes that lead to them run.
TensorList run(const TensorList& roots, const TensorList& grad_roots, bool keep_graph, bool create_graph,
               const std::vector<Edge>* capture) {
  RTX_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), ValueError,
            "[backward] got {} tensors but {} gradients", roots.size(), grad_roots.size());
  std::vector<Edge> root_edges;
  TensorList root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    RTX_CHECK(r.defined() && requires_grad(r), Error,
              "[backward] tensor {} does not require grad and has no grad_fn: nothing to differentiate (did you "
              "forget requires_grad_() on an input, or compute it under NoGradGuard?)",
              i);
    Tensor g = grad_roots.empty() ? Tensor() : grad_roots[i];
    if (!g.defined()) {
      RTX_CHECK(r.numel() == 1, ShapeError,
                "[backward] a gradient can be created implicitly only for one-element outputs, but tensor {} has "
                "shape {}; pass a gradient of that shape",
                i, detail::shape_str(r.sizes()));
      g = ones_like(r);
    } else {
      RTX_CHECK(g.sizes() == r.sizes(), ShapeError, "[backward] gradient {} has shape {} but its tensor has shape {}",
                i, detail::shape_str(g.sizes()), detail::shape_str(r.sizes()));
    }
    root_edges.push_back(gradient_edge(r));
    root_grads.push_back(std::move(g));
  }
  auto graph_root = std::make_shared<GraphRoot>(std::move(root_edges), std::move(root_grads));

  // Dependencies and a post-order (children before parents), both without recursion.
  NodeIndex index;
  std::vector<int> deps;
  std::vector<Node*> post_order;
  deps.reserve(kTypicalNodes);
  post_order.reserve(kTypicalNodes);
  {
    bool added = false;
    index.insert(graph_root.get(), &added);
    deps.push_back(0);
    std::vector<std::pair<Node*, size_t>> stack;
    stack.reserve(kTypicalNodes);
    stack.emplace_back(graph_root.get(), 0);
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next < node->next_edges().size()) {
        Node* child = node->next_edges()[next++].function.get();
        if (child == nullptr) continue;
        const size_t i = index.insert(child, &added);
        if (added) {
          deps.push_back(0);
          stack.emplace_back(child, 0);  // invalidates node and next: the loop rereads them
        }
        ++deps[i];
      } else {
        post_order.push_back(node);
        stack.pop_back();
      }
    }
  }

  // For autograd::grad: which (node, input) pairs are captured, and which nodes must run.
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  std::vector<char> needed;
  TensorList captured;
  if (capture != nullptr) {
    needed.assign(index.size(), 0);
    captured.resize(capture->size());
    for (size_t i = 0; i < capture->size(); ++i)
      if ((*capture)[i].valid()) captures[(*capture)[i].function.get()].emplace_back((*capture)[i].input_nr, i);
    for (Node* n : post_order) {
      bool need = false;
      for (const auto& e : n->next_edges()) {
        Node* c = e.function.get();
        need = need || (c != nullptr && (needed[index.at(c)] || captures.count(c)));
      }
      needed[index.at(n)] = need;
    }
  }

  const bool prev_grad_mode = is_grad_enabled();
  set_grad_enabled(create_graph);
  struct Restore {
    bool prev;
    ~Restore() { set_grad_enabled(prev); }
  } restore{prev_grad_mode};
  // Gradient ops run in the dtypes their forward ops ran in, whatever autocast region is open.
  autocast::ExcludeGuard no_autocast;

  std::vector<TensorList> buffers(index.size());  // gradients arrived at each node's inputs
  std::priority_queue<Node*, std::vector<Node*>, CompareSeq> ready;
  ready.push(graph_root.get());
  // Keeps nodes alive while they run even if the user dropped every tensor referring to them.
  std::vector<std::shared_ptr<Node>> keep_alive;
  keep_alive.reserve(post_order.size());
  const bool anomaly = is_anomaly_enabled();
  std::vector<std::function<void()>> callbacks;
  struct RestoreCallbacks {
    std::vector<std::function<void()>>* prev;
    ~RestoreCallbacks() { t_callbacks = prev; }
  } restore_callbacks{t_callbacks};
  t_callbacks = &callbacks;

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    const size_t node_id = index.at(node);
    TensorList inputs = std::move(buffers[node_id]);
    inputs.resize(node->input_meta().size());
    for (uint32_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined()) inputs[i] = node->run_hooks(i, std::move(inputs[i]));

    if (capture != nullptr) {
      if (auto it = captures.find(node); it != captures.end())
        for (auto [input_nr, idx] : it->second) {
          const Tensor& g = inputs[input_nr];
          captured[idx] = captured[idx].defined() && g.defined() ? captured[idx] + g : (g.defined() ? g : captured[idx]);
        }
      if (!needed[node_id]) continue;
    }

    bool any_grad = node == graph_root.get();
    for (const auto& g : inputs) any_grad = any_grad || g.defined();
    TensorList outputs;
    if (any_grad) {
      outputs = node->apply(std::move(inputs));
      if (!keep_graph) node->release_variables();
    }
    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      Node* child = e.function.get();
      const size_t c = index.at(child);
      if (i < outputs.size() && outputs[i].defined()) {
        Tensor g = conform_gradient(std::move(outputs[i]), child->input_meta()[e.input_nr], *node, i);
        if (anomaly) check_backward_anomaly(g, *node, i);
        TensorList& buf = buffers[c];
        if (buf.size() < child->input_meta().size()) buf.resize(child->input_meta().size());
        Tensor& slot = buf[e.input_nr];
        slot = slot.defined() ? slot + g : std::move(g);
      }
      if (--deps[c] == 0) {
        keep_alive.push_back(e.function);
        ready.push(child);
      }
    }
  }
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);  // one may queue more (reallocating)
    callback();
  }
  return captured;
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  RTX_CHECK(t_callbacks != nullptr, Error,
            "[queue_callback] no backward pass is running on this thread; callbacks can only be queued from hooks "
            "or nodes that run during backward");
  t_callbacks->push_back(std::move(callback));
}

void backward(const TensorList& tensors, const TensorList& grad_tensors, bool retain_graph, bool create_graph) {
  run(tensors, grad_tensors, retain_graph || create_graph, create_graph, nullptr);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  std::vector<Edge> edges;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RTX_CHECK(inputs[i].defined() && requires_grad(inputs[i]), Error,
              "[grad] input {} does not require grad; call requires_grad_() on it before computing the outputs", i);
    edges.push_back(gradient_edge(inputs[i]));
  }
  TensorList result = run(outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, &edges);
  for (size_t i = 0; i < result.size(); ++i) {
    RTX_CHECK(result[i].defined() || allow_unused, Error,
              "[grad] input {} was not used to compute the outputs; pass allow_unused=true to get an undefined "
              "gradient for it",
              i);
    if (result[i].defined() && result[i].sizes() != inputs[i].sizes()) result[i] = sum_to(result[i], inputs[i].sizes());
  }
  return result;
}

}  // namespace rtx::autograd
