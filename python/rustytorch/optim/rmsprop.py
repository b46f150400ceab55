"""optim.RMSprop: PyTorch's update rule (square_avg, optional centering with grad_avg, momentum with
momentum_buffer, L2 weight decay, maximize), written with in-place public ops so it runs on every device."""
from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 maximize=False):
        if lr < 0 or eps < 0 or momentum < 0 or weight_decay < 0 or alpha < 0:
            raise _C.ValueError(f"RMSprop: invalid lr={lr}, alpha={alpha}, eps={eps}, weight_decay={weight_decay} or "
                             f"momentum={momentum} (all must be >= 0)")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for g, p, grad in self._params_with_grad():
            alpha, lr = g["alpha"], g["lr"]
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = _C.zeros_like(p)
                if g["momentum"] > 0:
                    state["momentum_buffer"] = _C.zeros_like(p)
                if g["centered"]:
                    state["grad_avg"] = _C.zeros_like(p)
            state["step"] += 1
            grad = self._l2_gradient(g, p, grad)
            square_avg = state["square_avg"]
            square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
            if g["centered"]:
                grad_avg = state["grad_avg"]
                grad_avg.lerp_(grad, 1 - alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg.add_(g["eps"])
            if g["momentum"] > 0:
                buf = state["momentum_buffer"]
                buf.mul_(g["momentum"]).addcdiv_(grad, avg)
                p.add_(buf, alpha=-lr)
            else:
                p.addcdiv_(grad, avg, value=-lr)
        return loss
