// rtx::optim: SGD, Adam and AdamW with PyTorch's update rules, parameter groups, per-parameter state
// and state dicts. The update math is also available as free functions, for one parameter or for
// lists of parameters (multi-tensor: the tensors of one device and dtype in one or a few kernel
// launches, bit for bit what the one-parameter functions compute); the Python optimizers call the
// same functions.
//
//   rtx::optim::AdamW opt(model->parameters(), {/*lr=*/3e-4});
//   for (...) { opt.zero_grad(); loss(model).backward(); opt.step(); }
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rtx/export.h"
#include "rtx/tensor.h"

namespace rtx::optim {

// ---- options ------------------------------------------------------------------------------------------

struct SgdOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0
  bool maximize = false;  // ascend the objective instead
  // float16/bfloat16 parameters are updated through float32 copies (state "master_param"; the state
  // tensors are float32 too), which they receive rounded. Other parameters are their own masters.
  bool master_weights = false;
};

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas{0.9, 0.999};  // decay rates of the first and second moment estimates
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;  // AdamW: decay the parameters instead of adding to the gradient
  bool amsgrad = false;
  bool maximize = false;
  bool master_weights = false;  // as SgdOptions::master_weights
};

// ValueError naming the offending option and value.
RTX_API void validate(const SgdOptions& options);
RTX_API void validate(const AdamOptions& options);

// ---- update rules (in place, without recording gradients) ------------------------------------------------

// One SGD step of param given its gradient (PyTorch's rule):
//   d = grad (negated when maximizing) + weight_decay * param
//   buf = d on the first step, else momentum * buf + (1 - dampening) * d         (when momentum != 0)
//   d = d + momentum * buf (nesterov) or buf
//   param -= lr * d
// momentum_buffer may be undefined: it is created on the first step with momentum. master_weights
// needs sgd_update_multi (ValueError).
RTX_API void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdOptions& options);

// One Adam/AdamW step of param given its gradient; step counts the updates including this one (1 first).
//   g = grad (negated when maximizing); param *= 1 - lr * weight_decay (decoupled) or g += weight_decay * param
//   exp_avg = lerp(exp_avg, g, 1 - beta1);  exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
//   v = exp_avg_sq, or max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq) with amsgrad
//   param -= lr / (1 - beta1^step) * exp_avg / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// Undefined state tensors are created as zeros (max_exp_avg_sq only with amsgrad). master_weights
// needs adam_update_multi (ValueError).
RTX_API void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                         Tensor& max_exp_avg_sq, int64_t step, const AdamOptions& options);

// What a multi-tensor step may read from tensors instead of the host, so that loss scaling needs no
// synchronization and no host value changes between steps (a CUDA graph can capture the step).
// Undefined members are not used. Tensors on the CPU serve parameters on any device.
struct DeviceScalars {
  Tensor lr;          // 1-element float tensor, in place of the options' lr
  Tensor grad_scale;  // 1-element float32: every gradient is divided by it first, and stored so (unscaled)
  Tensor found_inf;   // 1-element float32: when nonzero, the step changes nothing (step counts included)
};

// The multi-tensor steps update every params[i] with grads[i] by the rules above. State lists hold
// one entry per parameter (an empty list stands for undefined entries); undefined entries are created
// on first use, and the lists come back filled: momentum_buffers (with momentum), exp_avgs,
// exp_avg_sqs, max_exp_avg_sqs (with amsgrad) and, with master_weights, master_params (the float32
// copies of the 16-bit parameters; other entries stay undefined). Parameters may be on several
// devices and of several dtypes: each device and dtype is one kernel call. Non-contiguous tensors are
// updated through contiguous copies. The results are bit for bit those of the one-parameter functions.
RTX_API void sgd_update_multi(const TensorList& params, const TensorList& grads, TensorList& momentum_buffers,
                              TensorList& master_params, const SgdOptions& options, const DeviceScalars& scalars = {});

// steps: the number of updates each parameter has had, kept by the host; each one is incremented.
// scalars.found_inf needs the step counts in tensors (ValueError), which the other overload takes.
RTX_API void adam_update_multi(const TensorList& params, const TensorList& grads, TensorList& exp_avgs,
                               TensorList& exp_avg_sqs, TensorList& max_exp_avg_sqs, TensorList& master_params,
                               std::vector<int64_t>& steps, const AdamOptions& options,
                               const DeviceScalars& scalars = {});
// steps: 1-element float32 tensors on the parameters' devices (undefined ones are created as zeros),
// which the kernels increment and read, so that the bias corrections are computed on the device.
RTX_API void adam_update_multi(const TensorList& params, const TensorList& grads, TensorList& exp_avgs,
                               TensorList& exp_avg_sqs, TensorList& max_exp_avg_sqs, TensorList& master_params,
                               TensorList& steps, const AdamOptions& options, const DeviceScalars& scalars = {});

// ---- optimizers ----------------------------------------------------------------------------------------

// The state of one parameter under PyTorch's names: the step count (Adam) and tensors such as
// "momentum_buffer" (SGD) or "exp_avg", "exp_avg_sq", "max_exp_avg_sq" (Adam). Empty until its first step.
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;
};

template <typename Options>
struct ParamGroup {
  TensorList params;
  Options options;
};

