"""rustytorch.utils.data: datasets, samplers, collation and DataLoader, under PyTorch's names
(`from rustytorch.utils.data import DataLoader, Dataset, random_split`)."""
from ._worker import get_worker_info  # noqa: F401
from .collate import default_collate, default_convert  # noqa: F401
from .dataloader import DataLoader  # noqa: F401
from .dataset import (  # noqa: F401
    ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, random_split,
)
from .distributed import DistributedSampler  # noqa: F401
from .sampler import (  # noqa: F401
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler, WeightedRandomSampler,
)
