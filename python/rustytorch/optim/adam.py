"""optim.Adam and optim.AdamW (decoupled weight decay), with optional AMSGrad, following PyTorch's
update rule, arguments and state names (step, exp_avg, exp_avg_sq, max_exp_avg_sq). The update is
the C++ rtx::optim::adam_update_multi that the C++ Adam and AdamW run too: with foreach or fused
(and by default on CUDA) once per parameter group, else once per parameter, bit for bit the same.

capturable and fused keep each step count in a float32 tensor on the parameter's device and compute
the bias corrections there, so a step reads no host value that changes (lr may be a tensor); fused
also takes a GradScaler's grad_scale and found_inf (`_step_supports_amp_scaling`). master_weights
(this library's extension) updates float16/bfloat16 parameters through float32 copies kept in
state["master_param"], with float32 moments."""
import functools

from .. import _C
from ..autograd import no_grad
from .optimizer import Optimizer, _check_flags, _step_count

_STATE = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "master_param")


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False, master_weights=False):
        name = type(self).__name__
        if isinstance(lr, _C.Tensor):
            if foreach and not capturable:
                raise _C.ValueError(f"{name}: lr as a Tensor is not supported for capturable=False and foreach=True")
            if lr.numel() != 1:
                raise _C.ValueError(f"{name}: Tensor lr must be 1-element, got shape {tuple(lr.shape)}")
        if not (float(lr) >= 0 and eps >= 0 and 0 <= betas[0] < 1 and 0 <= betas[1] < 1 and weight_decay >= 0):
            raise _C.ValueError(f"{name}: invalid lr={lr}, betas={betas}, eps={eps} or weight_decay={weight_decay}")
        _check_flags(name, foreach, fused, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay, master_weights=master_weights))

    @no_grad()
    def step(self, closure=None):
        loss = self._run_closure(closure)
        scaling = self._amp_scaling()
        for g, params, states in self._groups_with_grads():
            columns = [[p.grad for p in params]] + [[s.get(k) for s in states] for k in _STATE]
            columns.append([_step_count(s.get("step"), p, g) for s, p in zip(states, params)])
            update = functools.partial(
                _C._adam_update_multi, capturable=bool(g["capturable"] or g["fused"]), lr=g["lr"], betas=g["betas"],
                eps=g["eps"], weight_decay=g["weight_decay"], decoupled_weight_decay=g["decoupled_weight_decay"],
                amsgrad=g["amsgrad"], maximize=g["maximize"], master_weights=g["master_weights"], **scaling)
            if self._uses_multi_tensor(g, params):
                _store(states, update(params, *columns))
            else:
                for i, p in enumerate(params):
                    _store([states[i]], update([p], *([column[i]] for column in columns)))
        return loss


def _store(states, results):
    """Puts the updated state lists (exp_avg, exp_avg_sq, max_exp_avg_sq, master_param, step) into the
    parameters' state dicts, leaving out what a parameter does not have."""
    *tensors, steps = results
    for i, state in enumerate(states):
        state["step"] = steps[i]
        for name, column in zip(_STATE, tensors):
            if column[i] is not None:
                state[name] = column[i]


class AdamW(Adam):
    """Adam with weight decay applied to the parameters directly (not through the gradient)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None,
                 master_weights=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, master_weights=master_weights)
