// The oneDNN convolution kernels of the CPU backend (conv_onednn.h). Tensors are handed over in the
// plain layouts they have (NCHW activations, OIHW or GOIHW weights); each primitive picks its own
// layouts (blocked ones such as nChw16c, where its fast kernels need them), and conversions on the way
// in and out go through buffers from the library's allocator: channel_blocks.h between float32 NCHW
// and nChw16c with whole channel blocks, oneDNN's reorder primitives otherwise. A primitive, its reorders and
// their memory descriptions are made once per problem and kept in a small LRU cache keyed by the
// direction, dtype, geometry, algorithm and OpenMP thread count (oneDNN fixes a primitive's thread
// split when it is made, so rtx::set_num_threads gets new primitives). Scratchpads are the caller's
// (user scratchpad mode), so threads may run one primitive at the same time. Below the "highest"
// float32 matmul precision, float32 convolutions (forward, input and weight gradients) use Winograd's
// F(4x4, 3x3) where oneDNN has it (3x3 kernels, stride 1): faster on layers of 16 channels or more,
// with errors of about 1e-6 of the output's scale where a direct sum has 4e-7. A backward pass
// computes the input gradient and then the weight gradient from the same output gradient: the first
// keeps its conversion of that gradient to the blocked layout, and the second uses it instead of
// converting it again when the tensor is the same one, unwritten since (its storage and version).
#include "backend/cpu/conv_onednn.h"

#include <omp.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dnnl.hpp>

#include "backend/cpu/channel_blocks.h"
#include "backend/cpu/onednn_signals.h"
#include "core/check.h"
#include "core/tensor_impl.h"
#include "rtx/settings.h"

