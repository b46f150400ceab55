"""rustytorch.compile: an identity. The library runs eagerly and has no graph compiler, so
compile(model) returns model itself, and the decorator forms return the function unchanged; the
arguments torch.compile takes are accepted so that scripts calling it run as they are."""


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """model itself; without a model (@compile(mode=...)), a decorator returning its argument."""
    if model is None:
        return lambda fn: fn
    return model
