"""nn.utils: clip_grad_norm_."""
from .. import _C
from ..autograd import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients of parameters in place so that their total norm is at most max_norm;
    returns the total norm before clipping (a 0-d tensor)."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return _C.zeros(())
    norm_type = float(norm_type)
    with no_grad():
        norms = _C.stack([g.detach().norm(norm_type).to(grads[0].device, _C.float32) for g in grads])
        total = norms.norm(norm_type)
        if error_if_nonfinite and not _C.isfinite(total).item():
            raise RuntimeError(f"clip_grad_norm_: the total norm of the gradients is {total.item()}")
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for p in parameters:
            if p.grad is not None:
                p.grad = p.grad.detach() * scale.to(p.grad.device, p.grad.dtype)
    return total