namespace rtx::cpu {
namespace {

using dnnl::memory;
using kernels::Conv2dParams;
using Tag = memory::format_tag;

std::atomic<bool> g_enabled{true};
std::atomic<int64_t> g_runs{0};

dnnl::engine& engine() {
  static auto* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // never destroyed, like the plans
  return *e;
}

enum class Direction : int64_t { Forward, BackwardInput, BackwardWeight };

// One convolution problem: sizes of the input, weight and output, the geometry, whether the forward
// adds a bias (the weight gradient: computes the bias gradient), and whether Winograd's algorithm may
// compute it.
struct Problem {
  Direction direction;
  DType dtype;
  bool bias;
  Shape x, w, y;
  Conv2dParams p;
  bool winograd;
};

using Key = std::array<int64_t, 22>;

Key key_of(const Problem& pr) {
  const Conv2dParams& p = pr.p;
  return {static_cast<int64_t>(pr.direction), static_cast<int64_t>(pr.dtype), pr.bias, pr.x[0], pr.x[1], pr.x[2],
          pr.x[3], pr.w[0], pr.w[1], pr.w[2], pr.w[3], pr.y[2], pr.y[3], p.stride[0], p.stride[1], p.padding[0],
          p.padding[1], p.dilation[0], p.dilation[1], p.groups, pr.winograd, omp_get_max_threads()};
}

// Whether Winograd's algorithm may compute a convolution (any direction): float32 when the
// float32 matmul precision is below "highest" (as TF32 may on the GPU), with at least 16 input and
// output channels per group (oneDNN pads channels to 16: on a first layer's one input channel it is
// slower than a direct convolution).
bool allows_winograd(DType dtype, const Shape& weight, int64_t groups) {
  return dtype == kFloat32 && weight[0] / groups >= 16 && weight[1] >= 16 && get_float32_matmul_precision() != "highest";
}

// A primitive (a convolution or a reorder) and the scratchpad it asks for.
struct Step {
  dnnl::primitive primitive;
  memory::desc scratch;
};

// How an operand gets from its plain layout to the convolution's (inputs) or back (the output).
enum class Conversion { kNone, kChannelBlocks, kReorder };

// One tensor argument of the convolution: its plain layout, the convolution's, and the conversion
// between them: none when they are the same, channel_blocks.h between float32 NCHW and nChw16c with
// whole channel blocks, else a reorder primitive (plain to inner for inputs, inner to plain for the
// output).
struct Operand {
  int arg;
  bool output;
  memory::desc plain, inner;
  Conversion conversion = Conversion::kNone;
  std::optional<Step> reorder;
};

struct Plan {
  Step conv;
  std::vector<Operand> operands;
};

// ---- making plans -------------------------------------------------------------------------------

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

memory::data_type data_type_of(DType t) { return t == kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32; }

memory::desc activation_desc(const Shape& s, DType t) { return {dims_of(s), data_type_of(t), Tag::nchw}; }

// [O, C / groups, kH, kW] is oneDNN's [groups, O / groups, C / groups, kH, kW] with groups.
memory::desc weight_desc(const Shape& w, int64_t groups, DType t) {
  if (groups == 1) return {dims_of(w), data_type_of(t), Tag::oihw};
  return {{groups, w[0] / groups, w[1], w[2], w[3]}, data_type_of(t), Tag::goihw};
}

// The same dims and dtype, the layout left to the primitive.
memory::desc any_layout(const memory::desc& plain) { return {plain.dims(), plain.data_type(), Tag::any}; }

// The layout of an activation in the primitive: the primitive's choice, except that fewer than 16
// channels stay NCHW (blocked layouts pad the channels to 16: a first layer's input gradient would
// compute and reorder 16 channels for one).
memory::desc activation_layout(const memory::desc& plain) { return plain.dims()[1] < 16 ? plain : any_layout(plain); }

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Whether a float32 activation goes between NCHW and nChw16c with whole channel blocks.
bool whole_channel_blocks(const memory::desc& plain, const memory::desc& inner) {
  const memory::dims dims = plain.dims();
  return dims.size() == 4 && dims[1] % 16 == 0 && plain == memory::desc(dims, memory::data_type::f32, Tag::nchw) &&
         inner == memory::desc(dims, memory::data_type::f32, Tag::nChw16c);
}

Operand operand(int arg, bool output, const memory::desc& plain, const memory::desc& inner) {
  Operand op{arg, output, plain, inner, Conversion::kNone, std::nullopt};
  if (plain == inner) return op;
  if (whole_channel_blocks(plain, inner)) {
    op.conversion = Conversion::kChannelBlocks;
    return op;
  }
  const memory::desc& from = output ? inner : plain;
  const memory::desc& to = output ? plain : inner;
  const dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, user_scratchpad());
  op.conversion = Conversion::kReorder;
  op.reorder = Step{dnnl::reorder(pd), pd.scratchpad_desc()};
  return op;
}

// oneDNN's reference implementations are far slower than the im2col kernels.
template <typename PrimitiveDesc>
bool is_fast(const PrimitiveDesc& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
}

// The plan of a problem with the given algorithm; throws dnnl::error when oneDNN has none.
std::shared_ptr<const Plan> make_plan(const Problem& pr, dnnl::algorithm algorithm) {
  using namespace dnnl;
  const Conv2dParams& p = pr.p;
  const memory::desc x = activation_desc(pr.x, pr.dtype), y = activation_desc(pr.y, pr.dtype);
  const memory::desc w = weight_desc(pr.w, p.groups, pr.dtype);
  const memory::desc b = pr.bias ? memory::desc({pr.w[0]}, data_type_of(pr.dtype), Tag::x) : memory::desc();
  const memory::dims strides{p.stride[0], p.stride[1]}, padding{p.padding[0], p.padding[1]};
  const memory::dims dilates{p.dilation[0] - 1, p.dilation[1] - 1};  // oneDNN counts the gaps
  const auto forward = [&](const memory::desc& bias) {
    return convolution_forward::desc(prop_kind::forward_training, algorithm, activation_layout(x), any_layout(w),
                                     bias, activation_layout(y), strides, dilates, padding, padding);
  };
  const primitive_attr attr = user_scratchpad();
  auto plan = std::make_shared<Plan>();
  switch (pr.direction) {
    case Direction::Forward: {
      const convolution_forward::primitive_desc pd(forward(b), attr, engine());
      if (!is_fast(pd)) return nullptr;
      plan->conv = {convolution_forward(pd), pd.scratchpad_desc()};
      plan->operands = {operand(DNNL_ARG_SRC, false, x, pd.src_desc()),
                        operand(DNNL_ARG_WEIGHTS, false, w, pd.weights_desc())};
      if (pr.bias) plan->operands.push_back(operand(DNNL_ARG_BIAS, false, b, pd.bias_desc()));
      plan->operands.push_back(operand(DNNL_ARG_DST, true, y, pd.dst_desc()));
      break;
    }
    case Direction::BackwardInput: {
      const convolution_forward::primitive_desc hint(forward(memory::desc()), engine());
      const convolution_backward_data::primitive_desc pd(
          convolution_backward_data::desc(algorithm, activation_layout(x), any_layout(w), activation_layout(y),
                                          strides, dilates, padding, padding),
          attr, engine(), hint);
      if (!is_fast(pd)) return nullptr;
      plan->conv = {convolution_backward_data(pd), pd.scratchpad_desc()};
      plan->operands = {operand(DNNL_ARG_DIFF_DST, false, y, pd.diff_dst_desc()),
                        operand(DNNL_ARG_WEIGHTS, false, w, pd.weights_desc()),
                        operand(DNNL_ARG_DIFF_SRC, true, x, pd.diff_src_desc())};
      break;
    }
    case Direction::BackwardWeight: {
      const convolution_forward::primitive_desc hint(forward(b), engine());
      const convolution_backward_weights::primitive_desc pd(
          convolution_backward_weights::desc(algorithm, activation_layout(x), any_layout(w), b, activation_layout(y),
                                             strides, dilates, padding, padding),
          attr, engine(), hint);
      if (!is_fast(pd)) return nullptr;
      plan->conv = {convolution_backward_weights(pd), pd.scratchpad_desc()};
      plan->operands = {operand(DNNL_ARG_DIFF_DST, false, y, pd.diff_dst_desc()),
                        operand(DNNL_ARG_SRC, false, x, pd.src_desc()),
                        operand(DNNL_ARG_DIFF_WEIGHTS, true, w, pd.diff_weights_desc())};
      if (pr.bias) plan->operands.push_back(operand(DNNL_ARG_DIFF_BIAS, true, b, pd.diff_bias_desc()));
      break;
    }
  }
  return plan;
}

// The plan of a problem (Winograd's when allowed and implemented for it), or null when oneDNN has
// no fast implementation of it.
std::shared_ptr<const Plan> make_plan(const Problem& pr) {
  if (pr.winograd) {
    try {
      if (auto plan = make_plan(pr, dnnl::algorithm::convolution_winograd)) return plan;
    } catch (const dnnl::error&) {  // not for this geometry: a direct convolution then
    }
  }
  try {
    return make_plan(pr, dnnl::algorithm::convolution_direct);
  } catch (const dnnl::error&) {
    return nullptr;  // unimplemented here (dtype, ISA or geometry): the im2col kernels take it
  }
}

// The plans of recent problems, most recently used first; a problem oneDNN rejects is remembered
// as a null plan.
class PlanCache {
 public:
  std::shared_ptr<const Plan> get(const Problem& pr) {
    const Key key = key_of(pr);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
    }
    std::shared_ptr<const Plan> plan = make_plan(pr);  // outside the lock: making a primitive is slow
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.count(key) == 0) {
      order_.emplace_front(key, plan);
      index_.emplace(key, order_.begin());
      if (order_.size() > kCapacity) {
        index_.erase(order_.back().first);
        order_.pop_back();
      }
    }
    return plan;
  }

 private:
  static constexpr size_t kCapacity = 64;
  struct Hash {
    size_t operator()(const Key& key) const {
      uint64_t h = 1469598103934665603ULL;  // FNV-1a over the words
      for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
      return static_cast<size_t>(h);
    }
  };
  using Entry = std::pair<Key, std::shared_ptr<const Plan>>;
  std::mutex mutex_;
  std::list<Entry> order_;
  std::unordered_map<Key, std::list<Entry>::iterator, Hash> index_;
};

