"""rustytorch.utils.checkpoint: run part of a model without keeping its activations, recomputing
them during backward (the random state is replayed, so dropout draws the same masks)."""
from .. import _C


def checkpoint(function, *args, use_reentrant=None, **kwargs):
    """function(*args) whose intermediate tensors are recomputed in backward instead of stored.
    Tensor arguments are tracked; function must return a tensor or a tuple of tensors."""
    del use_reentrant  # one implementation serves both of PyTorch's modes
    tensor_positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
    single = []

    def run(*tensors):
        full = list(args)
        for pos, t in zip(tensor_positions, tensors):
            full[pos] = t
        out = function(*full, **kwargs)
        if not single:
            single.append(isinstance(out, _C.Tensor))
        return [out] if isinstance(out, _C.Tensor) else list(out)

    outputs = _C._checkpoint(run, [args[i] for i in tensor_positions])
    return outputs[0] if single and single[0] else tuple(outputs)
