"""optim.Optimizer: parameter groups with their hyperparameters, per-parameter state, zero_grad,
and state_dict / load_state_dict in PyTorch's layout (parameters named by their index)."""
import copy

from .. import _C


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        for group in params:
            self.add_param_group(group)

    def add_param_group(self, group):
        group = dict(group)
        ps = group["params"]
        group["params"] = [ps] if isinstance(ps, _C.Tensor) else list(ps)
        for p in group["params"]:
            if not p.requires_grad:
                raise ValueError("optimizer can only optimize tensors that require grad")
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad = p.grad.detach() * 0

    def _params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self):
        index = {id(p): i for i, p in enumerate(self._params())}
        groups = []
        for g in self.param_groups:
            entry = {k: v for k, v in g.items() if k != "params"}
            entry["params"] = [index[id(p)] for p in g["params"]]
            groups.append(entry)
        state = {index[id(p)]: {k: (v.clone() if isinstance(v, _C.Tensor) else v) for k, v in s.items()}
                 for p, s in ((p, self.state.get(id(p))) for p in self._params()) if s is not None}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups) or any(
                len(a["params"]) != len(b["params"]) for a, b in zip(groups, self.param_groups)):
            raise ValueError("load_state_dict: the saved parameter groups do not match this optimizer's")
        params = self._params()
        for saved, group in zip(groups, self.param_groups):
            for k, v in saved.items():
                if k != "params":
                    group[k] = copy.deepcopy(v)
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            self.state[id(p)] = {k: (v.to(p.device).clone() if isinstance(v, _C.Tensor) else v) for k, v in s.items()}