PlanCache& plans() {
  static auto* cache = new PlanCache();  // never destroyed: kernels may run during static destruction
  return *cache;
}

// ---- running plans ------------------------------------------------------------------------------

// An input operand of a finished run in the layout its convolution wanted: the tensor it came from
// (the storage, held weakly, its version and data pointer), both layouts and the converted data.
struct Converted {
  std::weak_ptr<detail::Storage> storage;
  uint64_t version = 0;
  const void* data = nullptr;
  memory::desc plain, inner;
  Tensor buffer;

  bool holds(const Tensor& t, const Operand& op) const {
    return buffer.defined() && storage.lock() == t.impl()->storage && version == t.version() &&
           data == t.data_ptr() && plain == op.plain && inner == op.inner;
  }
};

// The output gradient as the last input-gradient run on this thread converted it; any later run
// takes it out (the next weight-gradient run may use it), so it lives until the next convolution.
thread_local Converted t_converted_grad_out;

// Runs a plan on the data of its operands (in plan order); intermediate layouts and scratchpads live
// in CPU tensors until the stream finishes.
class Run {
 public:
  explicit Run(const Plan& plan) : plan_(plan), stream_(engine()) {}

  // grad_out: the output-gradient operand of a backward direction (undefined for the forward).
  void operator()(Direction direction, const std::vector<void*>& data, const Tensor& grad_out) {
    Converted earlier = std::move(t_converted_grad_out);
    t_converted_grad_out = Converted();
    std::unordered_map<int, memory> args;
    std::vector<std::pair<const Operand*, std::pair<memory, memory>>> after;  // outputs: (inner, plain)
    for (size_t i = 0; i < plan_.operands.size(); ++i) {
      const Operand& op = plan_.operands[i];
      const memory plain(op.plain, engine(), data[i]);
      if (op.conversion == Conversion::kNone) {
        args.emplace(op.arg, plain);
        continue;
      }
      const bool is_grad_out = op.arg == DNNL_ARG_DIFF_DST;
      if (is_grad_out && direction == Direction::BackwardWeight && earlier.holds(grad_out, op)) {
        args.emplace(op.arg, memory(op.inner, engine(), earlier.buffer.data_ptr()));
        continue;
      }
      const memory inner(op.inner, engine(), buffer(op.inner));
      if (op.output)
        after.emplace_back(&op, std::make_pair(inner, plain));
      else
        convert(op, plain, inner);
      args.emplace(op.arg, inner);
      if (is_grad_out && direction == Direction::BackwardInput)
        earlier = Converted{grad_out.impl()->storage, grad_out.version(), data[i], op.plain, op.inner, buffers_.back()};
    }
    execute(plan_.conv, std::move(args));
    for (auto& [op, inner_plain] : after) convert(*op, inner_plain.first, inner_plain.second);
    stream_.wait();
    if (direction == Direction::BackwardInput) t_converted_grad_out = std::move(earlier);
  }

