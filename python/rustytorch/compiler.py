"""rustytorch.compiler: torch.compiler's functions as a library without a graph compiler has them.
rustytorch.compile returns its argument (docs/pytorch_differences.md), so nothing is ever being
compiled: is_compiling() is False, disable and allow_in_graph return the function they are given, and
reset and cudagraph_mark_step_begin have nothing to do."""


def is_compiling():
    """False: code never runs inside a graph compiler here."""
    return False


is_dynamo_compiling = is_compiling


def disable(fn=None, recursive=True, *, reason=None):
    """fn itself (it already runs eagerly); without fn, a decorator returning its argument."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def reset():
    """Nothing is cached by a compiler here."""


def cudagraph_mark_step_begin():
    """Nothing to mark: compile(mode="reduce-overhead") records no CUDA graphs (torch.cuda.graphs does)."""
