// The Reducer of data-parallel training (include/rtx/data_parallel.h): gradient buckets filled by
// post-accumulate-grad hooks and all-reduced in a fixed order while backward runs, a callback at the
// end of backward that waits for them and writes the averages back, the search for unused parameters;
// and the coalesced broadcast and shape check that make the replicas start equal.
#include "rtx/data_parallel.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

#include "autograd/accumulate_grad.h"
#include "core/check.h"
#include "core/shape.h"
#include "rtx/autograd.h"
#include "rtx/ops.h"

namespace rtx::dist {

namespace {

constexpr const char* kWhat = "DistributedDataParallel";

struct Bucket {
  std::vector<size_t> params;    // parameter indices, in the order their gradients are expected
  std::vector<int64_t> offsets;  // each one's first element in buffer
  Tensor buffer;                 // flat, of the bucket's dtype and device
  size_t pending = 0;            // gradients still missing in this backward pass
  std::shared_ptr<Work> work;
};

// (dtype, device): what one bucket holds.
using BucketKey = std::pair<int, std::string>;
BucketKey key_of(const Tensor& t) { return {static_cast<int>(t.dtype()), t.device().str()}; }


}  // namespace

struct Reducer::State {
  std::vector<Tensor> params;
  std::vector<std::string> names;  // may be empty
  std::shared_ptr<ProcessGroup> group;
  ReducerOptions options;
  std::vector<Bucket> buckets;
  std::vector<std::pair<size_t, size_t>> where;  // parameter -> (bucket, slot)
  std::vector<int64_t> hooks;

  // One backward pass.
  bool armed = false;
  bool started = false;                   // a hook fired: the end-of-backward callback is queued
  std::vector<char> ready;                // per parameter
  std::vector<char> used;                 // per parameter: got a gradient on this rank
  std::vector<size_t> unused;             // from prepare_for_backward (find_unused_parameters)
  size_t next_bucket = 0;                 // buckets start in index order

  // "fc.weight (3)", or "3" without names.
  std::string describe(size_t i) const {
    return names.empty() ? std::to_string(i) : names[i] + " (" + std::to_string(i) + ")";
  }

  Tensor slot_view(const Bucket& b, size_t slot) const {
    const Tensor& p = params[b.params[slot]];
    return b.buffer.narrow(0, b.offsets[slot], p.numel()).view(p.sizes());
  }

  void on_gradient(size_t i, const std::weak_ptr<State>& self) {
    if (!armed) return;
    if (!started) {
      started = true;
      autograd::queue_callback([self] {
        if (auto s = self.lock()) s->finish();
      });
      for (size_t u : unused) mark_ready(u, false);
    }
    mark_ready(i, true);
  }

  void mark_ready(size_t i, bool got_gradient) {
    RTX_CHECK(!ready[i], Error,
              "[{}] parameter {} of shape {} received a gradient twice in one backward pass: a parameter may take "
              "part in one backward pass per forward (no reentrant checkpointing, no second backward through the "
              "same outputs); if it is unused, pass find_unused_parameters=True only when it really is unused",
              kWhat, describe(i), detail::shape_str(params[i].sizes()));
    ready[i] = 1;
    used[i] = got_gradient;
    Bucket& b = buckets[where[i].first];
    if (--b.pending == 0) {
      while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) launch(buckets[next_bucket++]);
    }
  }

