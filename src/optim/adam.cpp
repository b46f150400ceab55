// optim::Adam and optim::AdamW: apply adam_update_multi to the parameters with a gradient, group by
// group, keeping their step counts, moment estimates and master weights.
#include "multi_step.h"
#include "rtx/optim.h"

namespace rtx::optim {
namespace {

std::vector<ParamGroup<AdamOptions>> decoupled(std::vector<ParamGroup<AdamOptions>> groups) {
  for (auto& group : groups) group.options.decoupled_weight_decay = true;
  return groups;
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
    TensorList with_grad, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, masters;
    std::vector<int64_t> steps;
    for (const Tensor& p : params(g)) {
      if (!p.grad().defined()) continue;
      const ParamState& st = state(p);
      with_grad.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(detail::find_state(st.tensors, "exp_avg"));
      exp_avg_sqs.push_back(detail::find_state(st.tensors, "exp_avg_sq"));
      max_exp_avg_sqs.push_back(detail::find_state(st.tensors, "max_exp_avg_sq"));
      masters.push_back(detail::find_state(st.tensors, "master_param"));
      steps.push_back(st.step);
    }
    if (with_grad.empty()) continue;
    adam_update_multi(with_grad, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, masters, steps, o);
    for (size_t i = 0; i < with_grad.size(); ++i) {
      ParamState& st = state(with_grad[i]);
      st.step = steps[i];
      st.tensors["exp_avg"] = exp_avgs[i];
      st.tensors["exp_avg_sq"] = exp_avg_sqs[i];
      if (max_exp_avg_sqs[i].defined()) st.tensors["max_exp_avg_sq"] = max_exp_avg_sqs[i];
      if (masters[i].defined()) st.tensors["master_param"] = masters[i];
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
