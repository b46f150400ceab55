// optim::Optimizer: parameter groups, per-parameter state, zero_grad and the state copies that
// state_dict / load_state_dict exchange.
#include <unordered_set>

#include "check_update.h"
#include "core/check.h"
#include "core/shape.h"
#include "rtx/optim.h"

namespace rtx::optim {

Optimizer::~Optimizer() = default;

void Optimizer::zero_grad() {
  for (auto& group : group_params_)
    for (auto& p : group) p.set_grad(Tensor());
}

size_t Optimizer::checked_group(size_t group, const char* what) const {
  RTX_CHECK(group < group_params_.size(), IndexError, "[{}] parameter group {} is out of range for {} groups", what,
            group, group_params_.size());
  return group;
}

const TensorList& Optimizer::params(size_t group) const { return group_params_[checked_group(group, "params")]; }

void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < group_params_.size(); ++g) set_lr(g, lr);
}

ParamState& Optimizer::state(const Tensor& param) {
  const auto found = state_.find(param.impl());
  RTX_CHECK(found != state_.end(), ValueError, "[state] the tensor (shape {}) is not a parameter of this optimizer",
            param.defined() ? rtx::detail::shape_str(param.sizes()) : "undefined");
  return found->second;
}

void Optimizer::add_params(TensorList params, const char* optimizer) {
  RTX_CHECK(!params.empty(), ValueError, "[{}] got an empty parameter list", optimizer);
  std::unordered_set<const void*> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    RTX_CHECK(p.defined(), ValueError, "[{}] parameter {} is undefined", optimizer, i);
    RTX_CHECK(p.is_floating_point(), DTypeError, "[{}] parameter {} has dtype {}; only floating tensors can be optimized",
              optimizer, i, p.dtype());
    RTX_CHECK(p.requires_grad() && p.is_leaf(), ValueError,
              "[{}] parameter {} must be a leaf that requires grad (shape {})", optimizer, i,
              rtx::detail::shape_str(p.sizes()));
    RTX_CHECK(state_.count(p.impl()) == 0 && seen.insert(p.impl()).second, ValueError,
              "[{}] parameter {} (shape {}) appears more than once among the parameter groups", optimizer, i,
              rtx::detail::shape_str(p.sizes()));
  }
  for (const auto& p : params) state_.emplace(p.impl(), ParamState());
  group_params_.push_back(std::move(params));
}

std::vector<ParamState> Optimizer::copy_state() const {
  std::vector<ParamState> out;
  for (const auto& group : group_params_) {
    for (const auto& p : group) {
      const ParamState& own = state_.at(p.impl());
      ParamState copy;
      copy.step = own.step;
      for (const auto& [name, t] : own.tensors)
        if (t.defined()) copy.tensors.emplace(name, t.clone());
      out.push_back(std::move(copy));
    }
  }
  return out;
}

void Optimizer::load_state(const std::vector<size_t>& saved_group_sizes, const std::vector<ParamState>& saved,
                           const std::vector<bool>& master_weights) {
  std::vector<size_t> own_sizes;
  for (const auto& group : group_params_) own_sizes.push_back(group.size());
  RTX_CHECK(saved_group_sizes == own_sizes, ValueError,
            "[load_state_dict] the saved parameter groups have sizes [{}] but this optimizer's have [{}]",
            fmt::join(saved_group_sizes, ", "), fmt::join(own_sizes, ", "));
  size_t total = 0;
  for (size_t n : own_sizes) total += n;
  RTX_CHECK(saved.size() == total, ValueError, "[load_state_dict] the state holds {} parameters but the groups {}",
            saved.size(), total);
  std::unordered_map<const void*, ParamState> loaded;
  size_t index = 0;
  for (size_t g = 0; g < group_params_.size(); ++g) {
    for (const auto& p : group_params_[g]) {
      const ParamState& entry = saved[index];
      ParamState copy;
      copy.step = entry.step;
      for (const auto& [name, t] : entry.tensors) {
        if (!t.defined()) continue;
        RTX_CHECK(t.sizes() == p.sizes(), ShapeError,
                  "[load_state_dict] parameter {}: state '{}' has shape {} but the parameter has shape {}", index, name,
                  rtx::detail::shape_str(t.sizes()), rtx::detail::shape_str(p.sizes()));
        const DType dtype = t.is_floating_point() ? detail::state_dtype(p, master_weights[g]) : t.dtype();
        copy.tensors.emplace(name, t.to(p.device(), dtype, false, /*copy=*/true));
      }
      loaded.emplace(p.impl(), std::move(copy));
      ++index;
    }
  }
  state_ = std::move(loaded);
}

}  // namespace rtx::optim
