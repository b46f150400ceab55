// Module::state_dict and load_state_dict: parameters and buffers under PyTorch's dotted keys, and
// loading them back with every mismatch reported before anything is copied.
#include "core/check.h"
#include "core/shape.h"
#include "rtx/autograd.h"
#include "rtx/nn.h"

namespace rtx::nn {

TensorDict Module::state_dict() const {
  TensorDict out;
  for (const auto& [prefix, module] : prefixed_modules()) {
    for (const auto& [name, p] : module->parameters_) out.insert(prefix + name, p.detach());
    for (const auto& [name, b] : module->buffers_) out.insert(prefix + name, b.detach());
  }
  return out;
}

LoadStateDictResult load_into(const TensorDict& own, const TensorDict& state, bool strict, const std::string& owner) {
  LoadStateDictResult result;
  for (const auto& [key, target] : own)
    if (!state.contains(key)) result.missing_keys.push_back(key);
  for (const auto& [key, value] : state)
    if (!own.contains(key)) result.unexpected_keys.push_back(key);
  RTX_CHECK(!strict || (result.missing_keys.empty() && result.unexpected_keys.empty()), ValueError,
            "[load_state_dict] {}: missing keys [{}], unexpected keys [{}]", owner,
            fmt::join(result.missing_keys, ", "), fmt::join(result.unexpected_keys, ", "));
  for (const auto& [key, value] : state) {
    if (!own.contains(key)) continue;
    const Tensor& target = own.at(key);
    RTX_CHECK(value.defined(), ValueError, "[load_state_dict] {}: '{}' is undefined in the state dict", owner, key);
    RTX_CHECK(value.sizes() == target.sizes(), ShapeError,
              "[load_state_dict] {}: '{}' has shape {} in the state dict but {} in the module", owner, key,
              detail::shape_str(value.sizes()), detail::shape_str(target.sizes()));
  }
  NoGradGuard no_grad;
  for (const auto& [key, target] : own) {
    if (!state.contains(key)) continue;
    Tensor alias = target;  // a handle sharing the module tensor's storage
    alias.copy_(state.at(key));
  }
  return result;
}

LoadStateDictResult Module::load_state_dict(const TensorDict& state, bool strict) {
  return load_into(state_dict(), state, strict, name());
}

}  // namespace rtx::nn
