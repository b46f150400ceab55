"""DistributedSampler: the share of a map-style dataset's indices that one process of a distributed
group reads (torch.utils.data.distributed.DistributedSampler). Every rank computes the same order
(a randperm from a generator seeded seed + epoch when shuffling), pads it by repeating indices (or
drops its tail) to a multiple of num_replicas, and keeps every num_replicas-th index from its rank."""
import math

from ... import _C
from ... import distributed as dist
from .sampler import Sampler


class DistributedSampler(Sampler):
    """num_replicas and rank default to the default process group's world size and rank; call
    set_epoch(epoch) before each epoch to reshuffle."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise _C.ValueError(f"DistributedSampler: invalid rank {rank}, rank should be in the interval "
                                f"[0, {num_replicas - 1}] (num_replicas={num_replicas})")
        self.dataset, self.num_replicas, self.rank, self.epoch = dataset, num_replicas, rank, 0
        self.drop_last, self.shuffle, self.seed = drop_last, shuffle, seed
        if drop_last and len(dataset) % num_replicas != 0:
            # the largest multiple of num_replicas below the dataset's length
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            generator = _C.Generator().manual_seed(self.seed + self.epoch)
            indices = _C.randperm(n, generator=generator).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding] if padding > n else indices[:padding]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch the next pass shuffles for (the generator's seed is seed + epoch)."""
        self.epoch = epoch
