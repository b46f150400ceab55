"""rustytorch.utils.data: Dataset, TensorDataset and DataLoader (batching, seeded shuffling,
drop_last, and collation of tensors, numbers, tuples and dicts)."""
import numbers

import numpy as np

from .. import _C


class Dataset:
    """Anything with __getitem__(i) and __len__()."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); every tensor has the same first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].size(0)
        if any(t.size(0) != n for t in tensors):
            raise ValueError("TensorDataset: tensors differ in their first dimension: "
                             + ", ".join(str(t.size(0)) for t in tensors))
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


def default_collate(batch):
    """Stacks a list of samples: tensors along a new first dim, numbers into a tensor, tuples and
    dicts element by element."""
    first = batch[0]
    if isinstance(first, _C.Tensor):
        return _C.stack(list(batch))
    if isinstance(first, np.ndarray):
        return _C.from_numpy(np.stack(batch))
    if isinstance(first, bool):
        return _C.from_numpy(np.array(batch, dtype=np.bool_))
    if isinstance(first, numbers.Integral):
        return _C.from_numpy(np.array(batch, dtype=np.int64))
    if isinstance(first, numbers.Real):
        return _C.from_numpy(np.array(batch, dtype=np.float64)).float()
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in batch]) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(s) != len(first) for s in batch):
            raise ValueError("default_collate: samples have different lengths")
        return type(first)(default_collate(list(items)) for items in zip(*batch)) if isinstance(first, tuple) \
            else [default_collate(list(items)) for items in zip(*batch)]
    return batch


class Generator:
    """A seeded source of shuffling orders (DataLoader(generator=...))."""

    def __init__(self, seed=0):
        self._rng = np.random.default_rng(seed)

    def manual_seed(self, seed):
        self._rng = np.random.default_rng(seed)
        return self

    def permutation(self, n):
        return self._rng.permutation(n)


class DataLoader:
    """Batches of a dataset: batch_size samples per batch (the last may be smaller unless
    drop_last), in order or shuffled (each epoch a new order from generator, or from a generator
    seeded by rustytorch's RNG), collated by collate_fn."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None, generator=None):
        if batch_size is None or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size}")
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.collate_fn = collate_fn or default_collate
        self.generator = generator

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            gen = self.generator or Generator(int(_C.randint(0, 2 ** 62, (1,)).item()))
            order = gen.permutation(n)
        else:
            order = np.arange(n)
        for start in range(0, n, self.batch_size):
            idx = order[start:start + self.batch_size]
            if len(idx) < self.batch_size and self.drop_last:
                return
            if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
                index = _C.from_numpy(np.array(idx, dtype=np.int64))
                yield tuple(t.index_select(0, index.to(t.device)) for t in self.dataset.tensors)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in idx])
