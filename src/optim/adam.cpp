// optim::Adam and optim::AdamW: apply adam_update to every parameter with a gradient, keeping its step
// count and moment estimates.
#include "rtx/optim.h"

namespace rtx::optim {
namespace {

std::vector<ParamGroup<AdamOptions>> decoupled(std::vector<ParamGroup<AdamOptions>> groups) {
  for (auto& group : groups) group.options.decoupled_weight_decay = true;
  return groups;
}

// The state tensor called name, or undefined.
Tensor find(const std::map<std::string, Tensor>& tensors, const char* name) {
  const auto found = tensors.find(name);
  return found == tensors.end() ? Tensor() : found->second;
}

}  // namespace

Adam::Adam(TensorList params, AdamOptions options)
    : Adam(std::vector<ParamGroup<AdamOptions>>{{std::move(params), options}}, "Adam") {}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) : Adam(std::move(groups), "Adam") {}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups, const char* name)
    : OptimizerWithOptions(std::move(groups), name) {}

void Adam::step() {
  for (size_t g = 0; g < num_param_groups(); ++g) {
    const AdamOptions& o = options(g);
    for (Tensor p : params(g)) {
      const Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& st = state(p);
      Tensor exp_avg = find(st.tensors, "exp_avg"), exp_avg_sq = find(st.tensors, "exp_avg_sq");
      Tensor max_exp_avg_sq = find(st.tensors, "max_exp_avg_sq");
      adam_update(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, st.step + 1, o);
      st.step += 1;
      st.tensors["exp_avg"] = exp_avg;
      st.tensors["exp_avg_sq"] = exp_avg_sq;
      if (max_exp_avg_sq.defined()) st.tensors["max_exp_avg_sq"] = max_exp_avg_sq;
    }
  }
}

AdamOptions AdamW::default_options() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  o.decoupled_weight_decay = true;
  return o;
}

AdamW::AdamW(TensorList params, AdamOptions options)
    : AdamW(std::vector<ParamGroup<AdamOptions>>{{std::move(params), options}}) {}

AdamW::AdamW(std::vector<ParamGroup<AdamOptions>> groups) : Adam(decoupled(std::move(groups)), "AdamW") {}

void AdamW::add_param_group(ParamGroup<AdamOptions> group) {
  group.options.decoupled_weight_decay = true;
  Adam::add_param_group(std::move(group));
}

}  // namespace rtx::optim
