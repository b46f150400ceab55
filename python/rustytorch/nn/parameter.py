"""nn.Parameter: a tensor that a Module registers as one of its parameters (requires grad by default).
Parameters deep-copy (copy.deepcopy of a module) but do not pickle: checkpoints go through
state_dict() and rustytorch.save."""
from .. import _C


class Parameter(_C.Tensor):
    """A tensor sharing data's memory, registered by modules as a parameter."""

    def __init__(self, data=None, requires_grad=True):
        super().__init__(data if data is not None else _C.empty(0))
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        """A Parameter over a copy of the data, with the same requires_grad (as PyTorch's, without .grad)."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.data.clone(), self.requires_grad)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        raise TypeError("Parameters are saved through state_dict() and rustytorch.save")
