"""optim.Adam and optim.AdamW (decoupled weight decay), with optional AMSGrad, following PyTorch's
update rule and state names (step, exp_avg, exp_avg_sq, max_exp_avg_sq)."""
import math

from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
                 maximize=False):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise ValueError(f"{type(self).__name__}: invalid lr={lr}, betas={betas}, eps={eps} or "
                             f"weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for g in self.param_groups:
            beta1, beta2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if g["maximize"] else p.grad
                state = self.state.setdefault(id(p), {})
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = _C.zeros_like(p)
                    state["exp_avg_sq"] = _C.zeros_like(p)
                    if g["amsgrad"]:
                        state["max_exp_avg_sq"] = _C.zeros_like(p)
                state["step"] += 1
                if g["weight_decay"]:
                    if self._decoupled:
                        p.mul_(1 - g["lr"] * g["weight_decay"])
                    else:
                        grad = grad + p * g["weight_decay"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.lerp_(grad, 1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                if g["amsgrad"]:
                    state["max_exp_avg_sq"] = _C.maximum(state["max_exp_avg_sq"], v)
                    v = state["max_exp_avg_sq"]
                t = state["step"]
                bias1 = 1 - beta1 ** t
                bias2 = 1 - beta2 ** t
                denom = (v.sqrt() / math.sqrt(bias2)).add_(g["eps"])
                p.addcdiv_(m, denom, value=-g["lr"] / bias1)
        return loss


class AdamW(Adam):
    """Adam with weight decay applied to the parameters directly (not through the gradient)."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False,
                 maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