  void launch(Bucket& b) {
    NoGradGuard no_grad;
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor g = params[b.params[k]].grad();
      Tensor view = slot_view(b, k);
      if (!g.defined()) {
        view.zero_();
      } else if (g.data_ptr() != view.data_ptr() || !g.is_contiguous()) {
        view.copy_(g);
      }
    }
    // As PyTorch does: divide, then sum (no overflow of low-precision sums, the same result everywhere).
    b.buffer.div_(static_cast<double>(group->size()));
    b.work = group->all_reduce(b.buffer, ReduceOp::Sum);
  }

  // The end of a backward pass that reached at least one parameter.
  void finish() {
    armed = false;
    started = false;
    if (next_bucket < buckets.size()) {
      std::string missing;
      for (size_t i = 0; i < params.size(); ++i)
        if (!ready[i]) missing += (missing.empty() ? "" : ", ") + describe(i);
      RTX_THROW(Error,
                "[{}] parameters {} (by index among the module's parameters that require grad) received no gradient in "
                "this backward pass, so their gradients cannot be averaged across ranks. If the model has parameters "
                "its output does not depend on, pass find_unused_parameters=True; otherwise make sure the loss "
                "depends on every output of the forward",
                kWhat, missing);
    }
    // Parameters no rank used keep their .grad untouched, as in PyTorch.
    std::vector<char> used_anywhere(params.size(), 1);
    if (options.find_unused_parameters) {
      NoGradGuard no_grad;
      Tensor flags = empty({static_cast<int64_t>(params.size())}, TensorOptions(kInt32));
      std::copy(used.begin(), used.end(), flags.data_ptr<int32_t>());
      flags = flags.to(params[0].device());
      group->all_reduce(flags, ReduceOp::Max)->wait();
      const Tensor host = flags.cpu();
      for (size_t i = 0; i < params.size(); ++i) used_anywhere[i] = host.data_ptr<int32_t>()[i] != 0;
    }
    NoGradGuard no_grad;
    for (Bucket& b : buckets) {
      b.work->wait();
      b.work.reset();
      for (size_t k = 0; k < b.params.size(); ++k) {
        Tensor p = params[b.params[k]];
        if (!used_anywhere[b.params[k]]) continue;
        Tensor view = slot_view(b, k);
        Tensor g = p.grad();
        if (options.gradient_as_bucket_view) {
          if (!g.defined() || g.data_ptr() != view.data_ptr()) p.set_grad(view);
        } else if (g.defined()) {
          g.copy_(view);
        } else {
          p.set_grad(view.clone());
        }
      }
    }
  }

  // The parameters the graph below outputs reaches.
  std::vector<char> reached_by(const TensorList& outputs) const {
    std::unordered_map<const detail::TensorImpl*, size_t> index;
    for (size_t i = 0; i < params.size(); ++i) index[params[i].impl()] = i;
    std::vector<char> reached(params.size(), 0);
    std::vector<autograd::Node*> stack;
    std::unordered_map<autograd::Node*, bool> seen;
    for (const Tensor& t : outputs) {
      if (!t.defined()) continue;
      if (auto it = index.find(t.impl()); it != index.end()) reached[it->second] = 1;
      if (auto fn = t.grad_fn(); fn && !seen[fn.get()]) {
        seen[fn.get()] = true;
        stack.push_back(fn.get());
      }
    }
    while (!stack.empty()) {
      autograd::Node* n = stack.back();
      stack.pop_back();
      if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n)) {
        if (auto it = index.find(acc->leaf().get()); it != index.end()) reached[it->second] = 1;
      }
      for (const autograd::Edge& e : n->next_edges()) {
        autograd::Node* c = e.function.get();
        if (c != nullptr && !seen[c]) {
          seen[c] = true;
          stack.push_back(c);
        }
      }
    }
    return reached;
  }
};

Reducer::Reducer(std::vector<Tensor> parameters, std::shared_ptr<ProcessGroup> group, ReducerOptions options,
                 std::vector<std::string> names)
    : state_(std::make_shared<State>()) {
  RTX_CHECK(group != nullptr, ValueError, "[{}] the process group is None (is this process in the group?)", kWhat);
  RTX_CHECK(!parameters.empty(), ValueError,
            "[{}] the module has no parameter that requires a gradient: there is nothing to synchronize", kWhat);
  RTX_CHECK(names.empty() || names.size() == parameters.size(), ValueError, "[{}] {} names for {} parameters", kWhat,
            names.size(), parameters.size());
  RTX_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_bytes > 0, ValueError,
            "[{}] bucket sizes must be positive (bucket_cap_mb > 0)", kWhat);
  State& s = *state_;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    RTX_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), ValueError,
              "[{}] parameter {} is not a leaf tensor that requires grad", kWhat, i);
    RTX_CHECK(is_floating(p.dtype()), DTypeError, "[{}] parameter {} has dtype {}; gradients need a floating dtype",
              kWhat, i, p.dtype());
    for (size_t j = 0; j < i; ++j) {
      RTX_CHECK(parameters[j].impl() != p.impl(), ValueError, "[{}] parameter {} is listed twice (also at {})", kWhat,
                i, j);
    }
  }
  s.params = std::move(parameters);
  s.names = std::move(names);
  s.group = std::move(group);
  s.options = options;
  // Buckets in reverse parameter order, per (dtype, device); the first one closes early.
  std::map<BucketKey, size_t> open;  // key -> index of the bucket being filled
  std::vector<size_t> bytes;
  for (size_t n = s.params.size(); n-- > 0;) {
    const Tensor& p = s.params[n];
    const BucketKey key = key_of(p);
    const size_t size = static_cast<size_t>(p.numel()) * element_size(p.dtype());
    auto it = open.find(key);
    if (it != open.end()) {
      const size_t cap = it->second == 0 ? options.first_bucket_bytes : options.bucket_cap_bytes;
      if (bytes[it->second] > 0 && bytes[it->second] + size > cap) {
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      it = open.emplace(key, s.buckets.size()).first;
      s.buckets.emplace_back();
      bytes.push_back(0);
    }
    Bucket& b = s.buckets[it->second];
    b.offsets.push_back(b.params.empty() ? 0 : b.offsets.back() + s.params[b.params.back()].numel());
    b.params.push_back(n);
    bytes[it->second] += size;
  }
  s.where.resize(s.params.size());
  for (size_t bi = 0; bi < s.buckets.size(); ++bi) {
    Bucket& b = s.buckets[bi];
    const Tensor& first = s.params[b.params[0]];
    b.buffer = zeros({b.offsets.back() + s.params[b.params.back()].numel()},
                     TensorOptions(first.dtype(), first.device()));
    for (size_t k = 0; k < b.params.size(); ++k) s.where[b.params[k]] = {bi, k};
  }
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    s.hooks.push_back(s.params[i].register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto st = weak.lock()) st->on_gradient(i, weak);
    }));
  }
}

