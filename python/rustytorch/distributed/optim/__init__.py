"""rustytorch.distributed.optim: optimizers for distributed training (torch.distributed.optim):
ZeroRedundancyOptimizer, which shards an optimizer's state across the ranks of a process group."""
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer  # noqa: F401

__all__ = ["ZeroRedundancyOptimizer"]
