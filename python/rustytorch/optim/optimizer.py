"""optim.Optimizer: parameter groups (dicts a script may edit, e.g. g['lr']) with their
hyperparameters, per-parameter state keyed by the parameter tensor (`opt.state[p]`, as in PyTorch;
tensors hash by identity), zero_grad, add_param_group, and state_dict / load_state_dict in
PyTorch's layout (state keyed by parameter index, 'param_groups' with index lists)."""
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
        known = {p for g in self.param_groups for p in g["params"]}
        if any(p in known for p in param_group["params"]):
            raise _C.ValueError("add_param_group: some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

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

    @staticmethod
    def _l2_gradient(group, p, grad):
        """grad negated for maximize and with L2 weight decay added, as the non-decoupled rules take it."""
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        return grad

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
        params = {i: p for saved, group in zip(saved_groups, self.param_groups)
                  for i, p in zip(saved["params"], group["params"])}
        state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in params:
                state[params[key]] = _copy_to_param(params[key], value)
            else:
                state[key] = copy.deepcopy(value)
        for saved, group in zip(saved_groups, self.param_groups):
            saved["params"] = group["params"]
        self.state = state
        self.param_groups[:] = saved_groups


def _copy_to_param(param, value, key=None):
    """A copy of value (a state entry) with its tensors on param's device; floating-point tensors other
    than 'step' take param's dtype."""
    if isinstance(value, _C.Tensor):
        dtype = param.dtype if param.is_floating_point() and key != "step" else value.dtype
        return value.to(device=param.device, dtype=dtype, copy=True)
    if isinstance(value, dict):
        return {k: _copy_to_param(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_to_param(param, v) for v in value)
    return copy.deepcopy(value)