// What state_dict() returns and load_state_dict() takes: a copy of the groups' options and of every
// parameter's state, parameters numbered by their position across the groups (PyTorch's layout).
template <typename Options>
struct OptimizerStateDict {
  struct Group {
    Options options;
    size_t num_params = 0;
  };
  std::vector<Group> param_groups;
  std::vector<ParamState> state;  // one per parameter, the groups' parameters in order
};

// What every optimizer offers, whatever its options: a training loop or a learning-rate schedule can
// hold any optimizer through it.
class RTX_API Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient.
  virtual void step() = 0;
  // Sets every parameter's gradient to undefined.
  void zero_grad();
  size_t num_param_groups() const { return group_params_.size(); }
  const TensorList& params(size_t group = 0) const;
  // The learning rate of a group, and setting it for one group or for all.
  virtual double lr(size_t group = 0) const = 0;
  virtual void set_lr(size_t group, double lr) = 0;
  void set_lr(double lr);
  // The state of a parameter of this optimizer (empty before its first step); ValueError for another tensor.
  ParamState& state(const Tensor& param);

 protected:
  Optimizer() = default;
  // Checks params (non-empty; defined floating leaves that require grad and belong to no group yet)
  // and appends them as a group.
  void add_params(TensorList params, const char* optimizer);
  // Copies of every parameter's state, in order.
  std::vector<ParamState> copy_state() const;
  // Replaces the state with copies of saved (one per parameter, in order) on the parameters' devices,
  // floating tensors in their parameter's dtype, or float32 for the 16-bit parameters of the groups
  // that keep master weights.
  void load_state(const std::vector<size_t>& saved_group_sizes, const std::vector<ParamState>& saved,
                  const std::vector<bool>& master_weights);
  // The group index, or IndexError.
  size_t checked_group(size_t group, const char* what) const;

 private:
  std::vector<TensorList> group_params_;
  std::unordered_map<const void*, ParamState> state_;  // one entry per parameter (keyed by its TensorImpl)
};

// Parameter groups with options of one kind; SGD and Adam build on it.
template <typename Options>
class RTX_API OptimizerWithOptions : public Optimizer {
 public:
  using StateDict = OptimizerStateDict<Options>;

  // Adds a group (options checked with validate()).
  void add_param_group(ParamGroup<Options> group) {
    validate(group.options);
    add_params(std::move(group.params), name_);
    options_.push_back(group.options);
  }
  Options& options(size_t group = 0) { return options_[checked_group(group, "options")]; }
  const Options& options(size_t group = 0) const { return options_[checked_group(group, "options")]; }
  double lr(size_t group = 0) const override { return options(group).lr; }
  void set_lr(size_t group, double lr) override {
    Options changed = options(group);
    changed.lr = lr;
    validate(changed);
    options(group) = changed;
  }
  using Optimizer::set_lr;

  // A copy of the options and state: later steps do not change it.
  StateDict state_dict() const {
    StateDict out;
    for (size_t g = 0; g < num_param_groups(); ++g) out.param_groups.push_back({options_[g], params(g).size()});
    out.state = copy_state();
    return out;
  }
  // Takes the options and a copy of the state; the groups must have as many parameters as the saved
  // ones (ValueError) and the state tensors their parameters' shapes (ShapeError).
  void load_state_dict(const StateDict& saved) {
    std::vector<size_t> sizes;
    std::vector<bool> master_weights;
    for (const auto& group : saved.param_groups) {
      validate(group.options);
      sizes.push_back(group.num_params);
      master_weights.push_back(group.options.master_weights);
    }
    load_state(sizes, saved.state, master_weights);
    for (size_t g = 0; g < saved.param_groups.size(); ++g) options_[g] = saved.param_groups[g].options;
  }

 protected:
  OptimizerWithOptions(std::vector<ParamGroup<Options>> groups, const char* name) : name_(name) {
    for (auto& group : groups) add_param_group(std::move(group));
  }

 private:
  const char* name_;
  std::vector<Options> options_;
};

// Stochastic gradient descent (sgd_update_multi); state "momentum_buffer" when momentum != 0 and
// "master_param" with master weights.
class RTX_API SGD : public OptimizerWithOptions<SgdOptions> {
 public:
  SGD(TensorList params, SgdOptions options = {});
  explicit SGD(std::vector<ParamGroup<SgdOptions>> groups);
  void step() override;
};

// Adam (adam_update_multi); state "step", "exp_avg", "exp_avg_sq", with amsgrad "max_exp_avg_sq" and
// with master weights "master_param".
class RTX_API Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  Adam(TensorList params, AdamOptions options = {});
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);
  void step() override;

 protected:
  Adam(std::vector<ParamGroup<AdamOptions>> groups, const char* name);
};

// Adam with decoupled weight decay: every group's options get decoupled_weight_decay set. The default
// options are PyTorch's AdamW defaults (weight_decay 1e-2); options given are taken as they are.
class RTX_API AdamW : public Adam {
 public:
  static AdamOptions default_options();
  AdamW(TensorList params, AdamOptions options = default_options());
  explicit AdamW(std::vector<ParamGroup<AdamOptions>> groups);
  void add_param_group(ParamGroup<AdamOptions> group);
};

}  // namespace rtx::optim
