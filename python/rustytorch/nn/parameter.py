"""nn.Parameter: a tensor that a Module registers as one of its parameters (requires grad by default)."""
from .. import _C


class Parameter(_C.Tensor):
    """A tensor sharing data's memory, registered by modules as a parameter."""

    def __init__(self, data=None, requires_grad=True):
        super().__init__(data if data is not None else _C.empty(0))
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        raise TypeError("Parameters are saved through state_dict() and rustytorch.save")
