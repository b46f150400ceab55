"""optim.SGD: stochastic gradient descent with momentum, dampening, Nesterov and weight decay, with
PyTorch's update rule and arguments, computed by the C++ rtx::optim::sgd_update_multi that the C++
SGD runs too: with foreach or fused (and by default on CUDA) once per parameter group, else once per
parameter, bit for bit the same. fused takes a GradScaler's grad_scale and found_inf; lr may be a
tensor; master_weights is as in Adam (this library's extension)."""
import functools

from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer, _check_flags


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None, master_weights=False):
        if isinstance(lr, _C.Tensor) and lr.numel() != 1:
            raise _C.ValueError(f"SGD: Tensor lr must be 1-element, got shape {tuple(lr.shape)}")
        if float(lr) < 0 or momentum < 0 or weight_decay < 0:
            raise _C.ValueError(f"SGD: invalid lr={lr}, momentum={momentum} or weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise _C.ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0")
        _check_flags("SGD", foreach, fused, differentiable)
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused, master_weights=master_weights))

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        scaling = self._amp_scaling()
        for g, params, states in self._groups_with_grads():
            columns = [[p.grad for p in params], [s.get("momentum_buffer") for s in states],
                       [s.get("master_param") for s in states]]
            update = functools.partial(
                _C._sgd_update_multi, lr=g["lr"], momentum=g["momentum"], dampening=g["dampening"],
                weight_decay=g["weight_decay"], nesterov=g["nesterov"], maximize=g["maximize"],
                master_weights=g["master_weights"], **scaling)
            if self._uses_multi_tensor(g, params):
                _store(states, update(params, *columns))
            else:
                for i, p in enumerate(params):
                    _store([states[i]], update([p], *([column[i]] for column in columns)))
        return loss


def _store(states, results):
    for state, buffer, master in zip(states, *results):
        if buffer is not None:
            state["momentum_buffer"] = buffer
        if master is not None:
            state["master_param"] = master
