// Gradient checkpointing: forward keeps only the inputs and the RNG state; backward replays the
// function with recording on and back-propagates through the replay.
#include "autocast/policy.h"
#include "autograd/function.h"
#include "core/check.h"
#include "rtx/ops.h"

namespace rtx::autograd {

TensorList checkpoint(const std::function<TensorList(const TensorList&)>& fn, const TensorList& inputs) {
  const GeneratorState rng = get_rng_state();
  const autocast::detail::ThreadState autocast_state = autocast::detail::thread_state();
  std::function<TensorList(const TensorList&)> replay = fn;
  return apply_function(
      "checkpoint", inputs,
      [&fn](FunctionCtx& ctx, const TensorList& in) {
        ctx.save_for_backward(in);
        return fn(in);
      },
      [replay, rng, autocast_state](FunctionCtx& ctx, const TensorList& grads) {
        TensorList saved = ctx.saved_tensors();
        TensorList detached;
        for (const auto& t : saved) {
          Tensor d = t.detach();
          if (is_floating(d.dtype()) && requires_grad(t)) d.requires_grad_(true);
          detached.push_back(d);
        }
        TensorList outs;
        {
          const GeneratorState now = get_rng_state();
          set_rng_state(rng);
          EnableGradGuard enable;
          autocast::detail::ReplayGuard forward_autocast(autocast_state);
          outs = replay(detached);
          set_rng_state(now);
        }
        TensorList roots, root_grads;
        for (size_t i = 0; i < outs.size() && i < grads.size(); ++i) {
          if (outs[i].defined() && requires_grad(outs[i]) && grads[i].defined()) {
            roots.push_back(outs[i]);
            root_grads.push_back(grads[i]);
          }
        }
        if (!roots.empty()) backward(roots, root_grads);
        TensorList result;
        for (const auto& d : detached) result.push_back(requires_grad(d) ? d.grad() : Tensor());
        return result;
      });
}

}  // namespace rtx::autograd
