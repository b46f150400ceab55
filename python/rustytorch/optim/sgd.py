"""optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay
(PyTorch's update rule, computed by the C++ rtx::optim::sgd_update that the C++ SGD runs too)."""
from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise _C.ValueError(f"SGD: invalid lr={lr}, momentum={momentum} or weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise _C.ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for g, p, grad in self._params_with_grad():
            buf = self.state[p].get("momentum_buffer") if g["momentum"] else None
            buf = _C._sgd_update(p, grad, buf, lr=g["lr"], momentum=g["momentum"], dampening=g["dampening"],
                                 weight_decay=g["weight_decay"], nesterov=g["nesterov"], maximize=g["maximize"])
            if buf is not None:
                self.state[p]["momentum_buffer"] = buf
        return loss
