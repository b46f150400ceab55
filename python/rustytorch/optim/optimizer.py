"""optim.Optimizer: parameter groups (dicts a script may edit, e.g. g['lr']) with their
hyperparameters, per-parameter state keyed by the parameter tensor (`opt.state[p]`, as in PyTorch;
tensors hash by identity), zero_grad, add_param_group, and state_dict / load_state_dict in
PyTorch's layout (state keyed by parameter index, 'param_groups' with index lists). Also what the
optimizers with multi-tensor (foreach / fused) implementations share: PyTorch's checks of those
flags, its choice of implementation, and the forms of a step count (a Python int, or a float32
tensor on the parameter's device for capturable and fused groups)."""
import copy
from collections import defaultdict

from .. import _C
from ..autograd import enable_grad


class Optimizer:
    def __init__(self, params, defaults):
        if isinstance(params, _C.Tensor):
            raise TypeError("optimizer params must be an iterable of tensors or dicts, got a single tensor; "
                            "pass [tensor] or model.parameters()")
        if isinstance(params, set):
            raise TypeError("optimizer params must be an ordered collection (a set's order changes between runs)")
        self.defaults = dict(defaults)
        self.state = defaultdict(dict)
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise _C.ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group):
        """Appends param_group (the dict itself, as PyTorch does) after filling in the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"add_param_group: param_group must be a dict, got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, set):
            raise TypeError("add_param_group: params must be an ordered collection, not a set")
        param_group["params"] = [params] if isinstance(params, _C.Tensor) else list(params)
        for p in param_group["params"]:
            if not isinstance(p, _C.Tensor):
                raise TypeError(f"optimizer can only optimize tensors, but one of the params is a {type(p).__name__}")
            if not p.is_leaf:
                raise _C.ValueError(f"optimizer can't optimize a non-leaf tensor (shape {tuple(p.shape)}); "
                                 "optimize the leaf it was computed from")
        for key, value in self.defaults.items():
            param_group.setdefault(key, value)
        if param_group.get("fused"):
            for p in param_group["params"]:
                _check_fused(p)
        known = {p for g in self.param_groups for p in g["params"]}
        if any(p in known for p in param_group["params"]):
            raise _C.ValueError("add_param_group: some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    @property
    def _step_supports_amp_scaling(self):
        """Whether step() takes a GradScaler's grad_scale and found_inf itself (every group fused):
        a property, since load_state_dict may bring back groups of another implementation."""
        return all(g.get("fused") for g in self.param_groups)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_()
                    p.grad.zero_()

    def step(self, closure=None):
        raise NotImplementedError

    def _params_with_grad(self):
        """(group, parameter, gradient) for every parameter that has a gradient, group by group."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p, p.grad

    def _groups_with_grads(self):
        """(group, its parameters that have a gradient, their state dicts) for every group with any."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                yield group, params, [self.state[p] for p in params]

    def _amp_scaling(self):
        """The grad_scale and found_inf a GradScaler set for this step of a fused optimizer (else None)."""
        return dict(grad_scale=getattr(self, "grad_scale", None), found_inf=getattr(self, "found_inf", None))

    @staticmethod
    def _l2_gradient(group, p, grad):
        """grad negated for maximize and with L2 weight decay added, as the non-decoupled rules take it."""
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        return grad

    @staticmethod
    def _uses_multi_tensor(group, params):
        """Whether the group steps through the multi-tensor path: with fused or foreach, and when both
        are None (PyTorch's default) if every parameter is a CUDA tensor and a tensor lr comes with
        capturable."""
        if group.get("fused") or group.get("foreach"):
            return True
        if group.get("fused") is not None or group.get("foreach") is not None or group.get("differentiable"):
            return False
        tensor_lr = isinstance(group["lr"], _C.Tensor) and not group.get("capturable")
        return not tensor_lr and all(p.is_cuda for p in params)

    @staticmethod
    def _run_closure(closure):
        """closure() with gradients enabled (step runs under no_grad, the closure calls backward), or None."""
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def state_dict(self):
        """{'state': {index: state}, 'param_groups': [{..., 'params': [index, ...]}]}. Like PyTorch's,
        the state tensors are the optimizer's own (save or clone them before the next step)."""
        index = {}
        groups = []
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(p, len(index))
            entry["params"] = [index[p] for p in g["params"]]
            groups.append(entry)
        state = {(index[p] if isinstance(p, _C.Tensor) else p): s for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restores hyperparameters and state from state_dict (copied: nothing is shared with it).
        Floating-point state tensors take their parameter's dtype, every tensor its device."""
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise _C.ValueError(f"load_state_dict: the saved state has {len(saved_groups)} parameter groups, "
                             f"this optimizer {len(self.param_groups)}")
        for i, (saved, group) in enumerate(zip(saved_groups, self.param_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise _C.ValueError(f"load_state_dict: parameter group {i} holds {len(saved['params'])} parameters "
                                 f"in the saved state and {len(group['params'])} in this optimizer")
        params = {i: (p, saved) for saved, group in zip(saved_groups, self.param_groups)
                  for i, p in zip(saved["params"], group["params"])}
        for saved in saved_groups:  # checkpoints from before a hyperparameter existed
            for key, value in self.defaults.items():
                saved.setdefault(key, value)
        state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in params:
                param, saved = params[key]
                state[param] = _copy_to_param(param, value, saved)
            else:
                state[key] = copy.deepcopy(value)
        for saved, group in zip(saved_groups, self.param_groups):
            saved["params"] = group["params"]
        self.state = state
        self.param_groups[:] = saved_groups


def _copy_to_param(param, value, group, key=None):
    """A copy of value (a state entry of param, in group) with its tensors on param's device:
    floating-point tensors take param's dtype (float32 for the master weights of 16-bit parameters
    and their state), step counts the form the group keeps them in."""
    if key == "step":
        return _step_count(value, param, group, copy=True)
    if isinstance(value, _C.Tensor):
        dtype = _state_dtype(param, group) if param.is_floating_point() else value.dtype
        return value.to(device=param.device, dtype=dtype, copy=True)
    if isinstance(value, dict):
        return {k: _copy_to_param(param, v, group, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_to_param(param, v, group) for v in value)
    return copy.deepcopy(value)


def _state_dtype(param, group):
    """The dtype of param's floating-point state: float32 for a float16/bfloat16 parameter of a group
    that keeps master weights, else param's own."""
    if group.get("master_weights") and param.dtype in (_C.float16, _C.bfloat16):
        return _C.float32
    return param.dtype


def _step_count(value, param, group, copy=False):
    """A step count in the form group keeps it: a 0-d float32 tensor on param's device for capturable
    and fused groups (None, a new parameter's, stays None: the update creates it), else a Python int.
    A kept tensor is passed on as it is unless copy is set (the update checks it: a 1-element float32
    tensor on param's device); a copy is converted to that form."""
    if group.get("capturable") or group.get("fused"):
        if isinstance(value, _C.Tensor):
            return value.reshape(()).to(device=param.device, dtype=_C.float32, copy=True) if copy else value
        return None if value is None else _C.full((), float(value), dtype=_C.float32, device=param.device)
    if isinstance(value, _C.Tensor):
        return int(value.item())
    return 0 if value is None else int(value)


def _check_flags(name, foreach, fused, differentiable):
    """PyTorch's checks of the implementation flags."""
    if fused and differentiable:
        raise _C.ValueError(f"{name}: `fused` does not support `differentiable`")
    if fused and foreach:
        raise _C.ValueError(f"{name}: `fused` and `foreach` cannot be `True` together.")
    if differentiable:
        raise _C.ValueError(f"{name}: differentiable=True is not supported: the update runs in fused kernels, "
                            "outside autograd")


def _check_fused(p):
    if not (p.is_floating_point() and p.device.type in ("cpu", "cuda")):
        raise _C.DTypeError("`fused=True` requires all the params to be floating point Tensors of supported devices: "
                            f"['cpu', 'cuda'] but {p.dtype} and {p.device.type}")
