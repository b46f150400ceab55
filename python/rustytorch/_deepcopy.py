"""copy.deepcopy of tensors (Tensor.__deepcopy__), as PyTorch's: a leaf tensor copies to a new
tensor with the same values, dtype, device and requires_grad, its .grad copied too; a subclass
keeps its type and its attributes (deep-copied). copy.deepcopy's memo makes a tensor reached twice
(a tied weight) come out as one copy. Only leaves copy: a tensor computed by the graph raises."""
import copy

from . import _C


def _deepcopy(self, memo):
    if not self.is_leaf:
        raise _C.ValueError(f"deepcopy: only tensors created explicitly by the user (graph leaves) can be deep-copied; "
                            f"this one of shape {tuple(self.shape)} was computed by {self._grad_fn_name}")
    data = self.detach().clone()
    if type(self) is _C.Tensor:
        result = data
    else:
        result = type(self).__new__(type(self))
        _C.Tensor.__init__(result, data)
    memo[id(self)] = result
    if self.requires_grad:
        result.requires_grad_(True)
    if self.grad is not None:
        result.grad = copy.deepcopy(self.grad, memo)
    if type(self) is not _C.Tensor:
        result.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return result


_C.Tensor.__deepcopy__ = _deepcopy
