"""optim.Adagrad: PyTorch's update rule (accumulated squared gradients in 'sum', learning-rate decay
lr / (1 + (step - 1) * lr_decay), L2 weight decay, maximize), written with in-place public ops so it
runs on every device. As in PyTorch, the state of the constructor's parameters exists from the start."""
from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer


class Adagrad(Optimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 maximize=False):
        if lr < 0 or lr_decay < 0 or weight_decay < 0 or initial_accumulator_value < 0 or eps < 0:
            raise _C.ValueError(f"Adagrad: invalid lr={lr}, lr_decay={lr_decay}, weight_decay={weight_decay}, "
                             f"initial_accumulator_value={initial_accumulator_value} or eps={eps} "
                             "(all must be >= 0)")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize))
        for g in self.param_groups:
            for p in g["params"]:
                self._init_state(p)

    def _init_state(self, p):
        # PyTorch fills 'sum' with the constructor's initial_accumulator_value, also for groups added later
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["sum"] = _C.full_like(p, self.defaults["initial_accumulator_value"])
        return state

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        for g, p, grad in self._params_with_grad():
            state = self._init_state(p)
            state["step"] += 1
            grad = self._l2_gradient(g, p, grad)
            clr = g["lr"] / (1 + (state["step"] - 1) * g["lr_decay"])
            state_sum = state["sum"]
            state_sum.addcmul_(grad, grad, value=1)
            std = state_sum.sqrt().add_(g["eps"])
            p.addcdiv_(grad, std, value=-clr)
        return loss
