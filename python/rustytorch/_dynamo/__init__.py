"""rustytorch._dynamo: the parts of torch._dynamo that training scripts touch around torch.compile
(`torch._dynamo.config.cache_size_limit = 64`, `torch._dynamo.reset()`). The library has no graph
compiler, so its settings are kept and have no effect, and the functions are rustytorch.compiler's."""
from ..compiler import allow_in_graph, assume_constant_result, disable, is_compiling, reset
from . import config


def mark_dynamic(tensor, index, *, min=None, max=None):
    """Nothing to mark: no graph is traced, so no shape is specialized."""


mark_static = maybe_mark_dynamic = mark_dynamic
