"""optim.Adam and optim.AdamW (decoupled weight decay), with optional AMSGrad, following PyTorch's
update rule and state names (step, exp_avg, exp_avg_sq, max_exp_avg_sq). The update is the C++
rtx::optim::adam_update that the C++ Adam and AdamW run too."""
from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 maximize=False):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise _C.ValueError(f"{type(self).__name__}: invalid lr={lr}, betas={betas}, eps={eps} or "
                             f"weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for g, p, grad in self._params_with_grad():
            state = self.state[p]
            step = state.get("step", 0) + 1
            exp_avg, exp_avg_sq, max_exp_avg_sq = _C._adam_update(
                p, grad, state.get("exp_avg"), state.get("exp_avg_sq"), state.get("max_exp_avg_sq"), step,
                lr=g["lr"], betas=g["betas"], eps=g["eps"], weight_decay=g["weight_decay"],
                decoupled_weight_decay=self._decoupled, amsgrad=g["amsgrad"], maximize=g["maximize"])
            state["step"] = step
            state["exp_avg"] = exp_avg
            state["exp_avg_sq"] = exp_avg_sq
            if max_exp_avg_sq is not None:
                state["max_exp_avg_sq"] = max_exp_avg_sq
        return loss


class AdamW(Adam):
    """Adam with weight decay applied to the parameters directly (not through the gradient)."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
