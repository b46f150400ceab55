"""nn.utils: gradient clipping (the C++ rtx::nn::utils functions, over any iterable of parameters)
and flattening parameters into one vector and back."""

from .. import _C
from ..autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients of parameters (a tensor or any iterable of tensors, such as
    model.parameters()) in place so that their total norm is at most max_norm; returns the total
    norm before clipping (a 0-d tensor). foreach is accepted for PyTorch's signature: the scaling
    never leaves the device either way."""
    del foreach
    return _C._clip_grad_norm_(parameters, float(max_norm), float(norm_type), bool(error_if_nonfinite))


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient of parameters (a tensor or an iterable) to [-clip_value, clip_value] in place."""
    del foreach
    _C._clip_grad_value_(parameters, float(clip_value))


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-d tensor (a differentiable copy)."""
    return _C.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of the 1-d tensor vec into parameters, in order."""
    if not isinstance(vec, _C.Tensor) or vec.dim() != 1:
        raise TypeError(f"vector_to_parameters: expected a 1-d tensor, got {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if total != vec.numel():
        raise _C.ShapeError(f"[vector_to_parameters] the vector has {vec.numel()} elements, the parameters {total}")
    offset = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.copy_(vec[offset:offset + n].view_as(p))
            offset += n