Reducer::~Reducer() {
  for (size_t i = 0; i < state_->params.size(); ++i) state_->params[i].remove_hook(state_->hooks[i]);
}

void Reducer::prepare_for_backward(const TensorList& outputs) {
  State& s = *state_;
  s.armed = true;
  s.started = false;
  s.next_bucket = 0;
  s.ready.assign(s.params.size(), 0);
  s.used.assign(s.params.size(), 0);
  for (Bucket& b : s.buckets) b.pending = b.params.size();
  s.unused.clear();
  if (s.options.find_unused_parameters) {
    const std::vector<char> reached = s.reached_by(outputs);
    for (size_t i = 0; i < s.params.size(); ++i)
      if (!reached[i]) s.unused.push_back(i);
  }
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : state_->buckets) out.push_back(b.params);
  return out;
}

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, size_t buffer_bytes, int src) {
  RTX_CHECK(buffer_bytes > 0, ValueError, "[broadcast_coalesced] the buffer size must be positive");
  NoGradGuard no_grad;
  size_t i = 0;
  while (i < tensors.size()) {
    // The run of tensors of one dtype and device that fits in one buffer (at least one tensor).
    const BucketKey key = key_of(tensors[i]);
    size_t j = i, bytes = 0;
    while (j < tensors.size() && key_of(tensors[j]) == key &&
           (j == i || bytes + tensors[j].nbytes() <= buffer_bytes)) {
      bytes += tensors[j].nbytes();
      ++j;
    }
    TensorList flat;
    for (size_t k = i; k < j; ++k) flat.push_back(tensors[k].reshape({-1}));
    Tensor buffer = cat(flat, 0);
    group.broadcast(buffer, src)->wait();
    if (group.rank() != src) {
      int64_t offset = 0;
      for (size_t k = i; k < j; ++k) {
        Tensor t = tensors[k];
        t.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
    i = j;
  }
}

void verify_same_shapes(ProcessGroup& group, const std::vector<Tensor>& tensors, const char* what) {
  // FNV-1a over (dtype, rank, sizes) of every tensor: equal on every rank when the models are.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const Tensor& t : tensors) {
    mix(static_cast<uint64_t>(t.dtype()));
    mix(static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.sizes()) mix(static_cast<uint64_t>(d));
  }
  const Device device = tensors.empty() ? Device() : tensors[0].device();
  NoGradGuard no_grad;
  Tensor mine = tensor<int64_t>({static_cast<int64_t>(tensors.size()), static_cast<int64_t>(h >> 1)}).to(device);
  Tensor all = empty({2 * static_cast<int64_t>(group.size())}, TensorOptions(kInt64, device));
  group.all_gather_into_tensor(all, mine)->wait();
  const Tensor host = all.cpu();
  const int64_t* v = host.data_ptr<int64_t>();
  for (int r = 1; r < group.size(); ++r) {
    RTX_CHECK(v[2 * r] == v[0] && v[2 * r + 1] == v[1], ValueError,
              "[{}] rank {} of the group has {} tensors (shape signature {}), rank 0 has {} (signature {}): every rank "
              "must wrap the same model, with the same parameter shapes and dtypes in the same order",
              what, r, v[2 * r], v[2 * r + 1], v[0], v[1]);
  }
}

}  // namespace rtx::dist