 private:
  void* buffer(const memory::desc& md) {
    buffers_.push_back(detail::make_tensor({static_cast<int64_t>(md.get_size())}, kUInt8, Device(kCPU)));
    return buffers_.back().data_ptr();
  }
  // Converts op's data from `from` to `to` (plain to inner for an input, inner to plain for the output).
  void convert(const Operand& op, const memory& from, const memory& to) {
    if (op.conversion == Conversion::kReorder) {
      execute(*op.reorder, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
      return;
    }
    stream_.wait();  // the primitives before it have written `from`
    const memory::dims dims = op.plain.dims();
    const auto* src = static_cast<const float*>(from.get_data_handle());
    auto* dst = static_cast<float*>(to.get_data_handle());
    if (op.output)
      from_channel_blocks(dst, src, dims[0], dims[1], dims[2] * dims[3]);
    else
      to_channel_blocks(dst, src, dims[0], dims[1], dims[2] * dims[3]);
  }
  void execute(const Step& step, std::unordered_map<int, memory> args) {
    if (step.scratch.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(step.scratch, engine(), buffer(step.scratch)));
    block_async_signals_in_omp_workers();  // onednn_signals.h says why
    AsyncSignalsBlocked no_signals;
    step.primitive.execute(stream_, args);
  }

  const Plan& plan_;
  dnnl::stream stream_;
  std::vector<Tensor> buffers_;
};

bool takes(std::initializer_list<const Tensor*> operands) {
  if (!g_enabled.load(std::memory_order_relaxed)) return false;
  for (const Tensor* t : operands)
    if (t->numel() == 0 || (t->dtype() != kFloat32 && t->dtype() != kBFloat16)) return false;
  return true;
}

// Runs pr on data when oneDNN takes it; op names the kernel in errors; grad_out is the output
// gradient of a backward problem.
bool run(const char* op, const Problem& pr, const std::vector<void*>& data, const Tensor& grad_out = Tensor()) {
  const std::shared_ptr<const Plan> plan = plans().get(pr);
  if (!plan) return false;
  try {
    Run execution(*plan);
    execution(pr.direction, data, grad_out);
  } catch (const dnnl::error& e) {
    RTX_THROW(Error, "[{}] oneDNN failed: {} (status {})", op, e.what(), static_cast<int>(e.status));
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool onednn_conv2d(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   const Conv2dParams& p) {
  if (!takes({&out, &x, &weight}) || (bias.defined() && !takes({&bias}))) return false;
  const Problem pr{Direction::Forward, x.dtype(), bias.defined(), x.sizes(), weight.sizes(), out.sizes(), p,
                   allows_winograd(x.dtype(), weight.sizes(), p.groups)};
  std::vector<void*> data{x.data_ptr(), weight.data_ptr()};
  if (bias.defined()) data.push_back(bias.data_ptr());
  data.push_back(out.data_ptr());
  return run("conv2d", pr, data);
}

bool onednn_conv2d_backward_input(const Tensor& grad_x, const Tensor& grad_out, const Tensor& weight,
                                  const Conv2dParams& p) {
  if (!takes({&grad_x, &grad_out, &weight})) return false;
  const Problem pr{Direction::BackwardInput, grad_x.dtype(), false, grad_x.sizes(), weight.sizes(), grad_out.sizes(),
                   p, allows_winograd(grad_x.dtype(), weight.sizes(), p.groups)};
  return run("conv2d_backward_input", pr, {grad_out.data_ptr(), weight.data_ptr(), grad_x.data_ptr()}, grad_out);
}

bool onednn_conv2d_backward_weight(const Tensor& grad_w, const Tensor& grad_b, const Tensor& grad_out,
                                   const Tensor& x, const Conv2dParams& p) {
  if (!takes({&grad_w, &grad_out, &x}) || (grad_b.defined() && !takes({&grad_b}))) return false;
  const Problem pr{Direction::BackwardWeight, grad_w.dtype(), grad_b.defined(), x.sizes(), grad_w.sizes(),
                   grad_out.sizes(), p, allows_winograd(grad_w.dtype(), grad_w.sizes(), p.groups)};
  std::vector<void*> data{grad_out.data_ptr(), x.data_ptr(), grad_w.data_ptr()};
  if (grad_b.defined()) data.push_back(grad_b.data_ptr());
  return run("conv2d_backward_weight", pr, data, grad_out);
}

bool onednn_conv_has_bfloat16() {
  static const bool has = [] {
    kernels::Conv2dParams p;
    p.padding[0] = p.padding[1] = 1;
    const Problem probe{Direction::Forward, kBFloat16, false, {1, 16, 8, 8}, {16, 16, 3, 3}, {1, 16, 8, 8}, p, false};
    return plans().get(probe) != nullptr;
  }();
  return has;
}

bool onednn_conv_enabled() { return g_enabled.load(); }
void set_onednn_conv_enabled(bool on) { g_enabled.store(on); }
int64_t onednn_conv_runs() { return g_runs.load(); }

}  // namespace rtx::cpu
