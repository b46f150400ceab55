// CPU kernels of the fused optimizer updates (kernels/common/adam_step.h, sgd_step.h): the tensors one
// after the other, each split over threads by element ranges. Adam without master weights, AMSGrad or
// a gradient scale, and SGD without master weights or a gradient scale, run branch-free loops, also
// built for AVX2 and AVX-512 (vector_isa.h).
#include <type_traits>

#include "backend/cpu/parallel.h"
#include "backend/cpu/vector_isa.h"
#include "core/dtype_dispatch.h"
#include "dispatch/optim.h"

namespace rtx::cpu {
namespace {

template <typename S>
S* optional_ptr(const TensorList& list, size_t i) {
  return list.empty() ? nullptr : static_cast<S*>(list[i].data_ptr());
}

bool skipped(const kernels::StepScalars& scalars) {
  return scalars.found_inf != nullptr && *scalars.found_inf != 0.0f;
}

// Adam without master weights, AMSGrad or a gradient scale over elements [0, n): the loop's own
// pointers and options hold the absent tensors as null and the flags as constants, so that the
// compiler sees them and the loop has no branch left to keep it from vectorizing.
template <typename T, typename S>
void plain_adam_steps(const kernels::AdamPointers<T, S>& p, const kernels::AdamStep& step, int64_t n) {
  const auto run = [&](auto maximize, auto decoupled, auto decay) {
    kernels::AdamStep s = step;
    s.maximize = decltype(maximize)::value;
    s.decoupled_weight_decay = decltype(decoupled)::value;
    if constexpr (!decltype(decay)::value) s.weight_decay = 0;
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      with_vector_isa([&, s] {
        const kernels::AdamPointers<T, S> plain{p.param, p.grad, nullptr, p.exp_avg, p.exp_avg_sq, nullptr};
        for (int64_t k = b; k < e; ++k) kernels::adam_step_element(plain, k, s, nullptr);
      });
    });
  };
  using Yes = std::true_type;
  using No = std::false_type;
  const auto with_decay = [&](auto maximize) {
    if (step.weight_decay == 0)
      run(maximize, No{}, No{});
    else if (step.decoupled_weight_decay)
      run(maximize, Yes{}, Yes{});
    else
      run(maximize, No{}, Yes{});
  };
  if (step.maximize)
    with_decay(Yes{});
  else
    with_decay(No{});
}

// SGD without master weights or a gradient scale over elements [0, n), its flags constants of the loop
// as in plain_adam_steps.
template <typename T, typename S>
void plain_sgd_steps(const kernels::SgdPointers<T, S>& p, const kernels::SgdStep& step, int64_t n) {
  const auto run = [&](auto maximize, auto decay, auto momentum, auto first, auto nesterov) {
    kernels::SgdStep s = step;
    s.maximize = decltype(maximize)::value;
    s.first = decltype(first)::value;
    s.nesterov = decltype(nesterov)::value;
    if constexpr (!decltype(decay)::value) s.weight_decay = 0;
    parallel_for(n, kGrainSize, [&](int64_t b, int64_t e) {
      with_vector_isa([&] {
        const kernels::SgdPointers<T, S> plain{p.param, p.grad, nullptr,
                                               decltype(momentum)::value ? p.momentum_buffer : nullptr};
        const kernels::SgdStep local = s;  // in registers: the loop's stores cannot alias it
        for (int64_t k = b; k < e; ++k) kernels::sgd_step_element(plain, k, local, nullptr);
      });
    });
  };
  using Yes = std::true_type;
  using No = std::false_type;
  const auto with_momentum = [&](auto maximize, auto decay) {
    if (p.momentum_buffer == nullptr)
      run(maximize, decay, No{}, No{}, No{});
    else if (step.first)
      step.nesterov ? run(maximize, decay, Yes{}, Yes{}, Yes{}) : run(maximize, decay, Yes{}, Yes{}, No{});
    else
      step.nesterov ? run(maximize, decay, Yes{}, No{}, Yes{}) : run(maximize, decay, Yes{}, No{}, No{});
  };
  const auto with_decay = [&](auto maximize) {
    if (step.weight_decay == 0)
      with_momentum(maximize, No{});
    else
      with_momentum(maximize, Yes{});
  };
  if (step.maximize)
    with_decay(Yes{});
  else
    with_decay(No{});
}

void adam_multi_step_cpu(const kernels::AdamTensors& t, const kernels::AdamStep& step,
                         const kernels::StepScalars& scalars) {
  if (skipped(scalars)) return;
  kernels::dispatch_param_and_state_types(
      t.params[0].dtype(), !t.masters.empty(), "adam_update", [&](auto param_type, auto state_type) {
    using T = decltype(param_type);
    using S = decltype(state_type);
    for (size_t i = 0; i < t.params.size(); ++i) {
      kernels::AdamStep s = step;
      if (scalars.lr != nullptr) s.lr = *scalars.lr;
      if (!t.steps.empty()) {
        float* count = t.steps[i].data_ptr<float>();
        *count += 1.0f;
        s.set_step(*count);
      }
      const kernels::AdamPointers<T, S> p{t.params[i].data_ptr<T>(),  t.grads[i].data_ptr<T>(),
                                          optional_ptr<S>(t.masters, i), t.exp_avgs[i].data_ptr<S>(),
                                          t.exp_avg_sqs[i].data_ptr<S>(), optional_ptr<S>(t.max_exp_avg_sqs, i)};
      if (p.master == nullptr && p.max_exp_avg_sq == nullptr && scalars.grad_scale == nullptr) {
        plain_adam_steps(p, s, t.params[i].numel());
        continue;
      }
      parallel_for(t.params[i].numel(), kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) kernels::adam_step_element(p, k, s, scalars.grad_scale);
      });
    }
  });
}

void sgd_multi_step_cpu(const kernels::SgdTensors& t, const kernels::SgdStep& step,
                        const kernels::StepScalars& scalars) {
  if (skipped(scalars)) return;
  kernels::SgdStep s = step;
  if (scalars.lr != nullptr) s.lr = *scalars.lr;
  kernels::dispatch_param_and_state_types(
      t.params[0].dtype(), !t.masters.empty(), "sgd_update", [&](auto param_type, auto state_type) {
    using T = decltype(param_type);
    using S = decltype(state_type);
    for (size_t i = 0; i < t.params.size(); ++i) {
      const kernels::SgdPointers<T, S> p{t.params[i].data_ptr<T>(), t.grads[i].data_ptr<T>(),
                                         optional_ptr<S>(t.masters, i), optional_ptr<S>(t.momentum_buffers, i)};
      if (p.master == nullptr && scalars.grad_scale == nullptr) {
        plain_sgd_steps(p, s, t.params[i].numel());
        continue;
      }
      parallel_for(t.params[i].numel(), kGrainSize, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) kernels::sgd_step_element(p, k, s, scalars.grad_scale);
      });
    }
  });
}

}  // namespace

RTX_REGISTER_KERNELS(optim_cpu) { RTX_OPTIM_KERNELS(RTX_SET_CPU_KERNEL) }

}  // namespace rtx::cpu
