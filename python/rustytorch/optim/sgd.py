"""optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay
(PyTorch's update rule)."""
from ..autograd import no_grad
from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: invalid lr={lr}, momentum={momentum} or weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                d = -p.grad if g["maximize"] else p.grad
                if g["weight_decay"]:
                    d = d + p * g["weight_decay"]
                if g["momentum"]:
                    state = self.state.setdefault(id(p), {})
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        buf = d.clone()
                    else:
                        buf.mul_(g["momentum"]).add_(d * (1 - g["dampening"]))
                    state["momentum_buffer"] = buf
                    d = d + buf * g["momentum"] if g["nesterov"] else buf
                p.sub_(d * g["lr"])
        return loss
